# Quick start: `make demo` and `make test` each create .venv when missing and install
# what they run: the demo kerasgen with TensorFlow and scikit-learn (`.[demo]`), the tests
# everything the suite uses (`.[test]`, a superset).
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.kerasgen-installed
DEMO_STAMP := $(VENV)/.kerasgen-demo
export KERAS_BACKEND ?= tensorflow
export TF_CPP_MIN_LOG_LEVEL ?= 2

.PHONY: demo test test-fast test-tensorflow test-jax lint typecheck docs notebooks package install clean

install: $(STAMP)

# the venv, after Python 3.11 or newer (setup.py's python_requires) is checked
$(VENV)/bin/python:
	@$(PYTHON) -c "$$PYTHON_CHECK"
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip

# `make demo`: kerasgen (editable) and what examples/quickstart.py imports
$(DEMO_STAMP): setup.py pyproject.toml | $(VENV)/bin/python
	@$(PYTHON) -c "$$PYTHON_CHECK"
	@echo "Installing kerasgen (editable) with TensorFlow and scikit-learn into $(VENV)/: a minute or two the first time."
	$(VENV)/bin/python -m pip install --progress-bar off -e ".[demo]"
	touch $(DEMO_STAMP)
	@echo "Installed. To use its python and the kerasgen command: source $(VENV)/bin/activate"

# `make test` (and `make install`): the test extras, a superset of the demo's.
# KerasHub (tests/test_kerashub.py) with --no-deps: its declared dependencies pull the
# full TensorFlow and tensorflow-text; it imports tokenizers and regex besides what the
# test extras hold
$(STAMP): setup.py pyproject.toml Makefile | $(VENV)/bin/python
	@$(PYTHON) -c "$$PYTHON_CHECK"
	@echo "Installing kerasgen (editable) and its test extras into $(VENV)/: a few minutes the first time."
	$(VENV)/bin/python -m pip install --progress-bar off -e ".[test]"
	$(VENV)/bin/python -m pip install --progress-bar off --no-deps "keras-hub==0.32.*" \
		"tokenizers>=0.20,<1" "regex>=2022"
	touch $(STAMP) $(DEMO_STAMP)
	@echo "Installed. To use its python and the kerasgen command: source $(VENV)/bin/activate"

define PYTHON_CHECK
import sys
if sys.version_info < (3, 11):
    sys.exit(f"kerasgen needs Python 3.11 or newer; {sys.executable} is "
             f"{sys.version.split()[0]}. Pass one: make demo PYTHON=python3.11")
endef
export PYTHON_CHECK

demo: $(DEMO_STAMP)
	$(VENV)/bin/python examples/quickstart.py

# the suite in two processes or more (pytest-xdist; at most 4): its cases wait on child
# processes and servers as much as they compute, so two share two cores well (under 10
# minutes on 2 cores, where one process took 12); the cases of one xdist_group run in
# one process (the Ray tests share one local cluster: tests/raycluster.py)
PYTEST_PROCESSES ?= -n auto --maxprocesses=4 --dist loadgroup

test: $(STAMP)
	$(VENV)/bin/python -m pytest -q $(PYTEST_PROCESSES)

# the suite without the cases marked slow (over 10 s each: child processes, examples)
test-fast: $(STAMP)
	$(VENV)/bin/python -m pytest -q $(PYTEST_PROCESSES) -m "not slow"

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

# the documentation site (mkdocs.yml) into site/; --strict: a broken link, a missing page
# or an API name that does not resolve fails it. NO_MKDOCS_2_WARNING: Material's banner.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# runs the notebooks of examples/ again and keeps their outputs in the files
notebooks: $(STAMP)
	$(VENV)/bin/python examples/run_notebooks.py --write

# the sdist and wheel into dist/, checked, the wheel installed into a fresh venv that
# runs the README's 30-second example (.ci/package.py)
package: $(STAMP)
	$(VENV)/bin/python .ci/package.py

clean:
	rm -rf $(VENV) .venv-* build dist site *.egg-info .pytest_cache
