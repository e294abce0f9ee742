#!/bin/bash
# The device check: clawsdk's CUDA paths (training, the transformers backend) on a GPU machine that reaches no
# network. Prepare it here with benchmarks/gpu/prepare.sh, then run it there with `.whl` and `.gpu` carried.
# Each step has its own time limit and writes its log to $OUT (default: .gpu/out).
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-.gpu/out}; mkdir -p "$OUT"
t0=$(date +%s)
step() { echo; echo "=== $1 (at $(( $(date +%s) - t0 )) s)"; }
step install
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD:$PWD/plugins:$PWD/tools:$PWD/skills:$PWD/tui PATH=/tmp/site/bin:$PATH
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 CLAWSDK_TEST_TINY=1 TOKENIZERS_PARALLELISM=false PYTEST_DISABLE_PLUGIN_AUTOLOAD=1
step env
nvidia-smi -L
python3 -c "import sys,torch,transformers,trl;print(sys.version.split()[0],'torch',torch.__version__,torch.cuda.is_available(),torch.cuda.get_device_name(0),'transformers',transformers.__version__,'trl',trl.__version__)"
step "tests on CUDA"
timeout 150 python3 -m pytest -q -rfE -p anyio.pytest_plugin -p pytest_timeout --timeout 150 -p no:cacheprovider \
  tests/train tests/models/test_local_backend.py 2>&1 | tee $OUT/pytest.log | tail -30
step "SmolLM2-135M architecture, random weights"
python3 benchmarks/gpu/random_smol.py .gpu/smol /tmp/smol 2>&1 | tail -1
step "SFT, 3 epochs of the example tasks' oracle trajectories"
timeout 90 python3 -m clawsdk train sft -d .gpu/datasets/gpu-sft-v1 -m /tmp/smol --epochs 3 --out /tmp/ck --db /tmp/gpu.db > $OUT/sft.log 2>&1; echo "rc $?"
grep -v "Writing model\|Loading weights\|FutureWarning\|warnings.warn" $OUT/sft.log | tail -5
step "generation through the transformers backend"
timeout 120 python3 benchmarks/embedded_model.py --model transformers:/tmp/smol --tokens 64 --concurrency 8 --cases turns 2>&1 | tee $OUT/generation.log | tail -14
step "learning.py --tiny"
timeout 120 python3 benchmarks/learning.py --tiny --out /tmp/tiny > $OUT/learning-tiny.log 2>&1; echo "rc $?"
grep -E "^\| |grpo:|trained" $OUT/learning-tiny.log | head -30
step done
