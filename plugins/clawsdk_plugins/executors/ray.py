"""The `ray` executor: rollout attempts run as Ray tasks on a cluster's workers.

Each attempt is one Ray *generator task*. On the worker it builds the sandbox there, rebuilds
the agent (from its registered name and options, or from the pickled instance), and runs the
same `attempt_rollout` the local executor runs. The worker's recorder numbers the events and
puts them on a bounded queue; the task yields them in batches (every `batch_ms` or
`batch_events`, whichever comes first) and yields the attempt's result last. The driver
forwards each batch to the run's recorder, so the one store writer records the events in
order while the rollout is still running (the TUI watches them live).

Backpressure, end to end: the store writer's queue is bounded; the driver takes the next
batch only after the writer accepted the last one; Ray pauses a generator that is
`backpressure` batches ahead of the driver; the worker's queue holds at most
`buffer_events` events, and a full queue makes the rollout wait. A slow writer slows the
rollouts down instead of growing memory.

A worker lost mid-attempt (process killed, node gone) ends that attempt as `sandbox_error`,
an unscored infrastructure failure: its events so far stay recorded under its attempt
number, and the runner retries the rollout as a new attempt, which Ray places on a live
worker. Ray's own task retries are off (`max_retries=0`) because a re-executed generator
would stream a second trajectory into the same attempt.

Cancelling `attempt` (Ctrl-C) cancels the Ray task; the worker cancels the rollout, which
closes its sandbox, and the driver waits up to `cancel_grace_s` for that to finish.

A cluster this executor starts requires Ray's token authentication (RAY_AUTH_MODE=token; the
token is in ~/.ray/auth_token, readable by its owner only): Ray's ports listen on every
interface, and without a token anyone who reaches them runs code on this machine.

`ray` is imported only inside the functions that use it.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import logging
import os
import queue
import re
import secrets
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.from_thread
import anyio.lowlevel

from clawsdk.errors import ClawError, FailureKind
from clawsdk.hookspecs import hookimpl
from clawsdk.runtime.executor import Executor, RolloutJob
from clawsdk.runtime.rollout import AttemptResult
from clawsdk.sandbox.base import SandboxConfig
from clawsdk.store.events import ErrorEvent

if TYPE_CHECKING:
    from clawsdk.runtime.agent import Agent
    from clawsdk.store.recorder import Recorder

log = logging.getLogger(__name__)

_MB = 1024 * 1024
# keys of RolloutJob.resources that map onto Ray's own arguments; any other key is a custom resource
_RAY_KEYS = {"num_cpus": "num_cpus", "num_gpus": "num_gpus", "memory": "memory"}


class RayExecutorError(ClawError):
    """Ray is missing, or its cluster cannot be reached."""


@dataclasses.dataclass(frozen=True)
class StreamSettings:
    """How a worker streams events back (sent with every attempt)."""

    batch_s: float = 0.05
    batch_events: int = 256
    buffer_events: int = 1024
    cancel_grace_s: float = 10.0


class RayExecutor(Executor):
    """Runs attempts as Ray tasks; events stream back to the driver's recorder."""

    name = "ray"

    def __init__(
        self,
        address: str | None = None,
        *,
        num_cpus: int | None = None,
        num_gpus: int | None = None,
        namespace: str | None = None,
        runtime_env: dict | None = None,
        cpus_per_rollout: float | None = None,
        memory_mb_per_rollout: float | None = None,
        gpus_per_rollout: float | None = None,
        resources_per_rollout: dict[str, float] | None = None,
        scheduling_strategy: str | None = None,
        batch_ms: float = 50.0,
        batch_events: int = 256,
        buffer_events: int = 1024,
        backpressure: int = 8,
        cancel_grace_s: float = 10.0,
        shutdown: bool = True,
        log_to_driver: bool = True,
    ):
        if runtime_env is not None and not isinstance(runtime_env, dict):
            raise ValueError("ray executor: runtime_env must be a mapping (e.g. {'working_dir': '.'})")
        if resources_per_rollout is not None and not (
                isinstance(resources_per_rollout, dict)
                and all(isinstance(v, (int, float)) for v in resources_per_rollout.values())):
            raise ValueError("ray executor: resources_per_rollout must map custom resource names to amounts "
                             "(e.g. {sandbox: 1})")
        for key, value in (("batch_ms", batch_ms), ("batch_events", batch_events),
                           ("buffer_events", buffer_events), ("backpressure", backpressure)):
            if not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"ray executor: option {key} must be a positive number (got {value!r})")
        self.address = address or None
        self.num_cpus = num_cpus
        self.num_gpus = num_gpus
        self.namespace = namespace
        self.runtime_env = runtime_env
        self.overrides = {k: v for k, v in (("num_cpus", cpus_per_rollout), ("memory", memory_mb_per_rollout),
                                            ("num_gpus", gpus_per_rollout)) if v is not None}
        self.overrides.update(resources_per_rollout or {})
        self.scheduling_strategy = scheduling_strategy
        self.backpressure = int(backpressure)
        self.settings = StreamSettings(batch_s=batch_ms / 1000, batch_events=int(batch_events),
                                       buffer_events=int(buffer_events), cancel_grace_s=float(cancel_grace_s))
        self.shutdown = shutdown
        self.log_to_driver = log_to_driver
        self._started_ray = False
        self._remote: Any = None
        self._agents: dict[int, tuple[Agent, Any]] = {}
        self._tasks: dict[str, Any] = {}  # task hash -> its object ref: k samples send a task once
        self._backpressure_option = "_generator_backpressure_num_objects"

    # -- lifecycle -------------------------------------------------------------------------

    async def __aenter__(self) -> RayExecutor:
        address = self.address
        if (address or os.environ.get("RAY_ADDRESS") or "").startswith("ray://"):
            raise RayExecutorError(
                "ray executor: ray:// (Ray Client) is not supported: run `clawsdk run` on the head node, or "
                "as a Ray job there (docs/ray.md), with --executor-opt address=auto")
        joining = address not in (None, "local") or bool(os.environ.get("RAY_ADDRESS"))
        if joining and "RAY_AUTH_MODE" not in os.environ and "ray" not in sys.modules:
            # a cluster clawsdk runs on requires a token (docs/ray.md); without one here, Ray would retry for
            # 20 s and say only that it could not connect. (Ray reads it when it is imported.)
            os.environ["RAY_AUTH_MODE"] = "token"
        ray = _import_ray()
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {"namespace": self.namespace, "runtime_env": worker_env(self.runtime_env),
                                      "log_to_driver": self.log_to_driver}
            if address is None and (self.num_cpus is not None or self.num_gpus is not None):
                # sizes only make sense for a cluster we start: start a new one on this machine
                address = "local"
                kwargs.update(num_cpus=self.num_cpus, num_gpus=self.num_gpus, include_dashboard=False)
            elif self.num_cpus is not None or self.num_gpus is not None:
                raise RayExecutorError("ray executor: num_cpus/num_gpus size a local cluster; a cluster at "
                                       f"{address} has its own sizes (drop them, or drop address)")
            if address == "local":
                _require_token_auth(ray)
            try:
                ray.init(address=address, **{k: v for k, v in kwargs.items() if v is not None})
            except Exception as e:
                raise RayExecutorError(_unreachable(ray, address or os.environ.get("RAY_ADDRESS"), e)) from e
            self._started_ray = True
            _private_token_file(create=False)  # one Ray wrote just now, starting a cluster for address=None
        self._remote = ray.remote(_attempt_stream)
        try:
            self._remote.options(**{self._backpressure_option: 1})
        except (TypeError, ValueError):  # a private option: if a Ray release drops it, say so and go on
            log.warning("this Ray has no %s: event streams are not held back by a slow store writer",
                        self._backpressure_option)
            self._backpressure_option = ""
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._agents.clear()
        self._tasks.clear()
        if self._started_ray and self.shutdown:
            _import_ray().shutdown()
            self._started_ray = False

    # -- one attempt -----------------------------------------------------------------------

    def task_options(self, job: RolloutJob) -> dict[str, Any]:
        """The Ray options of one attempt: its resources, no Ray-level retries, bounded streaming."""
        asked = {**job.resources, **self.overrides}
        options: dict[str, Any] = {"max_retries": 0}
        if self._backpressure_option:
            options[self._backpressure_option] = self.backpressure
        custom: dict[str, float] = {}
        for key, value in asked.items():
            if key in _RAY_KEYS:
                options[_RAY_KEYS[key]] = int(value * _MB) if key == "memory" else value
            else:
                custom[key] = value
        if custom:
            options["resources"] = custom
        if self.scheduling_strategy:
            options["scheduling_strategy"] = self.scheduling_strategy
        return options

    def _task_ref(self, job: RolloutJob) -> Any:
        ref = self._tasks.get(job.task.hash)
        if ref is None:
            ref = self._tasks[job.task.hash] = _import_ray().put(job.task)
        return ref

    def _agent_payload(self, job: RolloutJob) -> Any:
        """What the worker needs to rebuild the agent: its registered name, or the pickled instance."""
        if job.agent_name:
            return None
        key = id(job.agent)
        cached = self._agents.get(key)
        if cached is None or cached[0] is not job.agent:
            try:
                ref = _import_ray().put(job.agent)  # serialized once per run, not per rollout
            except Exception as e:
                raise RuntimeError(f"the agent {type(job.agent).__name__} cannot be sent to ray workers "
                                   f"({e}); register it as an agent plugin installed on the workers and run "
                                   "it by name") from e
            cached = (job.agent, ref)
            self._agents[key] = cached
        return cached[1]

    async def attempt(self, job: RolloutJob, recorder: Recorder) -> AttemptResult:
        if self._remote is None:
            raise RuntimeError("use the ray executor as `async with RayExecutor(...) as ex`")
        ray = _import_ray()
        started = time.perf_counter()
        stream = None
        result: AttemptResult | None = None
        try:
            # the task and the agent instance travel once per run, by reference
            shipped = dataclasses.replace(job, task=None, agent=None,  # type: ignore[arg-type]  # sent by reference
                                          agent_options=portable(job.agent_options),
                                          sandbox_config=_absolute_root(job.sandbox_config))
            stream = self._remote.options(**self.task_options(job)).remote(
                shipped, self._task_ref(job), self._agent_payload(job), self.settings)
            result = await _consume(stream, recorder)
        except anyio.get_cancelled_exc_class():
            if stream is not None:
                with anyio.CancelScope(shield=True):
                    await _cancel(ray, stream, recorder, self.settings.cancel_grace_s)
            raise
        except Exception as e:  # the worker or its node is gone, or our code failed there
            message = _describe_failure(ray, e)
            log.warning("rollout %s attempt %d: %s", job.rollout_id, job.attempt, message)
            await recorder.record(ErrorEvent(error_kind=FailureKind.SANDBOX_ERROR.value, message=message))
            return AttemptResult(kind=FailureKind.SANDBOX_ERROR, error=message,
                                 duration_s=time.perf_counter() - started,
                                 n_tool_calls=recorder.n_tool_calls, n_model_calls=recorder.n_model_calls)
        if result is None:
            message = "the ray task ended without a result"
            await recorder.record(ErrorEvent(error_kind=FailureKind.SANDBOX_ERROR.value, message=message))
            return AttemptResult(kind=FailureKind.SANDBOX_ERROR, error=message,
                                 duration_s=time.perf_counter() - started)
        return result


# -- driver side -----------------------------------------------------------------------------

def _absolute_root(config: SandboxConfig) -> SandboxConfig:
    """A relative workspace root means the driver's folder, not each worker's working directory."""
    if config.root and not os.path.isabs(config.root):
        return dataclasses.replace(config, root=os.path.abspath(config.root))
    return config


#: environment variables never sent to the workers through the runtime environment (Ray shows it to whoever
#: can see the job): credentials reach the workers by their own environment
_SECRET_NAME = re.compile(r"(TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIALS?|AUTH)", re.I)


def _portable_value(value: Any, *, bare: bool = False) -> Any:
    """A relative path the driver has (`script=runs/s.yaml`, `home=.clawsdk/openclaw`) as the absolute path it
    names: a worker's working directory is not the driver's. A bare name (`prefix`) counts only with `bare`
    or a file extension (`s.yaml`): an option `model=embedded` beside a folder of that name is no path."""
    if not isinstance(value, str) or not value or "://" in value or os.path.isabs(value):
        return value
    if not (bare or value.startswith((".", "~")) or os.sep in value or os.path.splitext(value)[1]):
        return value
    path = os.path.expanduser(value)
    return os.path.abspath(path) if os.path.exists(path) else value


def portable(options: dict[str, Any]) -> dict[str, Any]:
    """Agent options as the workers need them: each relative path the driver has, made absolute (general, for
    every agent: a script, an install prefix, a config file)."""
    return {k: _portable_value(v) for k, v in options.items()}


def worker_env(runtime_env: dict | None) -> dict:
    """The runtime environment the workers get: the user's, plus the driver's CLAWSDK_* variables (install
    prefixes such as CLAWSDK_OPENCLAW_HOME and every other agent's, the skills folder; relative paths made
    absolute; none that holds a credential) and the driver's working directory, which a worker on a node
    that has it works in (relative paths in tasks and options then mean what they mean on the driver)."""
    env = {k: _portable_value(v, bare=True) for k, v in os.environ.items()
           if k.startswith("CLAWSDK_") and not _SECRET_NAME.search(k[len("CLAWSDK_"):])}
    env["CLAWSDK_DRIVER_CWD"] = os.getcwd()
    merged = dict(runtime_env or {})
    merged["env_vars"] = {**env, **(merged.get("env_vars") or {})}
    return merged


def _token_source() -> str | None:
    """Where this driver's Ray token comes from, or None when it has none."""
    if os.environ.get("RAY_AUTH_TOKEN"):
        return "RAY_AUTH_TOKEN"
    if (path := os.environ.get("RAY_AUTH_TOKEN_PATH")) and os.path.exists(path):
        return f"RAY_AUTH_TOKEN_PATH ({path})"
    default = Path.home() / ".ray" / "auth_token"
    return str(default) if default.exists() else None


def _unreachable(ray: Any, address: str | None, e: Exception) -> str:
    """Why `ray.init` failed, said so that a missing or wrong token is named as such."""
    where = address or "a local cluster"
    auth_error = getattr(getattr(ray, "exceptions", None), "AuthenticationError", ())
    how = ("set RAY_AUTH_TOKEN to the cluster's token (on the head: `ray get-auth-token`), or RAY_AUTH_TOKEN_PATH "
           "to a file that holds it, or put it in ~/.ray/auth_token")
    if isinstance(e, auth_error) or "authentication token" in str(e).lower():
        return (f"ray executor: the cluster at {where} requires Ray's token authentication and this driver has "
                f"no token: {how} (a cluster started without authentication needs RAY_AUTH_MODE=disabled here)")
    source = _token_source()
    if address not in (None, "local", "auto") and source and _listens(address):
        return (f"ray executor: {where} answers but refused this driver ({type(e).__name__}: {e}): is the token "
                f"from {source} the cluster's? {how}")
    return (f"ray executor: could not start or reach {where}: {type(e).__name__}: {e}. Start one with `ray start "
            "--head` and pass --executor-opt address=HOST:6379 (or set RAY_ADDRESS)")


def _listens(address: str) -> bool:
    import socket

    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=2):
            return True
    except (OSError, ValueError):
        return False


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise RayExecutorError("the ray executor needs Ray: pip install 'clawsdk[ray]' (or 'ray>=2.59')") \
            from e
    return ray


def _require_token_auth(ray: Any) -> None:
    """Check that the cluster about to start requires a token (Ray's default from 2.59), and keep
    the token file Ray uses readable by its owner only."""
    version = tuple(int(p) for p in ray.__version__.split(".")[:2] if p.isdigit())
    if version < (2, 59):
        raise RayExecutorError(f"ray executor: Ray {ray.__version__} starts a local cluster without token "
                               "authentication, and its ports listen on every interface: pip install 'ray>=2.59'")
    mode = os.environ.get("RAY_AUTH_MODE", "token")
    if mode.lower() != "token":
        log.warning("RAY_AUTH_MODE=%s: the local Ray cluster starts without token authentication, and anyone "
                    "who reaches its ports can run code on this machine", mode)
    else:
        _private_token_file(create=True)


def _private_token_file(create: bool) -> None:
    """Ray's default token file (~/.ray/auth_token), readable by its owner only: Ray writes it mode 0644.
    `create` makes one (as Ray would) before a cluster starts, so it is never readable by others."""
    if os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH"):
        return
    path = Path.home() / ".ray" / "auth_token"
    try:
        if create:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                pass
            else:
                with os.fdopen(fd, "w") as f:
                    f.write(secrets.token_hex(32))
        if path.stat().st_mode & 0o077:
            path.chmod(0o600)
    except FileNotFoundError:  # no token: a cluster without authentication, or one that keeps it elsewhere
        pass


def _on_asyncio() -> bool:
    import asyncio

    try:
        return asyncio.current_task() is not None
    except RuntimeError:  # no asyncio loop in this thread: another anyio backend
        return False


async def _next_item(stream: Any) -> Any:
    """The next yielded value of a Ray generator, without blocking the event loop."""
    if _on_asyncio():
        ref = await stream.__anext__()  # raises StopAsyncIteration at the end
        return await ref
    import ray

    def step() -> Any:
        try:
            return ray.get(next(stream))
        except StopIteration:
            raise StopAsyncIteration from None

    return await anyio.to_thread.run_sync(step)


async def _consume(stream: Any, recorder: Recorder) -> AttemptResult | None:
    result = None
    while True:
        try:
            kind, data = await _next_item(stream)
        except StopAsyncIteration:
            return result
        if kind == "events":
            await recorder.record_rows(data)
        elif kind == "result":
            result = data


async def _cancel(ray: Any, stream: Any, recorder: Recorder, grace_s: float) -> None:
    """Cancel the remote attempt; record what it streamed while closing its sandbox, for a while."""
    try:
        ray.cancel(stream)
    except Exception as e:  # already finished, or the worker is gone
        log.debug("ray.cancel: %s", e)
        return
    with anyio.move_on_after(grace_s):
        try:
            await _consume(stream, recorder)
        except Exception:  # TaskCancelledError is the expected ending
            pass


def _describe_failure(ray: Any, exc: BaseException) -> str:
    exceptions = ray.exceptions
    lost = tuple(getattr(exceptions, n) for n in ("WorkerCrashedError", "NodeDiedError", "ObjectLostError",
                                                 "OwnerDiedError", "LocalRayletDiedError", "RaySystemError")
                 if hasattr(exceptions, n))
    if "No module named" in str(exc):  # the agent (pickled) or a plugin is not installed where it ran
        missing = str(exc)[str(exc).index("No module named"):].splitlines()[0]
        return (f"the rollout could not be loaded on the ray worker ({missing}): install it on the workers (the "
                "same clawsdk, plugins and agent modules as the driver), or ship it with --executor-opt runtime_env")
    if isinstance(exc, lost):
        return (f"ray worker lost during the attempt ({type(exc).__name__}); "
                "retried as a new attempt elsewhere")
    if isinstance(exc, getattr(exceptions, "RayTaskError", ())):
        cause = getattr(exc, "cause", None) or exc
        return (f"the rollout failed on the ray worker: {type(cause).__name__}: {cause}. If the agent or a "
                "plugin is missing there (or differs from the driver's), install the same on the workers or "
                "ship it with --executor-opt runtime_env")
    return f"ray: {type(exc).__name__}: {exc}"


# -- worker side -----------------------------------------------------------------------------

_DONE = object()
_worker_agents: dict[str, Agent] = {}


class _QueueWriter:
    """Stands in for the store writer on a worker: events go to the bounded queue the task drains."""

    def __init__(self, q: queue.Queue) -> None:
        self.q = q

    async def events(self, rows: list[tuple]) -> None:
        for row in rows:
            while True:
                try:
                    self.q.put_nowait(row)
                    break
                except queue.Full:  # the driver is behind: the rollout waits (cancellable)
                    await anyio.sleep(0.005)


def _work_where_the_driver_does() -> None:
    """On a node that has the driver's working directory (this machine, a shared file system), work there, as
    the driver's rollouts do: an install prefix or a script named relative to it is found."""
    cwd = os.environ.get("CLAWSDK_DRIVER_CWD")
    if cwd and os.path.isdir(cwd) and os.getcwd() != cwd:
        try:
            os.chdir(cwd)
        except OSError:
            pass


def _rebuild_agent(job: RolloutJob, pickled: Any) -> Agent:
    if pickled is not None:
        return pickled  # Ray resolved the reference to the instance
    from clawsdk.plugins import get_registry

    assert job.agent_name  # an agent without a registered name travels pickled (_agent_payload)
    key = json.dumps([job.agent_name, job.agent_options], sort_keys=True, default=repr)
    agent = _worker_agents.get(key)
    if agent is None:  # one per worker process, as the driver shares one instance across rollouts
        agent = get_registry().get("agents", job.agent_name)(**job.agent_options)
        _worker_agents[key] = agent
    return agent


async def _run_on_worker(job: RolloutJob, pickled_agent: Any, q: queue.Queue, box: dict) -> AttemptResult:
    from clawsdk.plugins import get_registry
    from clawsdk.runtime.rollout import attempt_rollout
    from clawsdk.store.recorder import Recorder

    _work_where_the_driver_does()
    recorder = Recorder(_QueueWriter(q), job.rollout_id, job.attempt, keep=True)  # type: ignore[arg-type]
    with anyio.CancelScope() as scope:
        box["cancel"] = (scope, anyio.lowlevel.current_token())
        box["ready"].set()
        try:
            registry = get_registry()
            agent = _rebuild_agent(job, pickled_agent)
            make = registry.get("sandboxes", job.sandbox)
        except Exception as e:  # the worker's environment differs from the driver's
            message = (f"could not prepare the rollout on ray worker pid {os.getpid()}: "
                       f"{type(e).__name__}: {e}; install the same plugins on the workers as on the driver")
            await recorder.record(ErrorEvent(error_kind=FailureKind.SANDBOX_ERROR.value, message=message))
            return AttemptResult(kind=FailureKind.SANDBOX_ERROR, error=message)
        return await attempt_rollout(job.task, agent, lambda: make(job.sandbox_config), recorder, registry)
    return AttemptResult(kind=FailureKind.CANCELLED, error="cancelled on the worker")


def _attempt_stream(job: RolloutJob, task: Any, pickled_agent: Any, settings: StreamSettings):
    """The Ray generator task: run the attempt in a thread, yield its events in batches, then its result."""
    job = dataclasses.replace(job, task=task)  # Ray resolved the task's reference
    q: queue.Queue = queue.Queue(maxsize=settings.buffer_events)
    box: dict[str, Any] = {"ready": threading.Event()}

    def run_loop() -> None:
        try:
            box["result"] = anyio.run(_run_on_worker, job, pickled_agent, q, box)
        except BaseException as e:  # reported to the driver below
            box["error"] = "".join(traceback.format_exception(e))
        finally:
            box["ready"].set()
            while not box.get("abandoned"):
                try:
                    q.put(_DONE, timeout=0.1)
                    break
                except queue.Full:
                    pass

    thread = threading.Thread(target=run_loop, name=f"clawsdk-rollout-{job.rollout_id}", daemon=True)
    thread.start()
    try:
        yield from _batches(q, settings)
    except BaseException:  # ray.cancel (KeyboardInterrupt) or the driver dropped the stream
        _cancel_worker(box, q, thread, settings.cancel_grace_s)
        raise
    thread.join()
    if "error" in box:
        raise RuntimeError(f"rollout {job.rollout_id} crashed on the worker:\n{box['error']}")
    yield ("result", box["result"])


def _batches(q: queue.Queue, settings: StreamSettings):
    batch: list[tuple] = []
    deadline = 0.0
    while True:
        # short waits: a cancellation (KeyboardInterrupt) is only seen between them
        timeout = 0.1 if not batch else max(0.0, min(0.1, deadline - time.monotonic()))
        try:
            item = q.get(timeout=timeout)
        except queue.Empty:
            if batch and time.monotonic() >= deadline:
                yield ("events", batch)
                batch = []
            continue
        if item is _DONE:
            break
        batch.append(item)
        if len(batch) == 1:
            deadline = time.monotonic() + settings.batch_s
        if len(batch) >= settings.batch_events:
            yield ("events", batch)
            batch = []
    if batch:
        yield ("events", batch)


def _cancel_worker(box: dict, q: queue.Queue, thread: threading.Thread, grace_s: float) -> None:
    """Cancel the rollout's event loop, then drain the queue until its sandbox is closed."""
    box["ready"].wait(grace_s)
    if "cancel" in box and thread.is_alive():
        scope, token = box["cancel"]
        try:
            anyio.from_thread.run_sync(scope.cancel, token=token)
        except Exception:  # the loop already ended
            pass
    deadline = time.monotonic() + grace_s
    while thread.is_alive() and time.monotonic() < deadline:
        try:
            q.get(timeout=0.05)
        except queue.Empty:
            pass
    box["abandoned"] = True


def make_ray_executor(**options: Any) -> RayExecutor:
    """The factory behind `--executor ray`: unknown options are an error that lists the known ones."""
    known = [name for name in inspect.signature(RayExecutor.__init__).parameters if name != "self"]
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise ValueError(f"ray executor: unknown option(s) {', '.join(unknown)}; known: {', '.join(known)}")
    return RayExecutor(**options)


@hookimpl
def register_executors(register):
    register("ray", make_ray_executor)
