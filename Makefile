# The course's commands. `make book` and `make test` work on a fresh machine with Python 3.11.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
JB := $(VENV)/bin/jupyter-book
NOTEBOOKS := $(sort $(wildcard notebooks/*.ipynb))
NB ?= $(NOTEBOOKS)

# One environment for stored outputs and for their regression test: same threads, CPU only,
# and this checkout's mathref ahead of any installed copy.
export OMP_NUM_THREADS := 2
export MKL_NUM_THREADS := 2
export MATHREF_DEVICE := cpu
export PYTHONPATH := $(CURDIR)
export PYTHONHASHSEED := 0
export PYDEVD_DISABLE_FILE_VALIDATION := 1
# Tiny Shakespeare: $MATHREF_DATA if set, else ../shared/data when it is there.
MATHREF_DATA ?= $(if $(wildcard ../shared/data/tinyshakespeare.txt),$(abspath ../shared/data),)
export MATHREF_DATA

NBVAL := $(PY) -m pytest -p tests.nbval_conftest --nbval --nbval-current-env \
         --nbval-sanitize-with tests/nbval-sanitize.cfg --nbval-cell-timeout 600 -q

.PHONY: venv book browser test unit nbval nbval-perturbed times outputs student grade bench mutants clean

# Browser-side assets, so the built book reads offline: MathJax 3 (equations) and the
# ipywidgets embed manager with RequireJS (widget snapshots). Fetched with npm from its
# registry (exact versions below) into the git-ignored _vendor/, copied into the HTML by
# Sphinx (html_static_path and mathjax_path in _config.yml). Never committed.
MATHJAX_VERSION := 3.2.2
REQUIREJS_VERSION := 2.3.4
HTML_MANAGER_VERSION := 1.0.6
VENDOR_STAMP := _vendor/.installed-mathjax-$(MATHJAX_VERSION)-requirejs-$(REQUIREJS_VERSION)-html-manager-$(HTML_MANAGER_VERSION)
$(VENDOR_STAMP):
	@set -e; rm -rf _vendor; mkdir -p _vendor/pkgs _vendor/static/widgets/html-manager; \
	echo "fetching MathJax $(MATHJAX_VERSION), RequireJS $(REQUIREJS_VERSION), html-manager $(HTML_MANAGER_VERSION) with npm"; \
	cd _vendor/pkgs; \
	npm pack --silent mathjax@$(MATHJAX_VERSION) requirejs@$(REQUIREJS_VERSION) \
	  @jupyter-widgets/html-manager@$(HTML_MANAGER_VERSION) > /dev/null; \
	mkdir mathjax requirejs html-manager; \
	tar xzf mathjax-$(MATHJAX_VERSION).tgz -C mathjax --strip-components 1; \
	tar xzf requirejs-$(REQUIREJS_VERSION).tgz -C requirejs --strip-components 1; \
	tar xzf jupyter-widgets-html-manager-$(HTML_MANAGER_VERSION).tgz -C html-manager --strip-components 1; \
	cd ../static; \
	cp -r ../pkgs/mathjax/es5 mathjax; \
	cp ../pkgs/requirejs/require.js widgets/require.js; \
	cp ../pkgs/html-manager/dist/* widgets/html-manager/; \
	rm -f widgets/html-manager/*.map widgets/html-manager/embed.js widgets/html-manager/libembed-amd.js; \
	cd ../..; rm -rf _vendor/pkgs; touch $@


# The environment is (re)installed when requirements.txt or pyproject.toml change (by content).
ENV_HASH := $(shell cat requirements.txt pyproject.toml | sha256sum | cut -c1-16)
venv:
	@if [ "$$(cat $(VENV)/.installed 2>/dev/null)" != "$(ENV_HASH)" ]; then \
	  set -e; \
	  test -x $(PY) || $(PYTHON) -m venv $(VENV); \
	  $(PY) -m pip install --quiet --upgrade pip; \
	  $(PY) -m pip install --quiet -r requirements.txt; \
	  $(PY) -m pip install --quiet --no-deps --no-build-isolation -e .; \
	  $(PY) -c "import matplotlib.pyplot"; \
	  echo $(ENV_HASH) > $(VENV)/.installed; \
	fi

# The math reference and pitfalls pages are generated (book/make_reference_pages.py).
book: venv $(VENDOR_STAMP)
	$(PY) book/make_reference_pages.py
	$(JB) build . -W -n --keep-going
	@echo "The book is at $(CURDIR)/_build/html/index.html"

unit: venv
	$(PY) -m pytest -n 2 -q tests --ignore=tests/test_browser.py

# The built book in headless Chromium (tests/test_browser.py): run after `make book`.
browser: venv
	$(PY) -m pytest -q -rs tests/test_browser.py

nbval: venv
	$(NBVAL) $(NB)

# The same comparison in another numeric environment: no vector kernels beyond the baseline,
# MKL's reproducible code path, one thread. Stored outputs must hold here too.
PERTURBED := ATEN_CPU_CAPABILITY=default MKL_CBWR=COMPATIBLE OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
nbval-perturbed: venv
	$(PERTURBED) $(NBVAL) $(NB)

times:
	@cat _build/notebook_times.txt 2>/dev/null || echo "no notebook times yet (run make nbval)"
	@if [ -f _build/notebook_times_perturbed.txt ]; then \
	  echo; echo "Perturbed environment ($(PERTURBED)):"; cat _build/notebook_times_perturbed.txt; fi

# mathref unit tests, checker, structure and student tests; every notebook under nbval, then
# again in the perturbed numeric environment; the warning-free book, then that book in a
# browser; then the per-notebook time tables of both nbval passes.
test: venv
	@start=$$(date +%s); \
	$(MAKE) --no-print-directory unit && \
	$(MAKE) --no-print-directory nbval && \
	cp _build/notebook_times.txt _build/notebook_times_normal.txt && \
	$(MAKE) --no-print-directory nbval-perturbed && \
	mv _build/notebook_times.txt _build/notebook_times_perturbed.txt && \
	mv _build/notebook_times_normal.txt _build/notebook_times.txt && \
	$(MAKE) --no-print-directory book && \
	$(MAKE) --no-print-directory browser; status=$$?; \
	echo; $(MAKE) --no-print-directory times; \
	echo "make test: $$(( $$(date +%s) - start )) s, exit status $$status"; exit $$status

# Re-execute notebooks in place (all, or NB=notebooks/01_gradient_descent.ipynb), on CPU.
# A cell that runs past 600 s fails (a kernel that went idle without replying, the ipykernel 7
# hang, would otherwise wait for ever); a notebook that timed out is tried once more.
EXECUTE := $(VENV)/bin/jupyter nbconvert --to notebook --execute --inplace \
    --ExecutePreprocessor.timeout=600 --ExecutePreprocessor.record_timing=False \
    --ExecutePreprocessor.kernel_name=python3
outputs: venv
	@for nb in $(NB); do \
	  echo "executing $$nb"; \
	  $(EXECUTE) "$$nb" 2> >(tee _build_execute.log >&2) && continue; \
	  if grep -q "CellTimeoutError\|Timeout waiting" _build_execute.log; then \
	    echo "$$nb: a cell timed out (kernel hang?); executing it once more"; \
	    $(EXECUTE) "$$nb" && continue; \
	  fi; rm -f _build_execute.log; exit 1; \
	done; rm -f _build_execute.log

# Apply single-line mutations to mathref, one at a time, and report which suite catches each
# (tests/mutants.py). MUTANTS_OPTS="--first" stops at the first suite that catches a mutant.
mutants: venv
	$(PY) -m tests.mutants $(MUTANTS_OPTS)

student: venv
	$(PY) -m mathref.student notebooks student

# Grade submitted student notebooks: make grade SUBMISSIONS=folder-of-<student>.ipynb
# (GRADE_OPTS="--timeout 300 --jobs 2" for more); writes grades.csv and grades_report.txt.
grade: venv
	@test -n "$(SUBMISSIONS)" || { echo "usage: make grade SUBMISSIONS=dir [GRADE_OPTS=...]"; exit 2; }
	$(PY) -m mathref.grade $(SUBMISSIONS) --out grades.csv --report grades_report.txt $(GRADE_OPTS)

bench: venv
	@for b in benchmarks/*.py; do [ -e "$$b" ] && $(PY) "$$b"; done; true

clean:
	rm -rf _build _vendor student .pytest_cache .hypothesis
