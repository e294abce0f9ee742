"""`-c auto`'s controller, fed with its observations on a clock of the test's: what raises the level, what
lowers it, what it must not take for pressure. (Throughput against fixed levels is measured in
benchmarks/concurrency.py, not here.)"""

from __future__ import annotations

import anyio
import pytest

from clawsdk.runtime.concurrency import (
    Controller,
    Host,
    Slots,
    WorkQueue,
    listen_model_status,
    parse_concurrency,
    report_model_status,
    vllm_queue_probe,
)

GIB = 1 << 30


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def healthy(**kw) -> Host:
    return Host(**{"cpus": 2, "runnable": 1, "cpu_pressure": 5.0, "mem_total": 24 * GIB,
                   "mem_available": 20 * GIB, **kw})


def controller(ceiling: int = 1024, backlog: int = 10_000, **kw) -> tuple[Controller, Slots, Clock]:
    kw.setdefault("initial", 4)
    kw.setdefault("sees_sandbox_starts", False)  # as on Ray; the tests of sandbox starts say they see them
    slots, clock = Slots(1), Clock()
    c = Controller(slots, ceiling=ceiling, clock=clock, interval=0.5, backlog=lambda: backlog, **kw)
    return c, slots, clock


def step(c: Controller, slots: Slots, clock: Clock, host: Host | None = None, *, model_ms: float | None = None,
         calls: int = 0, finished: int = 0, busy: bool = True, **kw):
    """One interval: every slot busy (or not), `calls` model answers of `model_ms`, `finished` rollouts."""
    clock.t += c.interval
    slots.in_use = slots.level if busy else 0
    for _ in range(calls):
        c.observe("model_response", model_ms, None)
    for _ in range(finished):
        c.rollout_finished("ok", 2.0)
    return c.tick(host or healthy(), **kw)


def test_it_starts_at_four_times_the_cores():
    c, slots, _clock = controller(initial=None)
    assert slots.level == 4 * c.sampler.cpus or slots.level == 8


def test_it_climbs_while_every_slot_is_busy_and_stops_at_the_ceiling():
    """Four times at a step while every signal rests (rollouts that wait on a model), twice once one moved."""
    c, slots, clock = controller(ceiling=100)
    assert slots.level == 4
    levels = []
    for _ in range(12):
        d = step(c, slots, clock, model_ms=1000, calls=slots.level)
        levels.append(slots.level)
        if d is not None:
            assert d.action == "raise" and "busy" in d.reason
    assert levels[:3] == [16, 64, 100] and levels[-1] == 100
    c, slots, clock = controller(ceiling=100)
    levels = []
    for _ in range(6):  # a longer run queue than cores, not yet pressure: doubling
        step(c, slots, clock, healthy(runnable=5), model_ms=1000, calls=slots.level)
        levels.append(slots.level)
    assert levels[:4] == [8, 16, 32, 64]


def test_idle_slots_are_no_reason_to_raise():
    c, slots, clock = controller()
    for _ in range(10):
        assert step(c, slots, clock, busy=False) is None
    assert slots.level == 4


def test_model_latency_growth_takes_it_back_to_the_level_that_did_not_press():
    c, slots, clock = controller()
    for _ in range(3):  # 4 -> 16 -> 64 -> 256 with 1 s answers
        step(c, slots, clock, model_ms=1000, calls=8)
    assert slots.level == 256
    # the calls of the last raise come back at 3x the baseline: back to where it was a call ago
    decisions = [step(c, slots, clock, model_ms=3000, calls=20) for _ in range(3)]
    d = next(d for d in decisions if d is not None and d.action != "raise")
    assert d.action == "lower" and "latency" in d.reason and "baseline" in d.reason
    assert slots.level <= 64 and c.phase == "steady"  # the level in force a 1 s call (and an interval) ago


def test_429_and_503_lower_it_at_once():
    c, slots, clock = controller(initial=100)
    c.phase = "steady"
    for status in [200] * 40 + [429] * 3 + [503] * 2:
        c.model_status(status)
    d = step(c, slots, clock)
    assert d.action == "lower" and "429/503" in d.reason and slots.level == 70


def test_overloaded_model_errors_in_events_count_too():
    c, slots, clock = controller(initial=50)
    c.observe("error", None, {"kind": "model_error", "message": "HTTP 429: Too Many Requests"})
    d = step(c, slots, clock)
    assert d.action == "lower" and slots.level == 35


def test_low_memory_lowers_it_and_it_never_raises_into_a_full_machine():
    c, slots, clock = controller(initial=64)
    d = step(c, slots, clock, healthy(mem_available=GIB // 4))
    assert d.action == "lower" and "memory" in d.reason and slots.level == 44
    # below 15% free: holds, never raises
    for _ in range(10):
        step(c, slots, clock, healthy(mem_available=3 * GIB), model_ms=1000, calls=10, finished=10)
    assert slots.level <= 44


def test_a_raise_that_would_fill_memory_is_cut_to_what_fits():
    c, slots, clock = controller(initial=8)
    step(c, slots, clock, healthy(mem_available=20 * GIB), busy=False)
    # 8 rollouts took 10 GiB, 1.25 GiB each; down to 15% of 24 GiB (3.6 GiB) leaves room for 5 more, not 8
    d = step(c, slots, clock, healthy(mem_available=10 * GIB))
    assert d.action == "raise" and slots.level == 13


def test_a_tool_timeout_or_an_agent_timeout_is_not_pressure():
    """A rollout that is slow on its own (a tool killed at its timeout, an agent out of time) says nothing of
    the host or the model: only sandbox starts and model calls are timed."""
    c, slots, clock = controller(ceiling=64)
    for _ in range(6):
        clock.t += c.interval
        slots.in_use = slots.level
        for _ in range(5):
            c.rollout_finished("agent_timeout", 600.0)
            c.observe("tool_result", 120_000, {"is_error": True, "content": "timed out after 120 s"})
        d = c.tick(healthy())
        assert d is None or d.action == "raise"
    assert slots.level == 64


def test_a_raise_waits_until_half_of_the_rollouts_it_let_in_have_their_sandboxes():
    """Docker slows as it starts more containers at once: that shows only once they have started."""
    c, slots, clock = controller(sees_sandbox_starts=True)
    c.observe("sandbox_start", 600, None)
    c.observe("sandbox_start", 600, None)  # half the 4 it started with
    for _ in range(3):  # 0.9 s: one and a half starts
        step(c, slots, clock)
    assert slots.level == 8  # 4 let in
    for _ in range(6):  # their sandboxes are still starting
        step(c, slots, clock)
    assert slots.level == 8
    c.observe("sandbox_start", 700, None)
    c.observe("sandbox_start", 650, None)
    step(c, slots, clock)
    assert slots.level == 16


def test_slow_sandbox_starts_stop_the_climb():
    c, slots, clock = controller(sees_sandbox_starts=True)
    for _ in range(2):
        c.observe("sandbox_start", 600, None)
        step(c, slots, clock)
    level = slots.level
    for _ in range(3):
        for _ in range(4):
            c.observe("sandbox_start", 4000, None)
        d = step(c, slots, clock)
    assert d is not None and "sandboxes: start takes" in d.reason and slots.level <= level


def test_a_cpu_starved_host_stops_the_climb_but_a_busy_one_that_keeps_up_does_not():
    c, slots, clock = controller()
    step(c, slots, clock, healthy(runnable=12, cpu_pressure=20.0))
    assert slots.level == 8  # a long run queue alone: nothing waits long for a CPU
    d = None
    for _ in range(3):
        d = step(c, slots, clock, healthy(runnable=12, cpu_pressure=90.0, loop_lag_s=0.4, cpu_ours=0.9)) or d
    assert d is not None and "CPU" in d.reason and "runnable" in d.reason
    held = slots.level
    rows = [step(c, slots, clock, healthy(runnable=12 + i % 3, cpu_pressure=90.0 + i % 5, cpu_ours=0.9))
            for i in range(40)]
    # a busy CPU holds the level (throughput says whether less is better) and is recorded once, not each tick
    assert slots.level == held and sum(r is not None for r in rows) == 0


def test_a_machine_others_keep_busy_is_no_reason_to_hold_back():
    """A shared machine: the run queue and the CPU pressure are other people's work, this run uses little of
    the CPU; a slow model's rollouts mostly wait, so the level must still climb."""
    c, slots, clock = controller()
    for _ in range(6):
        step(c, slots, clock, healthy(runnable=30, cpu_pressure=95.0, loop_lag_s=0.3, cpu_ours=0.05),
             model_ms=1000, calls=10)
    assert slots.level >= 128


def test_in_the_steady_phase_a_raise_that_brings_nothing_is_taken_back():
    c, slots, clock = controller(initial=40)
    c.phase = "steady"
    # 20 rollouts/s at 40: an epoch (2 s) with 40 finished
    d = None
    for _ in range(4):
        d = step(c, slots, clock, finished=10) or d
    assert d is not None and d.action == "raise" and slots.level == 50 and "probing" in d.reason
    for _ in range(4):  # the same 20/s at 50
        d = step(c, slots, clock, finished=10) or d
    assert d.action == "revert" and slots.level == 40 and "no better" in d.reason


def test_in_the_steady_phase_a_raise_that_pays_is_followed_by_another():
    c, slots, clock = controller(initial=40)
    c.phase = "steady"
    for _ in range(4):
        step(c, slots, clock, finished=10)
    assert slots.level == 50
    d = None
    for _ in range(4):  # 25/s at 50
        d = step(c, slots, clock, finished=13) or d
    assert d.action == "raise" and slots.level > 50


def test_an_operator_level_is_left_alone_until_auto_is_asked_again():
    c, slots, clock = controller()
    c.set_fixed(3)
    for _ in range(10):
        assert step(c, slots, clock) is None
    assert slots.level == 3
    c.set_auto()
    for _ in range(6):
        step(c, slots, clock, finished=10)
    assert slots.level > 3


def test_a_paused_run_makes_no_decision():
    c, slots, clock = controller()
    slots.pause()
    for _ in range(5):
        assert step(c, slots, clock) is None
    assert slots.level == 4


def test_parse_concurrency():
    assert parse_concurrency("auto") == "auto" and parse_concurrency(None) == "auto"
    assert parse_concurrency("8") == 8 and parse_concurrency(3) == 3
    for bad in ("0", "-2", "lots", 2.5, True, 0):
        with pytest.raises(ValueError, match="'auto' or a whole number"):
            parse_concurrency(bad)


def test_slots_hold_new_takers_while_paused_and_give_the_pause_back():
    async def main():
        slots = Slots(2)
        await slots.take()
        slots.pause()
        took = []

        async def taker():
            await slots.take()
            took.append(1)

        async with anyio.create_task_group() as tg:
            tg.start_soon(taker)
            await anyio.sleep(0.1)
            assert not took  # paused: a free slot is not taken
            waited = []

            async def waiter():
                waited.append(await slots.wait_unpaused())

            tg.start_soon(waiter)
            await anyio.sleep(0.2)
            slots.resume()
        assert took and waited[0] >= 0.15
        slots.level = 1  # lowering never takes a slot back from a rollout in flight
        assert slots.in_use == 2

    anyio.run(main)


def test_the_work_queue_ends_only_when_nothing_is_queued_or_running():
    async def main():
        q = WorkQueue([1, 2])
        got = []
        async with anyio.create_task_group() as tg:
            async def run_one(item):
                await anyio.sleep(0.05)
                if item == 2:
                    q.put(3)  # requeued while the last one runs
                q.done()

            async for item in q:
                got.append(item)
                tg.start_soon(run_one, item)
        assert got == [1, 2, 3]

    anyio.run(main)


def test_model_status_listeners():
    seen = []
    stop = listen_model_status(seen.append)
    report_model_status(429)
    stop()
    report_model_status(503)
    assert seen == [429]


def test_the_vllm_queue_probe_reads_prometheus_metrics(tmp_path):
    import http.server
    import threading

    class Metrics(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = (b'# HELP vllm:num_requests_waiting\nvllm:num_requests_waiting{model_name="m"} 7.0\n'
                    if self.path == "/metrics" else b"")
            self.send_response(200 if body else 404)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Metrics)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        probe = vllm_queue_probe(f"http://127.0.0.1:{server.server_port}/v1")
        assert probe() == 7.0
        c, slots, clock = controller()
        c.model_base_ms = 1000.0
        d = step(c, slots, clock, model_queue=probe())
        assert d is not None and "queues 7 requests" in d.reason
    finally:
        server.shutdown()
    assert vllm_queue_probe("embedded") is None
