"""The judge cache keys answers by the judge's server and sampling options, and re-verification asks afresh.

Keyed by the model name and prompt only, a rerun against another judge server (CLAWSDK_JUDGE_OPTIONS
pointing elsewhere) got the first server's scores without asking it, and `bench build --reverify N`
re-checked a rubric task N times from the cache, so a flaky judge never showed.
"""

from __future__ import annotations

import json

import anyio
import pytest
from clawsdk_plugins.agents.builtin import ScriptedAgent

from clawsdk import Store, run_sync
from clawsdk.tasks.model import Task
from tests.formats.formats_helpers import JudgeServer

RULES = [{"name": "report", "file_path": "out/report.md", "scores": {"0": "missing", "1": "complete"}}]
PASS = json.dumps({"scores": {"report": {"score": 1, "reason": "there"}}})
FAIL = json.dumps({"scores": {"report": {"score": 0, "reason": "not there"}}})


@pytest.fixture(autouse=True)
def _openai_backend():
    from clawsdk.plugins import get_registry

    if "openai" not in get_registry().names("models"):
        pytest.skip("no openai model backend")


def _task(tid: str, text: str, **verifier) -> tuple[Task, ScriptedAgent]:
    task = Task.model_validate({
        "id": tid, "instruction": "Write out/report.md.",
        "verifier": {"type": "rubric", "rules": RULES, "judge": "openai:judge", **verifier},
        "solution": [{"tool": "write", "args": {"path": "out/report.md", "content": text}}]})
    return task, ScriptedAgent([{"tool": "write", "args": {"path": "out/report.md", "content": text}}])


def _options(monkeypatch, **options) -> None:
    monkeypatch.setenv("CLAWSDK_JUDGE_OPTIONS", json.dumps({"backoff_s": 0.01, **options}))


def test_another_judge_server_is_asked_not_answered_from_the_first_ones_cache(db, monkeypatch):
    task, agent = _task("t-cache-server", "Report CacheKey-1\n")
    with JudgeServer([PASS]) as yes, JudgeServer([FAIL]) as no:
        _options(monkeypatch, base_url=yes.url)
        assert run_sync([task], agent=agent, db=db, run_id="a", retries=0).outcomes[0].reward == 1.0
        _options(monkeypatch, base_url=no.url)
        assert run_sync([task], agent=agent, db=db, run_id="b", retries=0).outcomes[0].reward == 0.0
        assert len(no.requests) == 1
        # the same server with other credentials is the same judge: its answer is reused
        _options(monkeypatch, base_url=yes.url.replace("http://", "http://user:secret@"), api_key="k2")
        assert run_sync([task], agent=agent, db=db, run_id="c", retries=0).outcomes[0].reward == 1.0
        assert len(yes.requests) == 1
    with Store(db) as store:
        keys = [r["model"] for r in store.query("SELECT model FROM judge_cache")]
    assert len(keys) == 2 and not any("secret" in k or "k2" in k for k in keys), keys


def test_other_sampling_options_are_another_judge(db, monkeypatch):
    task, agent = _task("t-cache-sampling", "Report CacheKey-2\n")
    with JudgeServer([PASS, FAIL]) as server:
        _options(monkeypatch, base_url=server.url)
        assert run_sync([task], agent=agent, db=db, run_id="a", retries=0).outcomes[0].reward == 1.0
        _options(monkeypatch, base_url=server.url, extra_body={"temperature": 1.0, "seed": 7})
        assert run_sync([task], agent=agent, db=db, run_id="b", retries=0).outcomes[0].reward == 0.0
        _options(monkeypatch, base_url=server.url, timeout_s=99, retries=1)  # transport only: the same judge
        assert run_sync([task], agent=agent, db=db, run_id="c", retries=0).outcomes[0].reward == 1.0
    assert len(server.requests) == 2


def test_reverification_asks_the_judge_every_pass_and_catches_a_flaky_one(monkeypatch):
    from clawsdk.bench.flaky import reverify_task

    task, _ = _task("t-cache-reverify", "Report CacheKey-3\n")
    with JudgeServer([PASS, FAIL]) as server:  # pass once, then fail
        _options(monkeypatch, base_url=server.url)
        result = anyio.run(reverify_task, task, 3, "local")
    assert result.setup_error is None, result.setup_error
    assert result.scores == [1.0, 0.0, 0.0] and result.flaky
    assert len(server.requests) == 3
