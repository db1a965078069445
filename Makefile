# PyTorch Hooks, hands-on -- two commands do everything: `make lab` and `make test`.
SHELL := /bin/bash
.DEFAULT_GOAL := help

# The Python versions the course runs on; pyproject.toml's requires-python and course_utils.machinery.env_check say the same
# (tests/test_pins.py). One virtual environment per Python: make test PYTHON=python3.12 VENV=.venv312
PYTHONS := 3.11 3.12 3.13
VENV   ?= .venv
PY     := $(VENV)/bin/python
# PYTHON makes $(VENV). Not given: the Python of an existing $(VENV), else the first of python3.11, python3.12,
# python3.13, python3 that runs (a pyenv shim may exist without running).
ifeq ($(filter command line environment,$(origin PYTHON)),)
PYTHON := $(or $(wildcard $(PY)),$(shell for p in $(addprefix python,$(PYTHONS)) python3; do \
    $$p -c '' 2>/dev/null && { command -v $$p; break; }; done))
endif
# Rebuild the environment only when the pins, the package metadata or the Python version change. Hashed with Python
# (macOS has no sha256sum); empty when PYTHON does not run, and `make venv` then says so.
ENV_ID := $(shell $(PYTHON) -c 'import hashlib, sys; data = b"".join(open(f, "rb").read() for f in ("requirements.txt", "pyproject.toml")); print("py%d.%d-%s" % (*sys.version_info[:2], hashlib.sha256(data).hexdigest()[:16]))' 2>/dev/null)
STAMP  := $(VENV)/.installed-$(ENV_ID)
GOAL   := $(or $(firstword $(MAKECMDGOALS)),venv)

# Settings shared by nbval (make test) and make refresh, so stored outputs match what CI computes.
export PYTHONHASHSEED := 0
export JUPYTER_PLATFORM_DIRS := 1
export PYDEVD_DISABLE_FILE_VALIDATION := 1
CELL_TIMEOUT ?= 300
# The English notebooks, then the Chinese edition made from them (notebooks/zh/, tools/i18n/editions.py); the pattern
# is notebook_pattern in course_utils/course.toml, the course's settings.
NOTEBOOK_GLOB := $(shell sed -n 's/^notebook_pattern *= *"\(.*\)".*/\1/p' course_utils/course.toml)
NOTEBOOKS := $(sort $(wildcard notebooks/$(NOTEBOOK_GLOB))) $(sort $(wildcard notebooks/zh/$(NOTEBOOK_GLOB)))
# The edition make lab, learner and slides work on: COURSE_LANG=zh for the Chinese one (default English)
COURSE_LANG ?=
EDITION := $(or $(COURSE_LANG),en)
NB ?= $(NOTEBOOKS)
WORKERS ?= 2
# make test and make test-browser: one worker more. Their hub start-ups, page loads, installs and servers leave a core
# idle while they wait, and a third worker fills it (2 cores: 7.5x one strict nbval pass on 2 workers, 6.8x on 3);
# make nbval and make unit are CPU-bound and stay on WORKERS. WORKERS=N on the command line sets both.
TEST_WORKERS ?= $(if $(filter command line environment,$(origin WORKERS)),$(WORKERS),3)
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

.PHONY: sync check translations help venv lab lab-complete lint test test-profile test-browser test-hub test-compat unit nbval nbval-portable refresh bench learner slides site html timings clean hub hub-remove-learner

help:
	@echo "make lab      create .venv if needed, prepare your workspace/ (exercises), open JupyterLab on it (127.0.0.1)"
	@echo "make lab-complete  JupyterLab on notebooks/, the complete notebooks with every solution (instructors)"
	@echo "make test     same environment, then unit tests + strict nbval on every notebook (+ browser tests if Chromium)"
	@echo "make test-profile  make test, measured: CPU and wall time of each unit of work, and the least time its CPU needs"
	@echo "make test-browser  the browser suite alone: each learner notebook in JupyterLab, the hub, the website (screenshots in build/browser)"
	@echo "make test-compat  the course installed with pip on Colab's package set (torch 2.11, Python 3.13) and on the lock,"
	@echo "              every notebook and learner edition run from a temporary folder (tools/compat/; run by .ci/run)"
	@echo "make venv     create/update .venv only (a no-op when the pins did not change)"
	@echo "make refresh  re-execute notebooks in place with CI's settings (NB=notebooks/01_x.ipynb for one)"
	@echo "make learner  learner edition (solutions replaced by stubs) in build/learner"
	@echo "              COURSE_LANG=zh with make lab, learner, slides: the Chinese edition (notebooks/zh/, build/zh/)"
	@echo "              AGENDA=half-day (an agenda of the instructor guide) or NB=\"03 06\" with learner, slides: only those,"
	@echo "              into build/agenda-half-day/ or build/notebooks-03-06/"
	@echo "make sync    after any change: run the generators whose inputs changed (course map, cloud links, agendas, Chinese"
	@echo "             edition, messages, learner editions); prints what changed and what still needs you"
	@echo "make check   the tests of what you changed since the last commit (BASE=main: since main), in minutes, not the course's"
	@echo "make translations  the same as make sync (which updates translations/zh/, rebuilds notebooks/zh/, lists what to translate)"
	@echo "make slides   reveal.js slides per notebook in build/slides (offline)"
	@echo "make site     the course's website in build/site: every page in English and (zh/) Chinese, search, slides (make html: the same)"
	@echo "make timings  measure each notebook's execution time (for the instructor guide)"
	@echo "make bench    time course_utils.saliency against captum and pytorch-grad-cam (a few minutes)"
	@echo "make lint     ruff (lint) and mypy (types) on the course's code, as configured in pyproject.toml (make test runs it)"
	@echo "make unit     unit tests only;  make nbval  notebook checks only;  make test-hub  the hub's own tests (sudo)"
	@echo "make clean    remove .venv, build/ and node_modules/;  python -m tools  lists the verbs these targets run"
	@echo "make nbval-portable  strict nbval with another CPU's kernels (no AVX2/AVX-512): outputs must not depend on the CPU"
	@echo "Another Python (3.11, 3.12, 3.13), one folder each: make test PYTHON=python3.12 VENV=.venv312"

venv: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	@test -n "$(ENV_ID)" || { echo "Cannot run PYTHON=$(or $(PYTHON),python3): not installed, or a pyenv shim of a" \
	    "version not active here (pyenv shell 3.12.1). Install Python $(PYTHONS) (any of them) and name it:" \
	    "make $(GOAL) PYTHON=python3.12 VENV=.venv312" >&2; exit 1; }
	@$(PYTHON) -c 'import sys; v = "%d.%d" % sys.version_info[:2]; sys.exit(0 if v in "$(PYTHONS)".split() else \
	    "$(PYTHON) is Python %s; the course runs on Python $(PYTHONS). Name another: make $(GOAL) PYTHON=python3.12 VENV=.venv312" % v)'
	@test -x $(PY) || { echo "Creating $(VENV) with $(PYTHON)"; $(PYTHON) -m venv $(VENV); }
	@$(PY) -c 'import sys; want, have = "$(ENV_ID)".split("-")[0], "py%d.%d" % sys.version_info[:2]; sys.exit(0 if have == want \
	    else "$(VENV) was made with Python %s, not with PYTHON=$(PYTHON) (%s). One folder per Python: make $(GOAL) PYTHON=$(PYTHON) VENV=.venv%s (or make clean VENV=$(VENV) first)" % (have[2:], want[2:], want[2:].replace(".", "")))'
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	@# requirements.txt pins setuptools, so the build without isolation uses pyproject.toml's exact build backend
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation --check-build-dependencies -e .
	@rm -f $(VENV)/.installed-*
	@touch $@
	@echo "Environment ready: $(VENV) ($(ENV_ID))"

WORKSPACE ?= $(if $(filter zh,$(EDITION)),workspace-zh,workspace)

# nbgitpuller's /git-pull page off: any web page could send your browser there and have it pull a repository into
# your kernel spec (issue 41; it is installed for the deploy/ recipes' gitpuller command).
NO_NBGITPULLER = --ServerApp.jpserver_extensions=nbgitpuller=False

# Self-learners get their own copy of the learner edition (never overwritten); complete notebooks in $(WORKSPACE)/complete.
lab: venv
	$(PY) -m course_utils.machinery.workspace $(WORKSPACE) --lang $(EDITION)
	$(VENV)/bin/jupyter lab --ip=127.0.0.1 --ServerApp.root_dir=$(WORKSPACE) $(ROOT_FLAG) $(NO_NBGITPULLER) \
	    --LabApp.default_url=/lab/tree/00_start_here.ipynb

# The instructor's view: the teaching notebooks with every solution.
lab-complete: venv
	$(VENV)/bin/jupyter lab --ip=127.0.0.1 --ServerApp.root_dir=notebooks $(ROOT_FLAG) $(NO_NBGITPULLER)

# Debian's chromium-headless-shell when installed (a JupyterLab page load costs it about 2.9 CPU-s against 4.5 for the
# full browser's headless mode), else Debian's chromium, as tests/chromium_path.py chooses outside make;
# make test CHROMIUM=/path for another one.
CHROMIUM ?= $(or $(firstword $(wildcard /usr/bin/chromium-headless-shell /usr/bin/chromium)),/usr/bin/chromium)
export COURSE_CHROMIUM := $(CHROMIUM)

# One pytest session for everything: unit tests, strict nbval of every notebook and, when Chromium is here, the
# browser suite, on $(TEST_WORKERS) workers that share the work by units (tests/conftest.py). With the browser suite,
# each learner notebook runs in JupyterLab and not a second time in tests/test_editions.py.
# --timeout: a last resort per test (signal method, so servers and browsers are still stopped); the tests fail
# much sooner with a message naming the notebook and cell.
HAVE_CHROMIUM = $(shell test -x "$(CHROMIUM)" && echo yes)
# The browser suite's JavaScript tools, from npm at the versions package-lock.json pins: axe-core, which checks every
# page of the website for accessibility (tests/browser/test_site.py). npm ci installs exactly the lock.
AXE := node_modules/axe-core/axe.min.js

$(AXE): package.json package-lock.json
	@command -v npm >/dev/null || { echo "The browser tests need npm for axe-core: apt-get install npm (.ci/run installs it)." >&2; exit 1; }
	npm ci --no-audit --no-fund --loglevel=error
	@touch $@

TIMEOUTS := --timeout=600 --timeout-method=signal

# Static checks (pyproject.toml's [tool.ruff] and [tool.mypy]): the linter over every Python file, the type checker
# over course_utils and tools; both keep caches in build/, so a second run rereads only what changed.
lint: venv
	$(PY) -m ruff check
	$(PY) -m mypy

test: venv lint $(if $(HAVE_CHROMIUM),$(AXE))
	@test -n "$(HAVE_CHROMIUM)" || echo "SKIPPED the browser tests: no Chromium at $(CHROMIUM) (apt-get install chromium-headless-shell, or make test CHROMIUM=/path; CI installs it)"
	$(if $(HAVE_CHROMIUM),COURSE_REQUIRE_BROWSER=1) $(PY) -m pytest -n $(TEST_WORKERS) tests $(NOTEBOOKS) \
	    $(if $(HAVE_CHROMIUM),,--ignore=tests/browser) --nbval --nbval-current-env --nbval-cell-timeout=$(CELL_TIMEOUT) \
	    $(TIMEOUTS) --durations=20

# make test, measured: each work unit's CPU (its whole process tree) and wall time, each worker's busy time, and the
# least time the session's CPU needs on this machine's cores (tools/test_profile.py; build/test-profile/).
test-profile: export PYTEST_ADDOPTS := -p tools.test_profile $(PYTEST_ADDOPTS)
test-profile: test

test-browser: venv $(AXE)
	COURSE_REQUIRE_BROWSER=1 $(PY) -m pytest -n $(TEST_WORKERS) tests/browser $(TIMEOUTS) --durations=15

# The supported range, measured: pip install of the course into an environment made from Colab's package snapshot
# (tools/compat/colab-packages.txt, Python 3.13), then every notebook and learner edition run from a temporary folder
# there and with the lock (.venv); records tools/compat/verified.json and the "Last verified" lines. Wheels and the
# snapshot's environment are cached in $(COMPAT_CACHE) (torch 2.11.0 from PyPI: several GB, downloaded once).
# A cell past CELL_TIMEOUT or a notebook past COMPAT_NOTEBOOK_TIMEOUT seconds fails, naming it: nothing hangs the run.
COMPAT_CACHE ?= $(HOME)/.cache/course-compat
COMPAT_PYTHON ?=
COMPAT_NOTEBOOK_TIMEOUT ?= 900
test-compat: venv
	$(PY) -m tools compat --cache $(COMPAT_CACHE) --lock-python $(PY) $(if $(COMPAT_PYTHON),--python $(COMPAT_PYTHON)) \
	    --cell-timeout $(CELL_TIMEOUT) --notebook-timeout $(COMPAT_NOTEBOOK_TIMEOUT)

# The tests split by cost (pyproject.toml's markers, set in tests/conftest.py), each runnable alone: unit, nbval
# (notebooks), test-browser, test-hub.
unit: venv
	$(PY) -m pytest -n $(WORKERS) -m unit tests --ignore=tests/browser

test-hub: venv
	$(PY) -m pytest -m hub tests $(TIMEOUTS)

nbval: venv
	$(PY) -m pytest -n $(WORKERS) --dist loadfile $(NB) --nbval --nbval-current-env --nbval-cell-timeout=$(CELL_TIMEOUT)

# Strict nbval with the kernels of an older CPU: ATen's plain C++ kernels instead of AVX2/AVX-512 ones, and oneDNN
# limited to SSE4.1. The stored outputs must not depend on which kernels run (.ci/run runs this after make test).
PORTABLE_CPU := ATEN_CPU_CAPABILITY=default DNNL_MAX_CPU_ISA=SSE41

nbval-portable: venv
	$(PORTABLE_CPU) $(PY) -m pytest -n $(WORKERS) --dist loadfile $(NB) --nbval --nbval-current-env \
	    --nbval-cell-timeout=$(CELL_TIMEOUT) $(TIMEOUTS)

refresh: venv
	$(PY) -m tools refresh --timeout $(CELL_TIMEOUT) $(NB)

# AGENDA=name (an agenda of the instructor guide) or NB="03 06" (notebook numbers): only those notebooks
AGENDA ?=
learner slides: venv
	$(PY) -m tools $@ --lang $(EDITION) $(if $(AGENDA),--agenda $(AGENDA)) \
	    $(if $(filter command line,$(origin NB)),--notebooks $(NB))

# The course's website, both languages, from the notebooks' stored outputs (myst-nb and the Sphinx book theme, offline;
# tools/site/): build/site/index.html, the Chinese edition in build/site/zh/, the slides beside each. A second build
# rereads only what changed. `make html` is the same (the static pages it used to make are these now).
site: venv
	$(PY) -m tools site

html: site

# Every generator of the course, in order (tools/sync.py, CONTRIBUTING.md "How the course is built"), each only when its
# inputs changed since it last ran (stamps in build/sync/): the message catalogue, solution cells' metadata, cloud links
# and the verified table, the README's course map, the guide's timings and agendas, translations/zh/, the Chinese
# edition, the learner editions. Then: what changed, and what still needs a person.
sync: venv
	$(PY) -m tools sync

# The tests of what changed since the last commit (BASE=main: since the branch left main), read from git: nbval of the
# changed notebooks in both languages, their share of the per-notebook tests, the tests of the changed modules and the
# tests marked as reading a changed file (tools/check.py; python -m tools check --dry-run lists them).
BASE ?=
check: venv
	$(PY) -m tools check $(if $(BASE),--base $(BASE)) $(if $(filter command line,$(origin WORKERS)),--workers $(WORKERS)) \
	    --cell-timeout $(CELL_TIMEOUT)

# The same as make sync (which brings translations/zh/ in line, rebuilds notebooks/zh/ and lists what to translate).
translations: sync

timings: venv
	$(PY) -m tools timings

bench: venv
	$(PY) benchmarks/bench_saliency.py

# The classroom: JupyterHub for a room, on 127.0.0.1:8000 unless HUB_IP says otherwise (see tools/hub/serve.py and the
# instructor guide, "Serving a room with JupyterHub"); state in .hub/; Ctrl-C stops the hub and every learner's server.
hub: venv
	$(PY) -m tools.hub.serve

# Archive a learner's home into .hub/private/archive/, end their processes, remove the system account, retire the name.
hub-remove-learner: venv
	@test -n "$(LEARNER)" || { echo "usage: sudo make hub-remove-learner LEARNER=name" >&2; exit 2; }
	$(PY) -m tools.hub.serve remove-learner $(LEARNER)

clean:
	rm -rf $(VENV) build node_modules
