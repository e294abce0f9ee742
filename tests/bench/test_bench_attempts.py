"""What a report must not hide about how its samples were obtained: attempts thrown away by retries (and
their cost), a verifier that only scored on a retry, a run that chose the tasks it is scored on; and the
CLI summaries give the same per-task figure as the report. Real runs into real stores, through the public API."""

from __future__ import annotations

import io
import itertools
import json
import time

import anyio
import pytest
from clawsdk_plugins.commands.bench import make_group
from click.testing import CliRunner
from rich.console import Console

from clawsdk.bench import html as bench_html
from clawsdk.bench import render
from clawsdk.bench.build import BuildOptions, measure, register_manifest, select
from clawsdk.bench.flaky import flaky_in_runs
from clawsdk.bench.report import build_report
from clawsdk.bench.results import load_run
from clawsdk.bench.run import bench_run
from clawsdk.errors import ModelError
from clawsdk.runtime.agent import Agent, AgentContext
from clawsdk.runtime.oracle import OracleAgent
from clawsdk.runtime.runner import run_sync
from clawsdk.store.store import Store
from clawsdk.tasks.sources import load_tasks
from tests.conftest import make_task


class PlanAgent(Agent):
    """plan[task id]: what each call does, in order ('pass', 'fail', or 'infra': the model backend fails);
    the last entry repeats."""

    name = "plan"

    def __init__(self, plan: dict[str, list[str]]):
        self.plan = plan
        self.calls: dict[str, int] = {}

    async def run(self, ctx: AgentContext) -> None:
        i = self.calls.get(ctx.task.id, 0)
        self.calls[ctx.task.id] = i + 1
        seq = self.plan.get(ctx.task.id, ["fail"])
        what = seq[min(i, len(seq) - 1)]
        if what == "infra":
            raise ModelError("model backend down (test)")
        if what == "pass":
            await OracleAgent().run(ctx)


def _tasks(root, ids):
    for tid in ids:
        make_task(root, tid, instruction=f"Write done.txt containing done. (task {tid})")
    return load_tasks(str(root)).tasks


# ---- 1. attempts that were retried are counted, with a worst case beside pass@1 -----------------------------

def test_retried_attempts_are_counted_and_bound_pass_at_1_from_below(tmp_path, db):
    # 'lucky' fails twice on a backend error before it passes: retrying kept only its pass
    tasks = _tasks(tmp_path / "tasks", ["lucky", "steady"])
    agent = PlanAgent({"lucky": ["infra", "infra", "pass"], "steady": ["pass"]})
    res = run_sync(tasks, agent=agent, samples=1, db=db, sandbox="local", run_id="r", retries=2, backoff_s=0,
                   concurrency=1)
    assert [o.attempts for o in sorted(res.outcomes, key=lambda o: o.task_id)] == [3, 1]
    with Store(db) as store:
        r = build_report(load_run(store, "r"), n_boot=200)
    assert r["status"] == "complete" and r["overall"]["pass@1"]["value"] == 1.0
    line = render.status_line(r)  # the old line: "complete: every task has its 1 scored sample(s)", no more
    assert "2 earlier attempts were retried: model_error 2" in line and "pass@1 would be 66.7" in line
    assert r["attempts"] == 4 and r["discarded_attempts"] == {"model_error": 2}
    per_task = {t["id"]: t for t in r["tasks"]}
    assert per_task["lucky"]["attempts"] == 3 and per_task["lucky"]["discarded_attempts"] == {"model_error": 2}
    assert per_task["steady"]["discarded_attempts"] == {}
    # each discarded attempt a failed sample: lucky 1/3, steady 1/1
    assert r["pass@1_worst_case"]["value"] == pytest.approx((1 / 3 + 1) / 2)
    assert line.startswith("complete:")
    md = render.markdown(r)
    assert "2 earlier attempts were retried: model_error 2" in md
    assert "| lucky | systems & automation | 1 | 1 | 1 | 100.0 | - | model_error 2 |" in md
    page = bench_html.page(r)
    assert "2 earlier attempts were retried: model_error 2" in page
    assert "<title>Benchmark report: r</title>" in page and "every attempt included" in page
    buf = io.StringIO()
    render.terminal(r, Console(file=buf, width=250))
    assert "2 earlier attempts were retried" in buf.getvalue()


def test_a_report_with_no_retry_says_nothing_of_retries(tmp_path, db):
    tasks = _tasks(tmp_path / "tasks", ["a"])
    run_sync(tasks, agent="oracle", samples=2, db=db, sandbox="local", run_id="r")
    with Store(db) as store:
        r = build_report(load_run(store, "r"), n_boot=200)
    assert r["attempts"] == 2 and r["discarded_attempts"] == {}
    assert r["pass@1_worst_case"] == r["overall"]["pass@1"]
    assert "retried" not in render.status_line(r) and r["selection_biased"] is False


def test_an_attempt_cut_off_in_flight_and_resumed_is_counted_as_cancelled(tmp_path, db):
    """The first attempt recorded events and no ending (a killed runner); the resume's attempt is kept."""
    tasks = _tasks(tmp_path / "tasks", ["a"])
    run_sync(tasks, agent="oracle", samples=1, db=db, sandbox="local", run_id="r")
    with Store(db) as store, store.transaction():  # as a SIGKILLed runner leaves it: running, attempt 0
        store.db.execute("UPDATE rollouts SET status = 'running', failure_kind = NULL, scored = NULL, "
                         "reward = NULL, passed = NULL WHERE run_id = 'r'")
    run_sync(tasks, agent="oracle", samples=1, db=db, sandbox="local", run_id="r")
    with Store(db) as store:
        r = build_report(load_run(store, "r"), n_boot=200)
    assert r["attempts"] == 2 and r["discarded_attempts"] == {"cancelled": 1}


def test_bench_run_and_clawsdk_run_say_the_retries_on_stdout(tmp_path, db, monkeypatch):
    from clawsdk.cli import cli
    from clawsdk.verify import checks as C

    calls = itertools.count()
    verify = C.ChecksVerifier.verify

    async def crashes_every_other_call(self, ctx):  # a verifier that crashes 1 time in 2
        if next(calls) % 2 == 0:
            raise RuntimeError("verifier crashed (test)")
        return await verify(self, ctx)

    monkeypatch.setattr(C.ChecksVerifier, "verify", crashes_every_other_call)
    folder = tmp_path / "tasks"
    _tasks(folder, ["a"])
    res = CliRunner().invoke(make_group(), ["run", str(folder), "--agent", "oracle", "--sandbox", "local",
                                            "-k", "1", "--run-id", "b", "--db", str(db)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "retried 1 attempt(s) that ended unscored in this invocation" in res.stdout
    assert "1 earlier attempt was retried: verifier_error 1" in res.stdout
    res = CliRunner().invoke(cli, ["run", str(folder), "--agent", "oracle", "--sandbox", "local", "-k", "2",
                                   "--concurrency", "1", "--run-id", "p", "--db", str(db)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "2 earlier attempts were retried: verifier_error 2 (2 in this invocation)" in res.stdout
    summary = json.loads(CliRunner().invoke(cli, ["run", str(folder), "--agent", "oracle", "--sandbox", "local",
                                                  "-k", "2", "--run-id", "p", "--db", str(db), "--json"]).stdout)
    assert summary["attempts"] == 4 and summary["discarded_attempts"] == {"verifier_error": 2}


# ---- 2. a run that chose the benchmark's tasks -------------------------------------------------------------

def test_a_run_that_chose_the_benchmarks_tasks_is_marked_biased_and_a_fresh_one_is_not(tmp_path, db):
    tasks = _tasks(tmp_path / "tasks", ["t1", "t2", "t3"])
    plan = {"t1": ["pass", "fail"], "t2": ["fail", "pass"], "t3": ["pass"]}
    run_sync(tasks, agent=PlanAgent(plan), samples=2, db=db, sandbox="local", run_id="pool", concurrency=1)
    run_sync(tasks, agent="oracle", samples=2, db=db, sandbox="local", run_id="ref")
    with Store(db) as store:
        built = select(tasks, BuildOptions(name="mid", version="1", band=(0.1, 0.9), dedup_pool=False),
                       measurements=measure(store, ["pool"]), runs=["pool"], reference_runs=["ref"])
        manifest = built.manifest
        register_manifest(store, manifest)
        assert sorted(t.id for t in manifest.tasks) == ["t1", "t2"]  # t3 always passed: too easy
        biased = build_report(load_run(store, "pool", manifest), n_boot=200)
        ref = build_report(load_run(store, "ref", manifest), n_boot=200)
    fresh = anyio.run(lambda: bench_run(manifest, agent="oracle", samples=2, db=db, sandbox="local",
                                        run_id="fresh"))
    assert biased["selection_biased"] is True and biased["selection_biased_by"] == ["runs"]
    assert ref["selection_biased"] is True and ref["selection_biased_by"] == ["reference_runs"]
    assert build_report(fresh.data, n_boot=200)["selection_biased"] is False
    warning = "this run chose the tasks it is scored on: its figure is biased upward; score a fresh run"
    assert warning in render.status_line(biased) and "`bench build --runs`" in render.status_line(biased)
    assert warning in render.markdown(biased) and warning in bench_html.page(biased)
    assert "--reference-run" in render.status_line(ref)
    assert warning not in render.status_line(build_report(fresh.data, n_boot=200))
    # the same run reported with no manifest is its own task set: nothing was chosen on it
    with Store(db) as store:
        assert build_report(load_run(store, "pool"), n_boot=200)["selection_biased"] is False
    res = CliRunner().invoke(make_group(), ["report", "pool", "--db", str(db), "--manifest",
                                            str(manifest.save(tmp_path / "mid.json")), "--json", "-"])
    assert json.loads(res.output)["selection_biased"] is True


# ---- 3. the CLI summaries are per task, as the report -----------------------------------------------------

def test_run_summary_and_runs_give_the_reports_per_task_pass_at_1(tmp_path, db):
    """'hard' ends unscored on 3 of its 4 samples: per scored rollout the run read 4/5 = 0.80, while each task
    counts once in the report: (1 + 0) / 2 = 0.50."""
    from clawsdk.cli import cli
    from clawsdk.cli.run_cmd import summarize

    tasks = _tasks(tmp_path / "tasks", ["easy", "hard"])
    agent = PlanAgent({"easy": ["pass"], "hard": ["infra", "infra", "infra", "fail"]})
    result = run_sync(tasks, agent=agent, samples=4, db=db, sandbox="local", run_id="x", retries=0, concurrency=1)
    s = summarize(result)
    assert s["total"]["pass_rate"] == 0.5 and s["total"]["mean_reward"] == 0.5
    assert (s["total"]["passed"], s["total"]["scored"], s["total"]["tasks"], s["total"]["tasks_scored"]) == (4, 5, 2, 2)
    with Store(db) as store:
        r = build_report(load_run(store, "x"), n_boot=200)
    assert r["overall"]["pass@1"]["value"] == s["total"]["pass_rate"]
    assert r["overall"]["mean_score"]["value"] == s["total"]["mean_reward"]
    rows = json.loads(CliRunner().invoke(cli, ["runs", "--db", str(db), "--json"]).stdout)
    (row,) = rows
    assert (row["pass_rate"], row["mean_reward"], row["passed"], row["scored"]) == (0.5, 0.5, 4, 5)
    assert (row["tasks"], row["tasks_scored"], row["rollouts"]) == (2, 2, 8)
    out = CliRunner().invoke(cli, ["runs", "--db", str(db)], terminal_width=250).stdout
    assert "pass@1" in out and "0.50" in out and "0.80" not in out and "4/5" in out
    assert "mean over tasks" in out


def test_runs_lists_a_run_with_no_rollout(tmp_path, db):
    with Store(db) as store, store.transaction():
        store.upsert_run("empty", status="running", agent="oracle", sandbox="local", samples=1)
    with Store(db) as store:
        (row,) = store.runs()
    assert (row["rollouts"], row["tasks"], row["pass_rate"], row["mean_reward"]) == (0, 0, None, None)


# ---- 4. the cost table over every attempt ------------------------------------------------------------------

class Costly(Agent):
    """Five model calls of 1,000 prompt tokens and a tool call each attempt; the backend drops the first."""

    name = "costly"

    def __init__(self):
        self.calls = 0

    async def run(self, ctx: AgentContext) -> None:
        self.calls += 1
        for _ in range(5):
            await ctx.recorder.record("model_request", {"messages": [{"role": "user", "content": "x"}]})
            await ctx.recorder.record("model_response", {"message": {"role": "assistant", "content": "y"},
                                                         "usage": {"prompt_tokens": 1000, "completion_tokens": 100}})
        await ctx.tools.call("read", {"path": "notes.md"})
        time.sleep(0.3)
        if self.calls == 1:
            raise ModelError("backend dropped the connection (test)")
        await OracleAgent().run(ctx)


def test_every_cost_column_sums_every_attempt(tmp_path, db):
    tasks = _tasks(tmp_path / "tasks", ["t"])
    run_sync(tasks, agent=Costly(), samples=1, db=db, sandbox="local", run_id="x", retries=1, backoff_s=0)
    with Store(db) as store:
        r = build_report(load_run(store, "x"), n_boot=200)
    c = r["cost"]
    # the old table: 10,000 prompt tokens (every attempt) beside 5 turns and 0.3 s (the last attempt only)
    assert c["model_calls"]["total"] == 10 and c["prompt_tokens"]["total"] == 10_000
    assert c["completion_tokens"]["total"] == 1_000
    assert c["tool_calls"]["total"] == 3  # a read in each attempt, and the oracle's write in the last
    assert c["duration_s"]["total"] >= 0.6  # 0.3 s slept in each attempt
    assert (c["rollouts"], c["attempts"]) == (1, 2)
    md = render.markdown(r)
    assert "Cost per rollout, every attempt included (2 attempts for 1 rollouts)" in md
    assert "| turns (model calls) | 10.0 |" in md


# ---- 5. a verifier that failed on an attempt the runner retried is flaky -----------------------------------

def test_a_verifier_that_crashes_on_some_attempts_is_flaky_though_every_retry_scored(tmp_path, db, monkeypatch):
    from clawsdk.verify import checks as C

    calls = itertools.count()
    verify = C.ChecksVerifier.verify

    async def sometimes_crashes(self, ctx):
        if ctx.task.id == "flaky" and next(calls) % 2 == 0:
            raise RuntimeError("verifier crashed (test)")
        return await verify(self, ctx)

    monkeypatch.setattr(C.ChecksVerifier, "verify", sometimes_crashes)
    tasks = _tasks(tmp_path / "tasks", ["flaky", "steady"])
    run_sync(tasks, agent="oracle", samples=3, db=db, sandbox="local", run_id="ref", concurrency=1, backoff_s=0)
    with Store(db) as store:
        assert {r["failure_kind"] for r in store.rollouts("ref")} == {"ok"}  # every sample scored in the end
        flagged = flaky_in_runs(store, ["ref"])
    by_id = {t.hash: t.id for t in tasks}
    assert [by_id[h] for h in flagged] == ["flaky"]
    assert "verifier_error" in next(iter(flagged.values()))


# ---- 6. the compact terminal table never rounds to 100 or 0 -------------------------------------------------

def test_the_terminal_table_never_shows_100_for_a_rate_that_is_not():
    est = {"value": 1999 / 2000, "low": 0.9972, "high": 0.99991, "n": 2000}
    assert render.short(est) == ">99.9 [99.7, >99.9]"
    assert render.short({"value": 1 / 20000, "low": 0.00009, "high": 0.0028, "n": 20000}) == "<0.1 [<0.1-0.3]"
    assert render.short({"value": 0.5, "low": 0.4, "high": 0.6, "n": 10}) == "50.0 [40-60]"
    assert render.short({"value": 1.0, "low": 0.9, "high": 1.0, "n": 10}) == "100.0 [90-100]"


# ---- 7. one task has no interval, in every output -----------------------------------------------------------

def test_a_one_task_category_has_no_interval_in_the_json_or_the_plot(tmp_path, db):
    make_task(tmp_path / "tasks", "solo", instruction="Write done.txt containing done. (solo)",
              extra={"category": "solo-cat"})
    _tasks(tmp_path / "tasks", ["x", "y"])
    tasks = load_tasks(str(tmp_path / "tasks")).tasks
    run_sync(tasks, agent=PlanAgent({"solo": ["pass"], "x": ["fail"], "y": ["pass"]}), samples=1, db=db,
             sandbox="local", run_id="r")
    with Store(db) as store:
        r = build_report(load_run(store, "r"), n_boot=200)
    solo = r["categories"]["solo-cat"]["pass@1"]
    assert (solo["value"], solo["low"], solo["high"], solo["n"]) == (1.0, None, None, 1)
    assert r["categories"]["solo-cat"]["mean_score"]["low"] is None
    assert bench_html._err(solo) == (100.0, 0.0, 0.0)
    assert "| solo-cat | 1/1 | 100.0 | 100.0 |" in render.markdown(r)
    big = r["categories"]["systems & automation"]["pass@1"]
    assert big["n"] == 2 and big["low"] is not None  # two tasks keep theirs
