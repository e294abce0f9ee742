"""How many rollouts run at once: the slots and the work queue the runner feeds, and `-c auto`'s controller.

The runner starts a rollout only when `Slots.take()` gives it a slot: the level can change while rollouts
run (the controller, `clawsdk ctl RUN set concurrency=N`) and a paused run takes none. `WorkQueue` hands out
what is left to do, takes requeued rollouts while the run is live, and ends when nothing is queued or in
flight. Only `level` rollouts exist at once, whatever the size of the plan.

`Controller` is `-c auto`. It looks at what the run and the machine did since the last look (every tenth of
a second while starting, every `interval` after) and moves the level:

- *start*: while every slot is busy and nothing presses, and half the rollouts it last let in have started
  their sandboxes, the level doubles (quadruples while every signal rests and sandboxes are cheap), up to
  the ceiling;
- *steady*: then it climbs on measured throughput, an epoch (about a rollout's duration) at a time: a raise
  that brought no more than 5% more rollouts/s is taken back and held a while;
- *pressure* stops the climb or lowers the level. Host: available memory, free disk under the workspaces and
  the store, CPU run queue (when this run uses a good share of the CPU and tasks wait for it), sandbox
  start latency. Model: call latency against its baseline, 429/503 answers, the backend's queue where it
  reports one. A rollout's own slowness (a tool that times out, an agent that runs out of time) is not
  pressure: only sandbox starts and model calls are timed.

Each decision that changes something is handed to `on_decision` (the runner records it in the store's
run_control table, which the TUI shows). The controller is a plain object fed with observations, so the
tests drive `tick()` with their own clock and figures.
"""

from __future__ import annotations

import collections
import logging
import math
import os
import re
import resource
import shutil
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import anyio

log = logging.getLogger(__name__)

AUTO = "auto"
#: the default ceiling of `-c auto`
DEFAULT_CEILING = 1024


def parse_concurrency(value: int | str | None) -> int | str:
    """`auto` or a positive whole number, as `-c` and `run(concurrency=)` take it; ValueError otherwise."""
    if value is None or (isinstance(value, str) and value.strip().lower() == AUTO):
        return AUTO
    if isinstance(value, bool):
        raise ValueError(f"concurrency must be 'auto' or a whole number of at least 1 (got {value!r})")
    try:
        n = int(str(value).strip()) if isinstance(value, str) else int(value)
    except ValueError:
        raise ValueError(f"concurrency must be 'auto' or a whole number of at least 1 (got {value!r})") \
            from None
    if n < 1 or (n != value and not isinstance(value, str)):
        raise ValueError(f"concurrency must be 'auto' or a whole number of at least 1 (got {value!r})")
    return n


# ---- slots and the queue of work ---------------------------------------------------------------


class Slots:
    """Capacity for rollouts, resizable while they run, and a pause gate for new rollouts and model calls.

    One taker (the runner's dispatcher) waits in `take()`; lowering the level never stops a rollout in flight,
    it only holds back the next ones. `wait_unpaused()` returns how long it waited, so a rollout can give its
    clock that time back."""

    def __init__(self, level: int):
        self._level = max(1, int(level))
        self.in_use = 0
        self.paused = False
        self._changed = anyio.Event()
        self._resumed = anyio.Event()
        self._resumed.set()

    @property
    def level(self) -> int:
        return self._level

    @level.setter
    def level(self, n: int) -> None:
        self._level = max(1, int(n))
        self._notify()

    @property
    def saturated(self) -> bool:
        return self.in_use >= self._level

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def take(self) -> None:
        while self.paused or self.in_use >= self._level:
            await self._changed.wait()
        self.in_use += 1

    def give(self) -> None:
        self.in_use -= 1
        self._notify()

    def pause(self) -> None:
        if not self.paused:
            self.paused = True
            self._resumed = anyio.Event()
            self._notify()

    def resume(self) -> None:
        if self.paused:
            self.paused = False
            self._resumed.set()
            self._notify()

    async def wait_unpaused(self) -> float:
        """Wait while the run is paused; the seconds waited (0 when it was not)."""
        if not self.paused:
            return 0.0
        started = time.monotonic()
        await self._resumed.wait()
        return time.monotonic() - started


class WorkQueue:
    """What is left to run, in order, then whatever is requeued while the run is live.

    Iterating yields items until none is queued and none of those handed out is still running
    (`done()` says one ended), so a requeue during the last rollout still runs."""

    def __init__(self, items: Iterable[Any]):
        self._items: collections.deque = collections.deque(items)
        self.in_flight = 0
        self.closed = False  # it has said it is done: nothing put now would run
        self._changed = anyio.Event()

    def __len__(self) -> int:
        return len(self._items)

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    def put(self, item: Any) -> None:
        if self.closed:
            raise RuntimeError("the run has handed out all its work and is ending")
        self._items.append(item)
        self._notify()

    def done(self) -> None:
        self.in_flight -= 1
        self._notify()

    def __aiter__(self) -> WorkQueue:
        return self

    async def __anext__(self) -> Any:
        while not self._items:
            if self.in_flight <= 0:
                self.closed = True
                raise StopAsyncIteration
            await self._changed.wait()
        self.in_flight += 1
        return self._items.popleft()


# ---- what the controller looks at ------------------------------------------------------------------


@dataclass
class Host:
    """One look at the machine."""

    cpus: int = 1
    runnable: float = 0.0  # runnable tasks (the CPU run queue), this process's and everyone's
    cpu_pressure: float | None = None  # PSI: share of the last 10 s some task waited for a CPU (percent)
    mem_total: int = 0
    mem_available: int = 0
    disk_free: dict[str, int] = field(default_factory=dict)  # path -> bytes free
    loop_lag_s: float = 0.0  # how late this process's event loop woke up
    #: the share of the machine's CPU this process and its children used since the last look (None: unknown);
    #: a run queue others fill is no reason for this run to hold back
    cpu_ours: float | None = None


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


class HostSampler:
    """Reads the host's CPU run queue, CPU pressure, memory and free disk (Linux /proc; what it cannot read
    it leaves at rest, so a platform without it only loses those signals)."""

    def __init__(self, paths: Iterable[str | os.PathLike] = ()):
        self.paths = [str(p) for p in paths if p]
        try:
            self.cpus = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            self.cpus = os.cpu_count() or 1

    def sample(self, loop_lag_s: float = 0.0) -> Host:
        host = Host(cpus=self.cpus, loop_lag_s=loop_lag_s)
        stat = _read("/proc/stat") or ""
        m = re.search(r"^procs_running\s+(\d+)", stat, re.M)
        if m:
            host.runnable = max(0, int(m.group(1)) - 1)  # less the reader itself
        psi = _read("/proc/pressure/cpu") or ""
        m = re.search(r"^some avg10=([\d.]+)", psi, re.M)
        if m:
            host.cpu_pressure = float(m.group(1))
        info = _read("/proc/meminfo") or ""
        for key, attr in (("MemTotal", "mem_total"), ("MemAvailable", "mem_available")):
            m = re.search(rf"^{key}:\s+(\d+) kB", info, re.M)
            if m:
                setattr(host, attr, int(m.group(1)) * 1024)
        for path in self.paths:
            try:
                host.disk_free[path] = shutil.disk_usage(path).free
            except OSError:
                pass
        return host


def fd_ceiling(per_rollout: int = 12) -> int:
    """The most rollouts the open-file limit leaves room for (sockets, pipes, workspace descriptors)."""
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):
        return DEFAULT_CEILING
    return max(1, (soft if soft != resource.RLIM_INFINITY else 1 << 20) // per_rollout)


# ---- the controller --------------------------------------------------------------------------------


@dataclass
class Decision:
    """A change of level (or of why it holds), as the store records it."""

    action: str  # start | raise | lower | hold | revert
    level: int
    previous: int
    reason: str
    detail: dict[str, Any] = field(default_factory=dict)


#: model answers that say the backend is overloaded (counted from the model backend and from error events)
OVERLOADED = {429, 503}
GIB = 1 << 30


class Controller:
    """`-c auto`: moves `slots.level` between `floor` and `ceiling` by throughput and pressure."""

    def __init__(self, slots: Slots, *, ceiling: int = DEFAULT_CEILING, floor: int = 1,
                 initial: int | None = None, interval: float = 0.25, sampler: HostSampler | None = None,
                 on_decision: Callable[[Decision], Any] | None = None,
                 clock: Callable[[], float] = time.monotonic, backlog: Callable[[], int] | None = None,
                 queue_probe: Callable[[], float | None] | None = None, fixed: int | None = None,
                 sees_sandbox_starts: bool = True):
        self.slots = slots
        self.ceiling = max(1, ceiling)
        self.floor = max(1, min(floor, self.ceiling))
        self.interval = interval
        self.sampler = sampler or HostSampler()
        self.on_decision = on_decision
        self.clock = clock
        self.backlog = backlog or (lambda: 1)  # rollouts waiting for a slot (the run's queue)
        self.queue_probe = queue_probe
        self.fixed = fixed is not None  # a fixed -c, or an operator set the level: it only watches
        start = initial if initial is not None else min(self.ceiling, max(8, 4 * self.sampler.cpus))
        slots.level = fixed if fixed is not None else max(self.floor, min(self.ceiling, start))
        self.phase = "start"
        self.reason = f"fixed at {fixed} (-c {fixed})" if fixed is not None else f"starting at {slots.level}"
        # observations since the last tick
        self._model_ms: list[float] = []
        self._overloaded = 0
        self._model_calls = 0
        self._starts_ms: list[float] = []
        self._finished = 0
        self._sandbox_errors = 0
        self._durations: collections.deque[float] = collections.deque(maxlen=200)
        # what it has learnt
        self.model_base_ms: float | None = None
        self.start_base_ms: float | None = None
        self._model_recent: collections.deque[float] = collections.deque(maxlen=3)  # per-tick medians
        self._start_recent: collections.deque[float] = collections.deque(maxlen=3)
        self._runq: float | None = None  # smoothed run queue
        self._mem_at_start: int | None = None
        self._last_change = clock()
        self._epoch_start = clock()
        self._epoch_done = 0
        self._epoch_busy = 0.0  # seconds of the epoch every slot was busy
        self._epoch_level = slots.level
        self._history: dict[int, float] = {}  # level -> rollouts/s measured at it (last epoch there)
        self._last_move: tuple[str, int, float] | None = None  # (raise|lower, from level, throughput there)
        self._hold_until = 0
        self._epochs = 0
        self._hard_at = -1e9
        self._soft_since: float | None = None  # when the soft pressure that lasts began
        self._last_tick = clock()
        self.last: Decision | None = None
        self._held: tuple | None = None  # (level, reason kinds) of the last hold recorded
        self._started_since_change = 0  # sandboxes started since the level last changed
        self._cohort = slots.level  # rollouts the last raise (or the start) let in
        self.sees_sandbox_starts = sees_sandbox_starts  # False: they start elsewhere (Ray's workers)
        self._levels: collections.deque[tuple[float, int]] = collections.deque([(clock(), slots.level)],
                                                                               maxlen=64)

    # ---- observations (cheap: called on the hot path) ----

    def observe(self, kind: str, duration_ms: float | None, payload: dict | None) -> None:
        """A recorder's event: model latency, an error's kind, a sandbox start."""
        if kind == "model_response" and duration_ms is not None:
            self._model_ms.append(duration_ms)
            self._model_calls += 1
        elif kind == "sandbox_start" and duration_ms is not None:
            self._starts_ms.append(duration_ms)
            self._started_since_change += 1
        elif kind == "error" and payload is not None:
            if payload.get("kind") == "model_error" and _overloaded_text(str(payload.get("message", ""))):
                self._overloaded += 1
                self._model_calls += 1

    def model_status(self, status: int) -> None:
        """A status a model backend got (retried or not): 429 and 503 say it is overloaded."""
        self._model_calls += 1
        if status in OVERLOADED:
            self._overloaded += 1

    def rollout_finished(self, kind: str, duration_s: float) -> None:
        self._finished += 1
        self._epoch_done += 1
        if kind == "sandbox_error":
            self._sandbox_errors += 1
        elif kind in ("ok", "agent_error", "agent_timeout"):
            self._durations.append(duration_s)

    # ---- operator settings ----

    def set_fixed(self, level: int) -> None:
        self.fixed = True
        self.slots.level = max(1, level)
        self.reason = f"set to {self.slots.level} by an operator"

    def set_auto(self, ceiling: int | None = None) -> None:
        if ceiling is not None:
            self.ceiling = max(1, ceiling)
        self.fixed = False
        self.phase = "steady"
        self.slots.level = max(self.floor, min(self.ceiling, self.slots.level))
        self._new_epoch(self.clock())
        self._last_move = None
        self.reason = f"auto again from {self.slots.level}"

    # ---- the loop ----

    async def run(self) -> None:
        used, at = _cpu_used(), time.monotonic()
        while True:
            t0, pause = time.monotonic(), self._pause_s()
            await anyio.sleep(pause)
            lag = max(0.0, time.monotonic() - t0 - pause)
            host = self.sampler.sample(lag)  # a few /proc reads and a statvfs: no thread hop, which a busy
            #                                   loop would make wait
            now_used, now_at = _cpu_used(), time.monotonic()
            host.cpu_ours = (now_used - used) / max(1e-3, now_at - at) / host.cpus
            used, at = now_used, now_at
            probe = None
            if self.queue_probe is not None:
                probe = await anyio.to_thread.run_sync(self.queue_probe)
            decision = self.tick(host, model_queue=probe)
            if decision is not None and self.on_decision is not None:
                await self.on_decision(decision)

    def tick(self, host: Host, *, model_queue: float | None = None) -> Decision | None:
        """Take this interval's observations and decide; the decision when something changed."""
        now = self.clock()
        level = self.slots.level
        busy = self.slots.saturated and self.backlog() > 0
        elapsed, self._last_tick = now - self._last_tick, now
        if busy:
            self._epoch_busy += elapsed
        model_p50 = statistics.median(self._model_ms) if self._model_ms else None
        start_p50 = statistics.median(self._starts_ms) if self._starts_ms else None
        overloaded, calls = self._overloaded, self._model_calls
        finished, sandbox_errors = self._finished, self._sandbox_errors
        self._model_ms, self._starts_ms = [], []
        self._overloaded = self._model_calls = self._finished = self._sandbox_errors = 0
        if model_p50 is not None:
            self._model_recent.append(model_p50)
        if start_p50 is not None:
            self._start_recent.append(start_p50)
        self._learn_baselines(model_p50, start_p50, level)
        self._runq = host.runnable if self._runq is None else 0.7 * self._runq + 0.3 * host.runnable
        if self._mem_at_start is None and host.mem_available:
            self._mem_at_start = host.mem_available
        if self.slots.paused or self.fixed:
            self._new_epoch(now)
            return None

        hard, soft, lasting = self._pressure(host, overloaded, calls, finished, sandbox_errors, model_queue)
        figures = self._figures(host, level)
        if hard:
            self._soft_since = None
            if now - self._hard_at < max(2.0, self._lookback_s()) or level <= self.floor:
                return self._hold("hold", level, hard, figures)
            self._hard_at = now
            self.phase = "steady"
            return self._move("lower", max(self.floor, math.floor(level * 0.7)), "; ".join(hard), figures,
                              now)
        if soft:
            if self.phase == "start":
                # what presses now was started a model call (and a sandbox start) ago: back to the level then,
                # and climb on throughput from there
                self.phase = "steady"
                back = self._level_at(now - self._lookback_s())
                return self._move("lower" if back < level else "hold", back, "; ".join(soft), figures, now)
            self._soft_since = now if self._soft_since is None else self._soft_since
            if lasting and now - self._soft_since >= max(2 * self._lookback_s(), 2.0):
                # what lasts and says this run asks too much (the model slows, sandboxes start slowly, memory
                # runs low) lowers it; a busy CPU only stops the climb: throughput says whether less is better
                self._soft_since = None
                return self._move("lower", max(self.floor, math.floor(level * 0.9)), "; ".join(soft), figures,
                                  now)
            return self._hold("hold", level, soft, figures)
        self._soft_since = None

        if self.phase == "start":
            if busy and level < self.ceiling and now - self._last_change >= self._settle_s() \
                    and self._cohort_started():
                target = self._cap_by_memory(host, min(self.ceiling, level * self._growth(host)), level)
                if target > level:
                    return self._move("raise", target, f"all {level} slots busy and nothing presses", figures,
                                      now)
            if not busy and self._epoch_done and now - self._last_change >= 4 * self._lookback_s():
                self.phase = "steady"  # the run gives no more work than this: climb on throughput from here
            return None
        return self._steady(now, level, host, figures)

    def _steady(self, now: float, level: int, host: Host, figures: dict) -> Decision | None:
        elapsed = now - self._epoch_start
        if elapsed < self._epoch_s() or (self._epoch_done < 8 and elapsed < 4 * self._epoch_s()):
            return None
        saturated_share = self._epoch_busy / elapsed if elapsed else 0.0
        rate = self._epoch_done / elapsed
        self._epochs += 1
        if saturated_share < 0.6:  # the run did not fill its slots: no figure about this level
            self._new_epoch(now)
            return None
        self._history[level] = rate
        figures["throughput"] = round(rate, 3)
        move = self._last_move
        self._new_epoch(now)
        if move is not None and move[0] == "raise":
            _, before, rate_before = move
            if rate <= rate_before * 1.05:
                self._hold_until = self._epochs + 3
                return self._move("revert", before, f"{rate:.2f} rollouts/s at {level} is no better than "
                                  f"{rate_before:.2f} at {before}", figures, now)
        if move is not None and move[0] == "lower":
            _, before, rate_before = move
            if rate < rate_before * 0.95 and self._hold_until <= self._epochs:
                return self._move("raise", before, f"{rate:.2f} rollouts/s at {level} is less than "
                                  f"{rate_before:.2f} at {before}", figures, now)
        if self._epochs < self._hold_until or level >= self.ceiling:
            self._last_move = None
            return None
        target = self._cap_by_memory(host, min(self.ceiling, max(level + 1, math.ceil(level * 1.25))), level)
        if target <= level:
            return None
        return self._move("raise", target, f"probing: {rate:.2f} rollouts/s at {level}", figures, now,
                          rate=rate)

    # ---- pieces ----

    def _learn_baselines(self, model_p50: float | None, start_p50: float | None, level: int) -> None:
        """The unloaded latency: the lowest per-interval median seen, slowly forgotten (a model server that
        got faster for good, a sandbox image now cached)."""
        if model_p50 is not None:
            base = self.model_base_ms
            self.model_base_ms = model_p50 if base is None or model_p50 < base else base * 1.002
        if start_p50 is not None:
            base = self.start_base_ms
            self.start_base_ms = start_p50 if base is None or start_p50 < base else base * 1.002

    def _pressure(self, host: Host, overloaded: int, calls: int, finished: int, sandbox_errors: int,
                  model_queue: float | None) -> tuple[list[str], list[str], bool]:
        """(hard, soft) reasons: hard lowers the level at once, soft stops the climb (and lowers if it
        lasts)."""
        hard: list[str] = []
        soft: list[str] = []
        if host.mem_total and host.mem_available:
            share = host.mem_available / host.mem_total
            if share < 0.08 or host.mem_available < GIB // 2:
                hard.append(f"memory: {host.mem_available / GIB:.1f} GiB available ({share:.0%})")
            elif share < 0.15:
                soft.append(f"memory: {host.mem_available / GIB:.1f} GiB available ({share:.0%})")
        for path, free in host.disk_free.items():
            if free < 256 * (1 << 20):
                hard.append(f"disk: {free / (1 << 20):.0f} MiB free under {path}")
        if overloaded and overloaded >= max(1, 0.02 * calls):
            hard.append(f"model: {overloaded} of {calls} calls answered 429/503 (overloaded)")
        if finished >= 4 and sandbox_errors / finished >= 0.25:
            hard.append(f"sandboxes: {sandbox_errors} of {finished} rollouts could not get one "
                        "(sandbox_error)")
        if model_queue is not None and model_queue > 0 and self.model_base_ms:
            soft.append(f"model: its server queues {model_queue:g} requests")
        recent = statistics.median(self._model_recent) if self._model_recent else None
        if recent is not None and self.model_base_ms and recent > 2.0 * self.model_base_ms and recent > 50:
            soft.append(f"model: latency {recent / 1000:.2f} s is {recent / self.model_base_ms:.1f}x its "
                        f"{self.model_base_ms / 1000:.2f} s baseline")
        starts = statistics.median(self._start_recent) if self._start_recent else None
        if starts is not None and self.start_base_ms and starts > 3.0 * self.start_base_ms and starts - self.start_base_ms > 250:
            soft.append(f"sandboxes: start takes {starts / 1000:.2f} s, "
                        f"{starts / self.start_base_ms:.1f}x its "
                        f"{self.start_base_ms / 1000:.2f} s baseline")
        lasting = bool(soft)  # the reasons so far lower the level when they last; the CPU's below only hold it
        runq = self._runq or 0.0
        starved = host.loop_lag_s > 0.25 or (host.cpu_pressure is not None and host.cpu_pressure > 60)
        ours = host.cpu_ours is None or host.cpu_ours >= 0.25  # this run uses a quarter of the machine or more
        if runq > 3 * host.cpus and starved and ours:
            why = (f"CPU: {runq:.0f} runnable on {host.cpus} cores"
                   + (f", tasks waited for a CPU {host.cpu_pressure:.0f}% of the last 10 s"
                      if host.cpu_pressure is not None else "")
                   + (f", this process's event loop {host.loop_lag_s * 1000:.0f} ms late"
                      if host.loop_lag_s > 0.05 else "")
                   + (f", this run's share {host.cpu_ours:.0%}" if host.cpu_ours is not None else ""))
            soft.append(why)
        return hard, soft, lasting

    def _cap_by_memory(self, host: Host, target: int, level: int) -> int:
        """`target`, lowered so that what each rollout took so far, times the new ones, leaves 15% free."""
        if not (host.mem_total and host.mem_available and self._mem_at_start) or self.slots.in_use < 4:
            return target
        per = max(0, self._mem_at_start - host.mem_available) / self.slots.in_use
        if per <= 0:
            return target
        room = host.mem_available - 0.15 * host.mem_total
        return max(level, min(target, level + int(room // per)))

    def _settle_s(self) -> float:
        """How long the start phase waits between doublings: the rollouts just added must have started their
        sandboxes (a model call's cost shows later: `_lookback_s` takes the level back that far)."""
        return min(2.0, max(self._pause_s(), 1.5 * (self.start_base_ms or 0.0) / 1000))

    def _pause_s(self) -> float:
        """Between two looks: a tenth of a second while starting (the rollouts let in start their sandboxes
        within it, where sandboxes are cheap; a slow model's calls show their latency a second later, and
        the level steps back to where it was then), `interval` after."""
        return min(self.interval, 0.1) if self.phase == "start" else self.interval

    def _growth(self, host: Host) -> int:
        """How much a start-phase raise multiplies the level: 4 while every signal is at its resting value and
        sandboxes are cheap to start (rollouts that mostly wait: a slow model), else 2."""
        model = statistics.median(self._model_recent) if self._model_recent else None
        starts = statistics.median(self._start_recent) if self._start_recent else None
        clean = ((model is None or not self.model_base_ms or model <= 1.25 * self.model_base_ms)
                 and (self.start_base_ms is None or self.start_base_ms < 100)
                 and (starts is None or not self.start_base_ms or starts <= max(1.5 * self.start_base_ms, 20))
                 and host.loop_lag_s < 0.05 and (self._runq or 0.0) <= host.cpus)
        return 4 if clean else 2

    def _cohort_started(self) -> bool:
        """Whether half the rollouts the last raise let in have started their sandboxes, so that their start
        latency has been seen (a docker engine slows as it starts more at once); always, where sandbox starts
        are not seen here (on Ray they start on the workers)."""
        return not self.sees_sandbox_starts or self._started_since_change >= self._cohort // 2

    def _lookback_s(self) -> float:
        """How long a raise takes to show its cost: an interval, a sandbox start as they take now (a warm pool
        that ran dry shows only when its cold starts end), an unloaded model call."""
        starts = max(self.start_base_ms or 0.0, statistics.median(self._start_recent) if self._start_recent else 0.0)
        return self.interval + (starts + (self.model_base_ms or 0.0)) / 1000

    def _level_at(self, t: float) -> int:
        level = self._levels[0][1]
        for at, lv in self._levels:
            if at > t:
                break
            level = lv
        return level

    def _epoch_s(self) -> float:
        """An epoch of the throughput climb: about a rollout's duration (so each rollout counts once)."""
        typical = statistics.median(self._durations) if self._durations else 2.0
        return min(60.0, max(2.0, 4 * self.interval, typical))

    def _new_epoch(self, now: float) -> None:
        self._epoch_start = now
        self._epoch_done = 0
        self._epoch_busy = 0.0
        self._epoch_level = self.slots.level

    def _figures(self, host: Host, level: int) -> dict[str, Any]:
        out: dict[str, Any] = {"level": level, "in_use": self.slots.in_use, "phase": self.phase,
                               "runnable": round(self._runq or 0.0, 1), "cpus": host.cpus}
        if host.cpu_pressure is not None:
            out["cpu_pressure"] = host.cpu_pressure
        if host.mem_total:
            out["mem_available_gib"] = round(host.mem_available / GIB, 2)
        if self._model_recent:
            out["model_ms"] = round(statistics.median(self._model_recent), 1)
        if self.model_base_ms:
            out["model_base_ms"] = round(self.model_base_ms, 1)
        if self._start_recent:
            out["sandbox_start_ms"] = round(statistics.median(self._start_recent), 1)
        if host.loop_lag_s:
            out["loop_lag_ms"] = round(host.loop_lag_s * 1000, 1)
        if host.cpu_ours is not None:
            out["cpu_ours"] = round(host.cpu_ours, 3)
        return out

    def _move(self, action: str, target: int, why: str, figures: dict, now: float, *,
              rate: float | None = None) -> Decision | None:
        level = self.slots.level
        target = max(self.floor, min(self.ceiling, target))
        if target == level:
            return self._hold("hold", level, [why], figures)
        if action in ("raise", "lower"):
            measured = rate if rate is not None else self._history.get(level, 0.0)
            self._last_move = (action, level, measured)
        else:
            self._last_move = None
        self.slots.level = target
        self._held = None
        self._started_since_change, self._cohort = 0, max(0, target - level)
        self._levels.append((now, target))
        self._last_change = now
        self._new_epoch(now)
        verb = {"raise": "raised", "lower": "lowered", "revert": "back", "hold": "held"}.get(action, action)
        self.reason = f"{verb} {level} -> {target}: {why}"
        return self._decide(action, target, level, figures)

    def _hold(self, action: str, level: int, why: list[str], figures: dict) -> Decision | None:
        keys = (level, frozenset(w.split(":", 1)[0] for w in why))
        self.reason = f"held at {level}: {'; '.join(why)}"  # the figures of now, for status
        if keys == self._held:
            return None  # held for the same reasons as last time: no new row
        self._held = keys
        return self._decide(action, level, level, figures)

    def _decide(self, action: str, level: int, previous: int, figures: dict) -> Decision:
        figures = {**figures, "ceiling": self.ceiling}
        self.last = Decision(action=action, level=level, previous=previous, reason=self.reason,
                             detail=figures)
        log.info("concurrency: %s", self.reason)
        return self.last


def _cpu_used() -> float:
    """CPU seconds this process and its children (the sandboxes' processes, once reaped) have used."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _overloaded_text(message: str) -> bool:
    return bool(re.search(r"\b(429|503)\b|too many requests|overloaded|rate.?limit", message, re.I))


# ---- model pressure reported by backends -------------------------------------------------------------

_status_listeners: list[Callable[[int], None]] = []


def report_model_status(status: int) -> None:
    """Model backends call this with each HTTP status they get, retried ones included; `-c auto` counts
    429 and 503 as the model's pressure. Costs nothing when no run listens."""
    for listener in list(_status_listeners):
        try:
            listener(status)
        except Exception:  # a listener must never fail a model call
            log.debug("model status listener failed", exc_info=True)


def listen_model_status(listener: Callable[[int], None]) -> Callable[[], None]:
    """Register `listener`; returns the function that removes it."""
    _status_listeners.append(listener)
    return lambda: _status_listeners.remove(listener) if listener in _status_listeners else None


def vllm_queue_probe(base_url: str, timeout_s: float = 1.0) -> Callable[[], float | None] | None:
    """A probe of an OpenAI-compatible server's waiting queue, where it reports one (vLLM's Prometheus
    `vllm:num_requests_waiting` at /metrics, SGLang's `sglang:num_queue_reqs`); None when the URL is not
    http."""
    from urllib.parse import urlsplit

    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    url = f"{parts.scheme}://{parts.netloc.rsplit('@', 1)[-1]}/metrics"
    state = {"dead": False}
    pattern = re.compile(r"^(?:vllm:num_requests_waiting|sglang:num_queue_reqs)(?:\{[^}]*\})?\s+([\d.eE+-]+)",
                         re.M)

    def probe() -> float | None:
        if state["dead"]:
            return None
        import urllib.request

        try:
            with urllib.request.urlopen(url, timeout=timeout_s) as r:  # the user's model server
                text = r.read(2 << 20).decode("utf-8", "replace")
        except Exception:  # no /metrics: this backend reports no queue
            state["dead"] = True
            return None
        values = [float(v) for v in pattern.findall(text)]
        if not values:
            state["dead"] = True
            return None
        return sum(values)

    return probe
