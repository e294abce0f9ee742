"""SmolLM2-135M's architecture, tokenizer and chat template with random weights: speed figures on a machine its
weights cannot reach (benchmarks/gpu/run.sh).

    python3 benchmarks/gpu/random_smol.py CONFIG_FOLDER OUT_FOLDER
"""

from __future__ import annotations

import shutil
import sys


def main(src: str, dst: str) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(src))
    shutil.copytree(src, dst, dirs_exist_ok=True)
    model.save_pretrained(dst)
    print(f"random weights, {sum(p.numel() for p in model.parameters()) / 1e6:.1f} M parameters -> {dst}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
