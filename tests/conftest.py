"""Shared fixtures: small native tasks built on the fly, a temp store, the repo's example tasks."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples" / "tasks"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
#: this checkout's packages, for a child process's PYTHONPATH (the venv may hold an editable install of another)
CHECKOUT_PATH = os.pathsep.join(str(REPO / d) for d in ("", "plugins", "tools", "skills", "tui"))
# the real ClawGym / PinchBench samples, where a checkout has them next to it: extra tests only
SHARED_DATA = Path(os.environ.get("CLAWSDK_SAMPLE_DATA") or REPO.parent / "shared" / "data")
needs_shared_data = pytest.mark.skipif(
    not SHARED_DATA.is_dir(),
    reason=f"extra on the real samples: {SHARED_DATA} is absent (set CLAWSDK_SAMPLE_DATA); "
           "tests/fixtures covers the same formats")


def make_task(root: Path, task_id: str = "t1", *, instruction: str = "Write done.txt containing done.",
              checks: list | None = None, workspace: dict | None = None, hidden: dict | None = None,
              steps: list | None = None, extra: dict | None = None) -> Path:
    folder = root / task_id
    (folder / "workspace").mkdir(parents=True, exist_ok=True)
    spec = {
        "id": task_id,
        "category": "systems & automation",
        "instruction": instruction,
        "verifier": {"checks": checks or [{"type": "text_contains", "path": "done.txt", "text": "done"}]},
    }
    spec.update(extra or {})
    (folder / "task.yaml").write_text(yaml.safe_dump(spec))
    for rel, text in (workspace or {"notes.md": "hello\n"}).items():
        p = folder / "workspace" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    for rel, text in (hidden or {}).items():
        p = folder / "hidden" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    if steps is None:
        steps = [{"tool": "write", "args": {"path": "done.txt", "content": "done\n"}}]
    if steps:
        (folder / "solution").mkdir(exist_ok=True)
        (folder / "solution" / "steps.yaml").write_text(yaml.safe_dump(steps))
    return folder


@contextlib.asynccontextmanager
async def loop_ticks(every: float = 0.05) -> AsyncIterator[list[float]]:
    """The times a task sleeping `every` s got the event loop while the block ran: few if something held it."""
    import anyio

    ticks: list[float] = []

    async def tick() -> None:
        while True:
            ticks.append(anyio.current_time())
            await anyio.sleep(every)

    async with anyio.create_task_group() as tg:
        tg.start_soon(tick)
        yield ticks
        tg.cancel_scope.cancel()


def count_finished(db: Path) -> int:
    """Finished rollouts in a store another process may be writing (0 before it exists)."""
    import sqlite3

    if not Path(db).exists():
        return 0
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return con.execute("SELECT COUNT(*) FROM rollouts WHERE status = 'finished'").fetchone()[0]
        finally:
            con.close()
    except sqlite3.OperationalError:
        return 0


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "store.db"


@pytest.fixture
def flaky_sandbox(monkeypatch: pytest.MonkeyPatch) -> str:
    """The name of a local sandbox whose first start fails ("disk went away"), registered for one test only:
    the process-wide registry is what later tests list."""
    from clawsdk_plugins.sandboxes.local import LocalSandbox

    from clawsdk.plugins import get_registry


    class FlakySandbox(LocalSandbox):
        failures = 1

        async def start(self, task):
            if FlakySandbox.failures > 0:
                FlakySandbox.failures -= 1
                raise OSError("disk went away")
            await super().start(task)

    monkeypatch.setitem(get_registry().tables["sandboxes"], "flaky", lambda config=None: FlakySandbox(config))
    return "flaky"


@pytest.fixture(autouse=True)
def _sandbox_root(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Workspaces of each test under a temp root, so a test can check that nothing is left behind."""
    if "CLAWSDK_SANDBOX_ROOT" not in os.environ:
        monkeypatch.setenv("CLAWSDK_SANDBOX_ROOT", str(tmp_path_factory.mktemp("sandboxes")))
    yield
    pool = sys.modules.get("clawsdk_plugins.sandboxes.docker_pool")
    if pool is not None:  # warm docker containers hold (mounted) folders under this test's root
        pool.drain()
