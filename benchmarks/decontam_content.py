"""How often the near-duplicate test pairs distinct tasks, per signal, and whether it still catches a
held-out task that was reworded and had its files renamed.

    .venv/bin/clawsdk synth procedural --families all --n 600 --seed 1 --out /tmp/proc --no-validate \
        --db /tmp/synth.db
    .venv/bin/python benchmarks/decontam_content.py /tmp/proc examples/tasks \
        clawgym:tests/fixtures/clawgym pinchbench:tests/fixtures/pinchbench

Prints: the files distinct tasks share byte for byte; the pairs of distinct tasks each content signal
(hidden files, workspace, reference solution) and the instruction signal flag; holding out every sixth
task, how many of the others are flagged as its near-duplicates (what `data select
--exclude-tasks-from` drops); and how many held-out tasks are still caught once reworded and renamed.
"""

from __future__ import annotations

import sys
import time
from collections import Counter, defaultdict
from itertools import combinations

from clawsdk.bench.decontam import DEFAULT_THRESHOLD, TrainingSet, fingerprint, jaccard, shingles
from clawsdk.tasks.model import File
from clawsdk.tasks.sources import load_tasks


def main(sources: list[str]) -> None:
    tasks = []
    for src in sources:
        loaded = load_tasks(src)
        tasks += loaded.tasks
        print(f"{src}: {len(loaded.tasks)} tasks ({len(loaded.errors)} unreadable)")
    tasks = list({t.hash: t for t in tasks}.values())
    started = time.perf_counter()

    shared: dict[tuple, set[str]] = defaultdict(set)
    for t in tasks:
        for kind, files in (("workspace", t.workspace), ("hidden", t.hidden)):
            for f in files:
                shared[kind, f.path.rsplit("/", 1)[-1], f.data].add(t.id)
    common = Counter((kind, name) for (kind, name, _), ids in shared.items() if len(ids) > 1)
    print(f"{len(tasks)} distinct tasks; files shared byte for byte by 2+ of them (kind, name: contents):")
    for (kind, name), n in common.most_common(8):
        most = max(len(ids) for (k, nm, _), ids in shared.items() if (k, nm) == (kind, name))
        print(f"   {kind} {name}: {n} (up to {most} tasks)")

    groups: dict[tuple, set[str]] = defaultdict(set)
    for t in tasks:
        for signal, digest in fingerprint(t).items():
            groups[signal, digest].add(t.id)
    pairs = Counter()
    for (signal, _), ids in groups.items():
        pairs[signal] += len(ids) * (len(ids) - 1) // 2
    print(f"content signals, pairs of distinct tasks flagged of {len(tasks) * (len(tasks) - 1) // 2:,}: "
          + ", ".join(f"{s} {pairs[s]}" for s in ("hidden", "workspace", "solution")))
    sh = [shingles(t.instruction) for t in tasks]
    flagged = [(i, j) for i, j in combinations(range(len(tasks)), 2) if jaccard(sh[i], sh[j]) >= DEFAULT_THRESHOLD]
    print(f"instruction signal alone (Jaccard >= {DEFAULT_THRESHOLD}): {len(flagged):,} pairs, "
          f"{len({i for p in flagged for i in p})} of {len(tasks)} tasks in one")

    held, rest = tasks[::6], [t for i, t in enumerate(tasks) if i % 6]
    ts = TrainingSet()
    for t in held:
        ts.add_task(t)
    by = Counter()
    for t in rest:
        m = ts.near_duplicate(t)
        if m:
            by["content" if set(m.signals) - {"instruction"} else "instruction only"] += 1
    print(f"held out {len(held)}, others {len(rest)}: flagged by content {by['content']}, by instruction only "
          f"{by['instruction only']}")
    hit = Counter()
    for t in held:
        v = t.model_copy(update={"id": t.id + "-v2", "instruction": "Reworded: do the job described in the files.",
                                 "workspace": [File(path="moved/" + f.path, text=f.text, b64=f.b64)
                                               for f in t.workspace]})
        m = ts.near_duplicate(v)
        hit["+".join(m.signals) if m else "missed"] += 1
    bare = [t.id for t in tasks if not fingerprint(t)]
    print(f"held-out tasks reworded and renamed: {dict(hit)}; tasks with no content signal: {len(bare)} "
          f"({time.perf_counter() - started:.1f} s)")


if __name__ == "__main__":
    main(sys.argv[1:] or ["examples/tasks"])
