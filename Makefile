# gpudiag: `make demo` and `make test` do all set-up on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
LOGDIR ?= runs
PYTEST_ARGS ?=

.PHONY: demo test lint venv clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Installed (editable) when pyproject.toml changes.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

venv: $(VENV)/.installed

demo: $(VENV)/.installed
	@$(BIN)/python scripts/demo.py --logdir $(LOGDIR)

lint: $(VENV)/.installed
	$(BIN)/ruff check gpudiag tests benchmarks scripts
	$(BIN)/mypy gpudiag

test: lint
	$(BIN)/python -m pytest $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
