"""ClawGym scoring cost: reward.sh run by hand vs clawsdk's verifier (with and without check.py sub-scores).

    .venv/bin/python benchmarks/bench_clawgym_verify.py [TASKS_DIR]

Prints seconds per task for each and the ratio to the hand-run baseline measured in the same run.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

from clawsdk.plugins import get_registry
from clawsdk.sandbox.base import SandboxConfig
from clawsdk.store.recorder import Recorder
from clawsdk.tasks.sources import load_tasks
from clawsdk.verify.verdict import VerifyContext


def by_hand(task, root: Path) -> None:
    """reward.sh with its paths pointed at a plain folder: the floor any harness pays."""
    ws = Path(tempfile.mkdtemp(dir=root))
    for f in task.workspace + task.hidden:
        (ws / f.path).parent.mkdir(parents=True, exist_ok=True)
        (ws / f.path).write_bytes(f.data.replace(b"/root/.openclaw/workspace", str(ws).encode()))
    subprocess.run(["bash", "reward/reward.sh"], cwd=ws, capture_output=True, timeout=120)


async def ours(task, subscores: bool) -> None:
    registry = get_registry()
    sandbox = registry.get("sandboxes", "local")(SandboxConfig())
    await sandbox.start(task)
    try:
        spec = task.verifier.model_copy(update={"subscores": subscores})
        verifier = registry.get("verifiers", "clawgym")(spec)
        await verifier.verify(VerifyContext(task=task, sandbox=sandbox, recorder=Recorder(None, "bench")))
    finally:
        await sandbox.close()


def main() -> None:
    path = sys.argv[1] if len(sys.argv) > 1 else "../shared/data/clawgym-train-sample"
    tasks = load_tasks(f"clawgym:{path}").tasks
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        for t in tasks:
            by_hand(t, Path(tmp))
        hand = (time.perf_counter() - t0) / len(tasks)
    rows = [("reward.sh by hand", hand)]
    for label, subs in (("clawsdk, score only", False), ("clawsdk, score + check.py sub-scores", True)):
        t0 = time.perf_counter()
        for t in tasks:
            anyio.run(ours, t, subs)
        rows.append((label, (time.perf_counter() - t0) / len(tasks)))
    print(f"{len(tasks)} ClawGym tasks, untouched workspaces, local sandbox")
    for label, secs in rows:
        print(f"  {label:40s} {secs * 1000:7.1f} ms/task   x{secs / hand:.2f}")


if __name__ == "__main__":
    main()
