# Quick start: `make demo` and `make test` each create .venv when missing and install.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.kerasgen-installed
export KERAS_BACKEND ?= tensorflow
export TF_CPP_MIN_LOG_LEVEL ?= 2

.PHONY: demo test test-fast test-tensorflow test-jax lint typecheck install clean

install: $(STAMP)

$(STAMP): setup.py pyproject.toml
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet -e ".[test]"
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/python examples/quickstart.py

test: $(STAMP)
	$(VENV)/bin/python -m pytest -q

# the suite without the cases marked slow (over 10 s each: child processes, examples)
test-fast: $(STAMP)
	$(VENV)/bin/python -m pytest -q -m "not slow"

# ruff, configured in pyproject.toml
lint: $(STAMP)
	$(VENV)/bin/ruff check .

# mypy over the whole package, configured in pyproject.toml
typecheck: $(STAMP)
	$(VENV)/bin/mypy

# one target per Keras backend (tests/conftest.py says which tests run off TensorFlow,
# docs/backends.md has the table); PyTorch's CPU wheel is too large for CI
test-tensorflow: test

test-jax: $(STAMP)
	KERAS_BACKEND=jax $(VENV)/bin/python -m pytest -q

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
