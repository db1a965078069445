# PyTorch Hooks, hands-on -- two commands do everything: `make lab` and `make test`.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV   ?= .venv
PY     := $(VENV)/bin/python
# The environment is rebuilt only when the pins (or the package metadata) change.
PINS_HASH := $(shell cat requirements.txt pyproject.toml | sha256sum | cut -c1-16)
STAMP  := $(VENV)/.installed-$(PINS_HASH)

# Settings shared by nbval (make test) and make refresh, so stored outputs match what CI computes.
export PYTHONHASHSEED := 0
export JUPYTER_PLATFORM_DIRS := 1
export PYDEVD_DISABLE_FILE_VALIDATION := 1
CELL_TIMEOUT ?= 300
NOTEBOOKS := $(sort $(wildcard notebooks/[0-9][0-9]_*.ipynb))
NB ?= $(NOTEBOOKS)
WORKERS ?= 2
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

.PHONY: help venv lab lab-complete test test-browser unit nbval refresh bench learner slides html timings clean hub

help:
	@echo "make lab      create .venv if needed, prepare your workspace/ (exercises), open JupyterLab on it (127.0.0.1)"
	@echo "make lab-complete  JupyterLab on notebooks/, the complete notebooks with every solution (instructors)"
	@echo "make test     same environment, then unit tests + strict nbval on every notebook (+ browser tests if Chromium)"
	@echo "make test-browser  every notebook run in JupyterLab in headless Chromium (screenshots in build/browser)"
	@echo "make venv     create/update .venv only (a no-op when the pins did not change)"
	@echo "make refresh  re-execute notebooks in place with CI's settings (NB=notebooks/01_x.ipynb for one)"
	@echo "make learner  learner edition (solutions replaced by stubs) in build/learner"
	@echo "make slides   reveal.js slides per notebook in build/slides (offline)"
	@echo "make html     static HTML of the executed course in build/html (open build/html/index.html)"
	@echo "make timings  measure each notebook's execution time (for the instructor guide)"
	@echo "make bench    time course_utils.saliency against captum and pytorch-grad-cam (a few minutes)"
	@echo "make unit     unit tests only;  make nbval  notebook checks only;  make clean  remove .venv and build/"

venv: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	@test -x $(PY) || { echo "Creating $(VENV) with $(PYTHON)"; $(PYTHON) -m venv $(VENV); }
	@$(PY) -c 'import sys; v = sys.version_info[:2]; sys.exit(0 if v == (3, 11) else "The course is pinned for Python 3.11, this venv has %d.%d: make clean && make venv PYTHON=python3.11" % v)'
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	@rm -f $(VENV)/.installed-*
	@touch $@
	@echo "Environment ready: $(VENV) ($(PINS_HASH))"

WORKSPACE ?= workspace

# Self-learners get their own copy of the learner edition (never overwritten); complete notebooks in $(WORKSPACE)/complete.
lab: venv
	$(PY) -m course_utils.workspace $(WORKSPACE)
	$(VENV)/bin/jupyter lab --ip=127.0.0.1 --ServerApp.root_dir=$(WORKSPACE) $(ROOT_FLAG) \
	    --LabApp.default_url=/lab/tree/00_start_here.ipynb

# The instructor's view: the teaching notebooks with every solution.
lab-complete: venv
	$(VENV)/bin/jupyter lab --ip=127.0.0.1 --ServerApp.root_dir=notebooks $(ROOT_FLAG)

CHROMIUM ?= /usr/bin/chromium
export COURSE_CHROMIUM := $(CHROMIUM)

test: venv
	$(PY) -m pytest -n $(WORKERS) --dist loadfile tests $(NOTEBOOKS) --ignore=tests/browser \
	    --nbval --nbval-current-env --nbval-cell-timeout=$(CELL_TIMEOUT)
	@if [ -x "$(CHROMIUM)" ]; then $(MAKE) --no-print-directory test-browser; \
	else echo "SKIPPED the browser tests: no Chromium at $(CHROMIUM) (apt-get install chromium, or make test CHROMIUM=/path; CI installs it)"; fi

# --timeout: a last resort per test (signal method, so servers and browsers are still stopped); the tests fail
# much sooner with a message naming the notebook and cell.
test-browser: venv
	COURSE_REQUIRE_BROWSER=1 $(PY) -m pytest tests/browser -p no:cacheprovider \
	    --timeout=600 --timeout-method=signal --durations=15

unit: venv
	$(PY) -m pytest -n $(WORKERS) --dist loadfile tests --ignore=tests/browser

nbval: venv
	$(PY) -m pytest -n $(WORKERS) --dist loadfile $(NB) --nbval --nbval-current-env --nbval-cell-timeout=$(CELL_TIMEOUT)

refresh: venv
	$(PY) tools/refresh_notebooks.py --timeout $(CELL_TIMEOUT) $(NB)

learner slides html: venv
	$(PY) tools/build_editions.py $@

timings: venv
	$(PY) tools/time_notebooks.py

bench: venv
	$(PY) benchmarks/bench_saliency.py

# The classroom: JupyterHub for a room, on 127.0.0.1:8000 unless HUB_IP says otherwise (see tools/hub/serve.py and the
# instructor guide, "Serving a room with JupyterHub"); state in .hub/; Ctrl-C stops the hub and every learner's server.
hub: venv
	$(PY) tools/hub/serve.py

clean:
	rm -rf $(VENV) build
