"""Synthesis throughput: procedural generation alone (the baseline) against generation with the
execution gate (validation in the sandbox), and validity per family.

    .venv/bin/python benchmarks/synth.py [--per-family 5] [--generate 100] [--concurrency 4]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import Counter

import anyio

from clawsdk.store.store import Store
from clawsdk.synth.families import FAMILIES
from clawsdk.synth.procedural import generate, synthesize_procedural
from clawsdk.synth.records import SynthRecords


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--generate", type=int, default=100, help="tasks per family for the generation-only baseline")
    ap.add_argument("--per-family", type=int, default=5, help="tasks per family generated and validated")
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    fams = list(FAMILIES.values())

    n = a.generate * len(fams)
    t0 = time.perf_counter()
    hashes = {t.hash for t in generate(fams, n, a.seed)}
    gen_s = time.perf_counter() - t0
    print(f"generation only: {n} tasks ({len(hashes)} distinct) in {gen_s:.2f} s = {n / gen_s:,.0f} tasks/s")

    n2 = a.per_family * len(fams)
    with tempfile.TemporaryDirectory() as tmp, Store(f"{tmp}/s.db") as store:
        records = SynthRecords(store)
        result = anyio.run(lambda: synthesize_procedural(
            fams, n2, a.seed + 1, f"{tmp}/out", records=records, run_id="bench", concurrency=a.concurrency))
        summary = records.summary("bench")
    rate = result.throughput
    print(f"generate + validate + write + record: {n2} tasks in {result.elapsed_s:.1f} s = {rate:.2f} tasks/s "
          f"(concurrency {a.concurrency}); {n / gen_s / rate:,.0f}x slower than generation alone")
    print(f"validity: {result.accepted}/{n2} = {result.accepted / n2:.1%}")
    for family, c in summary["groups"].items():
        print(f"  {family:22s} {c.get('accepted', 0)}/{c['generated']}")
    print("rejections:", Counter({f"{s}: {r}": k for (s, r), k in summary["reasons"]}) or "none")


if __name__ == "__main__":
    main()
