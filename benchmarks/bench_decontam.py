"""Decontamination speed: exact Jaccard through the inverted index vs comparing with every item.

    .venv/bin/python benchmarks/bench_decontam.py [N_TRAINING] [N_CANDIDATES]

Synthetic instructions (60-120 words from a 3,000-word vocabulary, like ClawGym's 13.5K
training prompts in size); both methods must find the same nearest neighbours.
"""

from __future__ import annotations

import random
import sys
import time

from clawsdk.bench.decontam import TrainingSet, jaccard, shingles


def main() -> None:
    n_train = int(sys.argv[1]) if len(sys.argv) > 1 else 13_500
    n_cand = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    rng = random.Random(0)
    vocab = [f"w{i}" for i in range(3000)]
    train = [" ".join(rng.choices(vocab, k=rng.randint(60, 120))) for _ in range(n_train)]
    cands = []
    for i in range(n_cand):  # half paraphrases of training items, half new
        if i % 2:
            words = train[rng.randrange(n_train)].split()
            words[rng.randrange(len(words))] = "changed"
            cands.append(" ".join(words))
        else:
            cands.append(" ".join(rng.choices(vocab, k=90)))

    t0 = time.perf_counter()
    ts = TrainingSet(instructions=list(train))
    t_index = time.perf_counter() - t0
    t0 = time.perf_counter()
    fast = [ts.nearest(c) for c in cands]
    t_fast = time.perf_counter() - t0

    sh = [shingles(t) for t in train]  # not timed: both methods need the shingles
    t0 = time.perf_counter()
    naive = []
    for c in cands:
        mine = shingles(c)
        naive.append(max(((jaccard(mine, s), i) for i, s in enumerate(sh)), key=lambda x: x[0]))
    t_naive = time.perf_counter() - t0

    agree = sum(abs(f[0] - n[0]) < 1e-12 for f, n in zip(fast, naive, strict=True))
    print(f"training items {n_train}, candidates {n_cand}")
    print(f"index build            {t_index:8.2f} s  (shingling included; once per export)")
    print(f"inverted-index lookup  {t_fast:8.3f} s  ({1000 * t_fast / n_cand:.2f} ms/candidate)")
    print(f"all-pairs baseline     {t_naive:8.3f} s  ({1000 * t_naive / n_cand:.2f} ms/candidate)")
    print(f"speed-up (lookup)      {t_naive / t_fast:8.1f}x")
    print(f"same best similarity   {agree}/{n_cand}")


if __name__ == "__main__":
    main()
