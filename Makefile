# gpudiag: `make demo` and `make test` do all set-up on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
LOGDIR ?= runs
PYTEST_ARGS ?=

CHROMIUM ?= /usr/bin/chromium

.PHONY: demo check test lint venv clean browser screenshots sample-runs bytecode

# pip says only what failed: no progress, no notices, no warnings.
PIP := $(BIN)/python -m pip --quiet --quiet --disable-pip-version-check

$(BIN)/python:
	@echo "creating $(VENV) with $(PYTHON)"
	@$(PYTHON) -m venv $(VENV)
	@$(PIP) install --upgrade pip

# Installed (editable) when pyproject.toml changes: what gpudiag needs for `make demo`,
# and the test extra (pytest, ruff, mypy, playwright) only for the targets that use it.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	@echo "installing gpudiag into $(VENV) (a few minutes the first time)"
	@$(PIP) install -e .
	@touch $@

$(VENV)/.installed-test: pyproject.toml $(VENV)/.installed
	@echo "installing the test extra into $(VENV)"
	@$(PIP) install -e '.[test]'
	@touch $@

venv: $(VENV)/.installed

demo: $(VENV)/.installed bytecode
	@$(BIN)/python scripts/demo.py --logdir $(LOGDIR)

# gpudiag's own modules compiled once (under a second). Where PYTHONDONTWRITEBYTECODE is
# set (this project's machines set it), Python would otherwise compile them again in every
# process that imports them: 0.3 s of CPU per gpudiag command, and the suite starts about
# a thousand processes.
bytecode: $(VENV)/.installed
	@$(BIN)/python -m compileall -q gpudiag

lint: $(VENV)/.installed-test
	$(BIN)/ruff check gpudiag tests benchmarks scripts
	$(BIN)/mypy gpudiag

# The browser test's chromium: Debian's package, installed when it is missing and apt-get
# can run as root; otherwise the browser test skips and says why.
browser:
	@if [ -x $(CHROMIUM) ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing chromium for the browser test (apt-get)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null \
		|| echo "chromium could not be installed: the browser test will skip"; \
	else echo "no $(CHROMIUM) and no root apt-get: the browser test will skip"; fi

# The tiers (tests/README.md): unit (pure), cli (processes, no TensorFlow program), e2e
# (TensorFlow programs, TensorBoard, clusters), browser (chromium). On both cores
# (pytest-xdist), each module's tests on one worker so its module-scoped runs are made
# once; the golden runs (tests/golden.py) are made once for both workers.
XDIST ?= -n 2 --dist loadscope
# unit and cli have no costly module-scoped run: each test goes to the worker that is free.
CHECK_XDIST ?= -n 2 --dist worksteal

# Before every commit: lint, the unit and cli tiers (under 4 minutes on 2 cores).
check: lint bytecode
	$(BIN)/python -m pytest -q $(CHECK_XDIST) tests/unit tests/cli $(PYTEST_ARGS)

# The README's test command, and CI's: lint and every tier, the 25 slowest tests listed.
test: lint browser bytecode
	$(BIN)/python -m pytest $(XDIST) --durations=25 $(PYTEST_ARGS)

# docs/images: the screenshots the user guide shows, taken by the browser test.
screenshots: $(VENV)/.installed-test browser
	GPUDIAG_SCREENSHOTS=docs/images $(BIN)/python -m pytest -q tests/browser

# sample_runs/: every command run again, one logdir per command.
sample-runs: $(VENV)/.installed
	$(BIN)/python scripts/sample_runs.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
