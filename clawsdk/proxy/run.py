"""`clawsdk proxy`: one recording proxy as one rollout of its own, until interrupted."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from clawsdk._http import public_url
from clawsdk.proxy.core import ModelProxy, serving

if TYPE_CHECKING:
    from clawsdk.tasks.model import Task


async def run_proxy(*, upstream: str, upstream_key: str | None, host: str, port: int, token: str | None,
                    task: Task | None, run_id: str | None, db: Path,
                    on_ready: Callable[[str, str, str], None] | None = None, model: str | None = None,
                    token_ids: bool = False, upstream_stream: bool | None = None) -> None:
    """`clawsdk proxy`: record every call through this proxy as one rollout until interrupted."""
    from clawsdk.errors import FailureKind
    from clawsdk.runtime.ids import new_run_id, rollout_id
    from clawsdk.store.lifecycle import RunLifecycle
    from clawsdk.store.recorder import Recorder
    from clawsdk.store.store import Store
    from clawsdk.tasks.model import Task

    # a bad upstream fails here, before the store is touched
    proxy = ModelProxy(upstream, upstream_key, model=model, token_ids=token_ids, upstream_stream=upstream_stream)
    task = task or Task(id="proxy", instruction="(model calls recorded by clawsdk proxy; no task)")
    run_id = run_id or "proxy-" + new_run_id()
    rid: str | None = None
    started = time.perf_counter()

    def claim() -> tuple[int, str]:  # never a row another proxy on the same run id holds (Store.claim_rollout)
        with Store(db) as store:
            return store.claim_rollout(run_id=run_id, task_id=task.id, task_hash=task.hash, agent="proxy",
                                       model=None, make_id=lambda sample: rollout_id(run_id, task.id, sample))

    lifecycle = RunLifecycle(db, run_id, agent="proxy", shared=True,  # unless another proxy records into it
                             config={"proxy": True, "upstream": public_url(upstream)})
    async with lifecycle:
        # the run and the task are in before the rollout claims its row beside them
        await lifecycle.record_tasks([task])
        _, claimed = await anyio.to_thread.run_sync(claim)
        rid = claimed
        lifecycle.started(claimed)
        recorder = Recorder(lifecycle.writer, claimed, 0)
        tok = proxy.register(recorder, token)
        try:
            with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async with serving(proxy, host, port) as url, anyio.create_task_group() as tg:
                    if on_ready is not None:
                        on_ready(url + "/v1", tok, claimed)
                    # calls nobody records must not go on
                    tg.start_soon(lifecycle.on_store_failure, lambda _why: tg.cancel_scope.cancel())
                    async for _ in signals:
                        break
                    tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await lifecycle.writer.finish_rollout(
                    rollout_id=rid, attempt=0, status="finished", failure_kind=FailureKind.OK.value, scored=False,
                    reward=None, passed=None, error=None, n_tool_calls=0, n_model_calls=recorder.n_model_calls,
                    duration_s=time.perf_counter() - started)
    if lifecycle.status == "failed":  # its ending was dropped with the rest: ended on a connection of its own
        from clawsdk.errors import StoreError

        raise StoreError(f"{lifecycle.reason}; the proxy stopped, as nothing more could be recorded in {db}")
