"""The CLI agents' costs, per harness: install time and size (an empty npm cache), time to the first model call under
bwrap, and the wall time of 4 concurrent rollouts under bwrap. The model is the scripted server of the tests
(tests/cli_agent/scripted_model.py: the task's reference solution as the harness's own tool calls), so what is
measured is the harness and the sandbox, not a model.

    python benchmarks/cli_agents.py                       # claude-code, codex, openclaw
    python benchmarks/cli_agents.py --agents codex --no-install --home-root /opt/clawsdk

--no-install measures the runs with the installs under --home-root (as CI makes them); without it each harness is
installed afresh into a temporary prefix first, with an npm cache of its own (nothing downloaded before counts).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def agent_class(name: str):
    if name == "claude-code":
        from clawsdk_plugins.agents.claude_code import ClaudeCodeAgent

        return ClaudeCodeAgent
    if name == "codex":
        from clawsdk_plugins.agents.codex import CodexAgent

        return CodexAgent
    from clawsdk_plugins.agents.openclaw.agent import OpenClawAgent

    return OpenClawAgent


def install_fresh(name: str, root: Path) -> tuple[float, float]:
    """(seconds, MB) of `clawsdk NAME install` into an empty prefix with an empty npm cache."""
    from clawsdk_plugins.agents.cli_agent.install import _size_mb, install

    cache = tempfile.mkdtemp(prefix="npm-cache-")
    os.environ["npm_config_cache"] = cache
    try:
        started = time.perf_counter()
        install(agent_class(name).package, root / name, log=lambda m: None)
        return time.perf_counter() - started, _size_mb(root / name)
    finally:
        os.environ.pop("npm_config_cache", None)
        shutil.rmtree(cache, ignore_errors=True)


def rollouts(name: str, home: str, samples: int, concurrency: int) -> tuple[float, list[float], list[str]]:
    """(wall seconds, each rollout's seconds to its first model call, endings) of `samples` bwrap rollouts."""
    import anyio

    from clawsdk.proxy import serving
    from clawsdk.runtime.runner import run
    from clawsdk.store.store import Store
    from clawsdk.tasks.sources import load_tasks
    from tests.cli_agent.scripted_model import PlannedModel, plan_for

    (task,) = load_tasks(str(REPO / "examples" / "tasks" / "access-log-report")).tasks
    model = PlannedModel(plan_for(name, task))
    db = Path(tempfile.mkdtemp(prefix="cli-bench-")) / "store.db"

    async def main():
        async with serving(model) as url:
            agent = agent_class(name)(model="planned-7b", base_url=url + "/v1", home=home)
            started = time.perf_counter()
            result = await run([task], agent=agent, db=db, run_id="bench", sandbox="bwrap", samples=samples,
                               concurrency=concurrency, retries=0)
            return time.perf_counter() - started, result

    wall, result = anyio.run(main)
    boots = []
    with Store(db) as s:
        for row in s.rollouts("bench"):
            ex = [e.payload() for e in s.events(row["id"]) if e.kind == "sandbox_exec"]
            if ex and ex[0].get("boot_s") is not None:
                boots.append(ex[0]["boot_s"])
    shutil.rmtree(db.parent, ignore_errors=True)
    return wall, boots, [f"{o.kind.value} {o.reward}" for o in result.outcomes]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", default="claude-code,codex,openclaw")
    parser.add_argument("--no-install", action="store_true")
    parser.add_argument("--home-root", default="/opt/clawsdk")
    parser.add_argument("--concurrency", type=int, default=4)
    ns = parser.parse_args()
    load = os.getloadavg()[0]
    print(f"# {os.cpu_count()} cores, load {load:.1f} at start")
    print("| harness | install (empty npm cache) | size | first model call under bwrap (1 rollout) | "
          f"{ns.concurrency} concurrent rollouts, wall | their first model calls |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name in ns.agents.split(","):
        root = Path(ns.home_root) if ns.no_install else Path(tempfile.mkdtemp(prefix="cli-install-", dir="/opt"))
        root.chmod(0o755)
        install_s, size = ("-", "-")
        if not ns.no_install:
            secs, mb = install_fresh(name, root)
            install_s, size = f"{secs:.0f} s", f"{mb:.0f} MB"
        home = str(root / name)
        _, boot1, end1 = rollouts(name, home, 1, 1)
        wall, boots, ends = rollouts(name, home, ns.concurrency, ns.concurrency)
        assert all(e == "ok 1.0" for e in end1 + ends), (end1, ends)
        print(f"| {name} | {install_s} | {size} | {boot1[0]:.2f} s | {wall:.1f} s | "
              f"median {statistics.median(boots):.2f} s, max {max(boots):.2f} s |")
        if not ns.no_install:
            shutil.rmtree(root, ignore_errors=True)
    print(f"# load {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
