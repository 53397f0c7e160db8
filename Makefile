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
         --nbval-sanitize-with tests/nbval-sanitize.cfg --nbval-cell-timeout 900 -q

.PHONY: venv book test unit nbval times outputs student grade bench clean

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

book: venv
	$(JB) build . -W -n --keep-going
	@echo "The book is at $(CURDIR)/_build/html/index.html"

unit: venv
	$(PY) -m pytest -n 2 -q tests

nbval: venv
	$(NBVAL) $(NB)

times:
	@cat _build/notebook_times.txt 2>/dev/null || echo "no notebook times yet (run make nbval)"

# mathref unit tests, checker, structure and student tests; every notebook under nbval;
# the warning-free book; then the per-notebook time table.
test: venv
	@start=$$(date +%s); \
	$(MAKE) --no-print-directory unit && \
	$(MAKE) --no-print-directory nbval && \
	$(MAKE) --no-print-directory book; status=$$?; \
	echo; $(MAKE) --no-print-directory times; \
	echo "make test: $$(( $$(date +%s) - start )) s, exit status $$status"; exit $$status

# Re-execute notebooks in place (all, or NB=notebooks/01_gradient_descent.ipynb), on CPU.
outputs: venv
	@for nb in $(NB); do \
	  echo "executing $$nb"; \
	  $(VENV)/bin/jupyter nbconvert --to notebook --execute --inplace \
	    --ExecutePreprocessor.timeout=1200 --ExecutePreprocessor.record_timing=False \
	    --ExecutePreprocessor.kernel_name=python3 "$$nb" || exit 1; \
	done

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
	rm -rf _build student .pytest_cache .hypothesis
