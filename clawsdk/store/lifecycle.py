"""One run's record from its start to its end, for every process that records one.

`clawsdk run` (the runner), `clawsdk serve` and `clawsdk proxy` all open the store's writer, record the run
and its tasks, stop when the store refuses a write, and on the way out end the run and any rollout of theirs
still running, even when cancelled. `RunLifecycle` is that, once:

    async with RunLifecycle(db, run_id, agent="oracle", config={...}) as run:
        await run.record_tasks(tasks, errors)
        tg.start_soon(run.on_store_failure, stop)   # nothing more can be recorded: stop
        rid = ...; run.started(rid)                 # a rollout this process must end
        ...
        run.end("interrupted", "cancelled by ctl")  # how it ends, when not "finished"

A run is **owned** (the runner: one process records it; on exit its status is set and the rollouts it started
that are still running end `cancelled`) or **shared** (`shared=True`: serve over stdio and the proxy, several
processes on one run id; each ends only the rollouts it started, and the run ends with the last of them,
Store.end_run). Either way, a store that refused a write ends the run `failed` on a connection of its own (the
writer dropped everything after the refused write), and `reason` says why.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import anyio

from clawsdk._text import short
from clawsdk.store.store import Store
from clawsdk.store.writer import StoreWriter

log = logging.getLogger(__name__)


class RunLifecycle:
    """The run `run_id` in the store at `db`, recorded `running` on entry and ended on exit (see the module)."""

    def __init__(self, db: str | Path, run_id: str, *, agent: str, sandbox: str | None = None,
                 samples: int | None = None, config: dict[str, Any] | None = None, shared: bool = False,
                 buffer: int = 10_000):
        self.db, self.run_id, self.shared = Path(db), run_id, shared
        self._run: dict[str, Any] = {"agent": agent, "sandbox": sandbox, "samples": samples, "config": config or {}}
        self.writer = StoreWriter(self.db, buffer=buffer)
        self.rollouts: list[str] = []  # the rollouts this process started: it ends those still running
        self.status: str = "finished"
        self.reason: str | None = None
        self.ended: int | None = None  # rollouts still running that the exit ended `cancelled`

    async def __aenter__(self) -> RunLifecycle:
        await self.writer.__aenter__()
        try:
            await self.writer.upsert_run(run_id=self.run_id, status="running", **self._run)
            await self.writer.set_run_status(run_id=self.run_id, status="running")  # a resumed run's error goes
        except BaseException as e:
            await self.writer.__aexit__(type(e), e, e.__traceback__)
            raise
        return self

    async def record_tasks(self, tasks: Iterable[Any], errors: Sequence[Any] = ()) -> None:
        """The tasks (once per content hash) and the task files that could not be loaded, beside the run; then
        flushed, so that a rollout another process claims finds them in."""
        for task in {t.hash: t for t in tasks}.values():
            await self.writer.upsert_task(task=task)
        for err in errors:
            await self.writer.record_task_error(run_id=self.run_id, path=err.path, field=err.field,
                                                task_id=err.task_id, message=err.message)
        await self.writer.flush()

    def started(self, rollout_id: str) -> None:
        """A rollout this process started: if it is still running when the run ends, it ends `cancelled`."""
        self.rollouts.append(rollout_id)

    def end(self, status: str, reason: str | None = None) -> None:
        """How the run ends (`finished` unless said): `interrupted` or `failed`, and why."""
        self.status, self.reason = status, reason

    @property
    def store_failure(self) -> str | None:
        """Why nothing more can be recorded (the writer's refused write), or None."""
        e = self.writer.error
        return None if e is None else f"the store refused a write ({type(e).__name__}: {short(e)})"

    async def on_store_failure(self, then: Callable[[str], Any]) -> None:
        """Wait until the store refuses a write, then call `then(why)`: start it in the run's task group, and
        stop there (cancel the scope), rather than go on with work nobody can see."""
        await self.writer.failed.wait()
        then(self.store_failure or "the store failed")

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        # shielded: a cancelled run must still end (the writer's own loop is: it commits what is queued)
        with anyio.CancelScope(shield=True):
            if self.shared and self.writer.error is None and self.status != "failed":
                # unless another process still records into the run (Store.end_run)
                await self.writer.end_run(run_id=self.run_id, status=self.status)
        try:
            await self.writer.__aexit__(exc_type, exc, tb)
        finally:
            with anyio.CancelScope(shield=True):
                await self._settle_if_needed()

    async def _settle_if_needed(self) -> None:
        refused = self.store_failure
        if refused is not None:
            self.status, self.reason = "failed", refused
        if self.shared and self.status != "failed":
            return
        try:  # on a connection of its own: the writer may be what failed
            self.ended = await anyio.to_thread.run_sync(self._settle)
        except Exception as e:
            log.error("could not record how run %s ended in %s: %s: %s", self.run_id, self.db, type(e).__name__, e)
            if refused is None:
                self.status, self.reason = "failed", f"the store could not record the run's end: {type(e).__name__}: {e}"

    def _settle(self) -> int:
        with Store(self.db) as store, store.transaction():
            return store.settle_run(self.run_id, self.rollouts, self.status, self.reason)

