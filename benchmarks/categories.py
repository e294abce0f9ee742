"""ClawGym category inference: what it costs to list tasks, and how its guesses compare with ClawGym-Bench.

    python benchmarks/categories.py [--tasks 2000] [--rounds 3] [--check DIR]

1. CPU to list N ClawGym-format task folders whose `metadata.category` is empty (as upstream data mostly
   is), in child processes, rounds interleaved, best of each:
   - `before`: the code of 1ab71bb^, the commit before the one that added inference (a git worktree of it,
     made for the run and removed after);
   - `1ab71bb`: the code of that commit, the rule as it shipped (a regex search per keyword);
   - `now`: this working tree.
   The instructions are ClawGym-length (about 1,700 characters) and name files of several kinds.
2. With --check DIR: the categories the rule gives the ClawGym tasks under DIR, against the counts on the
   ClawGym-Bench dataset card (200 tasks: productivity & collaboration 44, systems & automation 42,
   analysis & reasoning 35, content & domain 28, planning & knowledge 26, software development 25), as
   shares, with the total variation distance between the two and the share the rule leaves without one.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: ClawGym-Bench's dataset card, "# Tasks" per category
CARD = {"productivity & collaboration": 44, "systems & automation": 42, "analysis & reasoning": 35,
        "content & domain": 28, "planning & knowledge": 26, "software development": 25}

SENTENCES = [
    "Read input/{f} and compute the total and the average per region, then write reports/summary.md.",
    "Automate the nightly backup: a shell script under scripts/ that archives logs/ and rotates old files.",
    "Draft a reply to each email in inbox/ and add the meetings they mention to calendar/team.ics.",
    "Fix the bug in src/{f} so that the unit tests pass; do not change the tests themselves.",
    "Write a one-page article in markdown that summarizes the policy document for new staff.",
    "Plan a three-day itinerary from the notes in research/ and recommend a reading list.",
    "Keep the configuration in config.yaml, and log every step to run.log with a timestamp.",
    "Compare the two datasets, flag every anomaly, and explain the trend in plain words.",
]
FILES = ["data.csv", "app.py", "inbox/a.eml", "notes.md", "server.conf", "refs.bib", "sales.xlsx", "run.log"]


def make_tasks(folder: Path, n: int) -> None:
    for i in range(n):
        t = folder / f"task_{i:05d}"
        (t / "input_files").mkdir(parents=True)
        (t / "reward").mkdir()
        words = " ".join(SENTENCES[(i + k) % len(SENTENCES)].format(f=FILES[(i + k) % len(FILES)])
                         for k in range(18))  # ~2,000 characters, as ClawGym's instructions run
        (t / "data_entry.json").write_text(json.dumps({
            "task_id": f"task_{i:05d}", "user_query": f"({i}) {words}",
            "input_mount_dir": "/root/.openclaw/workspace", "metadata": {"category": "", "grading_type": "automated"}}))
        for f in (FILES[i % len(FILES)], FILES[(i + 3) % len(FILES)]):
            (t / "input_files" / f).parent.mkdir(parents=True, exist_ok=True)
            (t / "input_files" / f).write_text(f"{i}\n")
        (t / "reward" / "check.py").write_text("import json\nprint(json.dumps({'a': 0.0}))\n")
        (t / "reward" / "reward.sh").write_text("#!/bin/bash\necho 0\n")


INFERENCE_COMMIT = "1ab71bb"


def measure(folder: str) -> dict:
    from clawsdk import load_tasks

    cpu0, t0 = time.process_time(), time.perf_counter()
    loaded = load_tasks(f"clawgym:{folder}")
    hashes = {t.hash for t in loaded.tasks}
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
    if loaded.errors or len(hashes) != len(loaded.tasks):
        raise SystemExit(f"{len(loaded.errors)} tasks could not be read: {loaded.errors[:1]}")
    inferred = sum(bool(t.provenance.get("category_inferred")) for t in loaded.tasks)
    return {"cpu_s": cpu, "wall_s": wall, "tasks": len(loaded.tasks), "inferred": inferred}


def worktree(rev: str, where: Path) -> Path:
    repo = Path(__file__).resolve().parent.parent
    subprocess.run(["git", "-C", str(repo), "worktree", "add", "--detach", "-q", str(where), rev], check=True)
    return where


def pythonpath(root: Path) -> str:
    return os.pathsep.join(str(root / p) if p else str(root) for p in ("", "plugins", "tools", "skills", "tui"))


def check(folder: str) -> None:
    from clawsdk import load_tasks

    loaded = load_tasks(f"clawgym:{folder}")
    got: dict[str, int] = {c: 0 for c in CARD}
    none = given = 0
    for t in loaded.tasks:
        if t.category and not t.provenance.get("category_inferred"):
            given += 1
        elif t.category in got:
            got[t.category] += 1
        else:
            none += 1
    n, total = sum(got.values()), sum(CARD.values())
    print(f"{len(loaded.tasks)} tasks under {folder}: {n} given a category by the rule, {none} left without one "
          f"({none / max(len(loaded.tasks), 1):.0%}), {given} with a category of their own (not counted)")
    print(f"{'category':32} {'card':>6} {'rule':>6}")
    for c, count in CARD.items():
        print(f"{c:32} {count / total:6.0%} {got[c] / max(n, 1):6.0%}")
    tvd = 0.5 * sum(abs(CARD[c] / total - got[c] / max(n, 1)) for c in CARD)
    print(f"total variation distance between the shares: {tvd:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--check", metavar="DIR", help="compare the rule's categories on DIR with the card's")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        print(json.dumps(measure(a.one)))
        return
    if a.check:
        check(a.check)
        return
    here = Path(__file__).resolve().parent.parent
    results: dict[str, list[dict]] = {"before": [], INFERENCE_COMMIT: [], "now": []}
    with tempfile.TemporaryDirectory() as tmp:
        make_tasks(Path(tmp) / "tasks", a.tasks)
        roots = {"before": worktree(f"{INFERENCE_COMMIT}^", Path(tmp) / "before"),
                 INFERENCE_COMMIT: worktree(INFERENCE_COMMIT, Path(tmp) / "at"), "now": here}
        try:
            for _ in range(a.rounds):
                for variant, root in roots.items():
                    env = {**os.environ, "PYTHONPATH": pythonpath(root)}
                    done = subprocess.run([sys.executable, __file__, "--one", str(Path(tmp) / "tasks")], check=False,
                                          capture_output=True, text=True, env=env)
                    if done.returncode != 0:
                        raise SystemExit(done.stderr[-2000:])
                    results[variant].append(json.loads(done.stdout.strip().splitlines()[-1]))
        finally:
            for variant in ("before", INFERENCE_COMMIT):
                subprocess.run(["git", "-C", str(here), "worktree", "remove", "--force", str(roots[variant])],
                               capture_output=True, check=False)
    best = {k: min(v, key=lambda r: r["cpu_s"]) for k, v in results.items()}
    base = best["before"]
    print(f"listing {a.tasks} ClawGym tasks with empty categories, best of {a.rounds} interleaved rounds")
    for k, r in best.items():
        print(f"  {k:8} {r['cpu_s']:6.2f} s CPU  {r['wall_s']:6.2f} s wall  {r['inferred']:5d} inferred  "
              f"{r['cpu_s'] / base['cpu_s']:.2f}x before")


if __name__ == "__main__":
    main()
