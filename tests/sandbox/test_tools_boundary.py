"""One agent's hostile file, parsed by a tool, must not stall the run it shares or grow the runner.

Per backend and per shape of hostile file (tests/fixtures/hostile_files.py: each held the whole run for
20 s or more, or took gigabytes, when the skills parsed in the runner's process), one run of two rollouts:
the first writes the file as an agent would (base64 through `write`, decoded with `exec`) and calls the
tool that parses it; the second calls `exec sleep 0.5` again and again meanwhile. Then:

- the sleeper's longest gap between two of its events stays under 1.5 s (nothing held the event loop);
- the hostile call ends as a tool timeout or a tool error within tool_timeout_s + 2 s;
- the runner's memory (RSS, sampled throughout) grows by less than 100 MB;
- both rollouts are scored: the hostile one goes on after the call and finishes its work.
"""

from __future__ import annotations

import base64
import datetime as dt
import itertools
import json
import threading

import psutil
import pytest

from clawsdk import Store, run_sync
from clawsdk.tasks.model import Task
from tests.fixtures.hostile_files import SKILL_OF, cases
from tests.sandbox.sandbox_backends import skip_unless_available

pytestmark = pytest.mark.slow

TOOL_TIMEOUT_S = 5.0
BACKENDS = ["local", "bwrap", "docker"]
#: one case per shape the issue names; every case of the corpus runs at once on bwrap below
SHAPES = ("calendar-daily-flood", "grep-pattern-compile", "docx-entity-text", "xlsx-shared-string-query",
          "mail-nested-mime")
CASES = [c for c in cases() if c.name in SHAPES]


def hostile_task(case, timeout_s: float = 120) -> Task:
    steps = []
    for path, data in case.files.items():
        steps.append({"tool": "write", "args": {"path": f"{path}.b64", "content": base64.b64encode(data).decode()}})
        steps.append({"tool": "exec", "args": {"command": f"base64 -d '{path}.b64' > '{path}' && rm '{path}.b64'"}})
    steps.append({"tool": case.tool, "args": case.args})
    steps.append({"tool": "write", "args": {"path": "done.txt", "content": "went on\n"}})
    tools = ["core"] if SKILL_OF[case.tool] == "core" else ["core", SKILL_OF[case.tool]]
    return Task.model_validate({
        "id": f"hostile-{case.name}", "instruction": f"parse a hostile file ({case.name})", "tools": tools,
        "solution": steps, "limits": {"tool_timeout_s": TOOL_TIMEOUT_S, "timeout_s": timeout_s},
        "verifier": {"checks": [{"type": "file_exists", "path": "done.txt"}]}})


def sleeper_task(rounds: int, timeout_s: float = 120) -> Task:
    steps = [{"tool": "exec", "args": {"command": "sleep 0.5"}} for _ in range(rounds)]
    steps.append({"tool": "write", "args": {"path": "done.txt", "content": "slept\n"}})
    return Task.model_validate({
        "id": "sleeper", "instruction": "sleep in steps", "solution": steps, "limits": {"timeout_s": timeout_s},
        "verifier": {"checks": [{"type": "file_exists", "path": "done.txt"}]}})


class PeakRSS:
    """The process's resident memory, sampled every 20 ms while the block runs."""

    def __init__(self) -> None:
        self.proc = psutil.Process()
        self.peak = self.start = self.proc.memory_info().rss
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, self.proc.memory_info().rss)

    def __enter__(self) -> PeakRSS:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def _ts(event: dict) -> float:
    return dt.datetime.fromisoformat(event["ts"].replace("Z", "+00:00")).timestamp()


def run_with_sleeper(backend: str, hostile: list, tmp_path, rounds: int):
    """Run the hostile cases and one sleeper at once; (result, store events by task id, runner growth in MB)."""
    # warm up: what a first run loads (the registry, the store, the backend's client) is not the file's doing
    run_sync([sleeper_task(1)], agent="oracle", sandbox=backend, db=tmp_path / "warm.db", retries=0)
    db = tmp_path / "run.db"
    tasks = [hostile_task(c, timeout_s=300) for c in hostile] + [sleeper_task(rounds, timeout_s=300)]
    with PeakRSS() as rss:
        result = run_sync(tasks, agent="oracle", sandbox=backend, db=db, concurrency=len(tasks), retries=0)
    with Store(db) as store:
        events = {o.task_id: store.events(o.rollout_id) for o in result.outcomes}
    return result, events, (rss.peak - rss.start) / 2**20


def check_hostile_call(case, events: list[dict]) -> dict:
    """The hostile call ended as a tool timeout or error within tool_timeout_s + 2 s; its tool_result."""
    calls = {e["seq"]: e for e in events if e["kind"] == "tool_call"}
    [parse] = [e for e in events if e["kind"] == "tool_result" and e["payload"]["tool"] == case.tool]
    assert calls[parse["payload"]["call"]]["payload"]["tool"] == case.tool
    # the call's own time: its first call also starts the tool host, on a budget of its own (recorded)
    took_s = (parse["duration_ms"] - parse["payload"].get("tool_host_start_ms", 0)) / 1000
    assert took_s <= TOOL_TIMEOUT_S + 2, (took_s, parse["payload"]["content"][:300])
    if took_s >= TOOL_TIMEOUT_S:  # it ran out of time: said so
        assert parse["payload"]["is_error"] and "the task's tool time limit" in parse["payload"]["content"]
    return parse


def longest_gap(events: list[dict]) -> float:
    stamps = [_ts(e) for e in events if e["kind"] in ("tool_call", "tool_result")]
    return max(b - a for a, b in itertools.pairwise(stamps))


@pytest.mark.timeout(300)
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_hostile_file_stalls_neither_the_run_nor_the_runner(backend, case, tmp_path):
    skip_unless_available(backend)
    rounds = int((TOOL_TIMEOUT_S + 6) / 0.5)
    result, events, grown_mb = run_with_sleeper(backend, [case], tmp_path, rounds)
    hostile_events, sleeper_events = events[f"hostile-{case.name}"], events["sleeper"]

    parse = check_hostile_call(case, hostile_events)
    gap = longest_gap(sleeper_events)
    assert sum(e["kind"] == "tool_result" for e in sleeper_events) >= rounds and gap < 1.5, \
        f"the sleeper stood still {gap:.2f} s"
    assert grown_mb < 100, f"the runner grew by {grown_mb:.0f} MB"
    for outcome in result.outcomes:
        assert outcome.kind.scored and outcome.reward == 1.0, (outcome.task_id, outcome.kind, outcome.error)
    print(json.dumps({"backend": backend, "case": case.name, "parse_s": parse["duration_ms"] / 1000,
                      "tool_host_start_s": parse["payload"].get("tool_host_start_ms", 0) / 1000,
                      "parse_error": parse["payload"]["is_error"], "sleeper_max_gap_s": round(gap, 3),
                      "runner_grew_mb": round(grown_mb, 1)}))


@pytest.mark.timeout(600)
def test_the_whole_corpus_at_once_under_bwrap(tmp_path):
    """Every hostile case of the corpus (15) in one run beside the sleeper: 15 tool hosts busy at once."""
    skip_unless_available("bwrap")
    corpus = cases()
    rounds = int((TOOL_TIMEOUT_S + 20) / 0.5)
    result, events, grown_mb = run_with_sleeper("bwrap", corpus, tmp_path, rounds)
    for case in corpus:
        check_hostile_call(case, events[f"hostile-{case.name}"])
    gap = longest_gap(events["sleeper"])
    assert gap < 1.5, f"the sleeper stood still {gap:.2f} s"
    assert grown_mb < 100, f"the runner grew by {grown_mb:.0f} MB"
    for outcome in result.outcomes:
        assert outcome.kind.scored and outcome.reward == 1.0, (outcome.task_id, outcome.kind, outcome.error)
