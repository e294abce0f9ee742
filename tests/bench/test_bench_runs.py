"""Benchmarks over real runs: the real runner, local sandboxes, MCP tools, verifiers and a SQLite store."""

from __future__ import annotations

import base64
import json
import math
import re
import shutil
import struct

import anyio
import pytest
from clawsdk_plugins.commands.bench import make_group
from click.testing import CliRunner

from clawsdk.bench.build import BuildOptions, select
from clawsdk.bench.compare import compare_runs
from clawsdk.bench.flaky import flaky_in_runs, reverify_task
from clawsdk.bench.html import page
from clawsdk.bench.report import build_report
from clawsdk.bench.results import load_run
from clawsdk.bench.run import bench_run
from clawsdk.errors import ModelError
from clawsdk.runtime.agent import Agent, AgentContext
from clawsdk.runtime.oracle import OracleAgent
from clawsdk.runtime.runner import run
from clawsdk.store.store import Store
from clawsdk.tasks.native import load_task
from clawsdk.tasks.sources import load_tasks
from tests.conftest import EXAMPLES, make_task

FAST_EXAMPLES = ("eml-contacts", "mailing-list-dedupe", "review-rating-summary", "weekly-meeting-schedule")


class CoinAgent(Agent):
    """Solves a task (with its reference solution) on exactly round(rate * k) of its k samples."""

    name = "coin"

    def __init__(self, rates: dict[str, float], k: int):
        self.rates = rates
        self.k = k
        self.seen: dict[str, int] = {}

    async def run(self, ctx: AgentContext) -> None:
        i = self.seen.get(ctx.task.id, 0)
        self.seen[ctx.task.id] = i + 1
        if i < round(self.rates.get(ctx.task.id, 0.0) * self.k):
            await OracleAgent().run(ctx)


class DownAgent(Agent):
    """Fails with an infrastructure error (the model backend is down) on chosen tasks, until fixed."""

    name = "down"

    def __init__(self, broken: set[str]):
        self.broken = broken

    async def run(self, ctx: AgentContext) -> None:
        if ctx.task.id in self.broken:
            raise ModelError("model server unreachable (test)")
        await OracleAgent().run(ctx)


def _examples(names=FAST_EXAMPLES):
    return [load_task(EXAMPLES / n) for n in names]


def test_unscored_infrastructure_failures_are_excluded_and_the_run_stays_partial_until_resumed(db):
    tasks = _examples()
    agent = DownAgent({tasks[0].id})
    first = anyio.run(lambda: bench_run(_manifest(tasks, db), agent=agent, samples=2, db=db, run_id="b1", retries=1))
    assert first.status == "partial"
    r = build_report(first.data)
    # the broken task has no scored sample: excluded, not a zero
    assert r["overall"]["pass@1"]["value"] == 1.0 and r["overall"]["tasks_scored"] == 3
    assert r["unscored"] == 2 and r["unscored_kinds"] == {"model_error": 2} and r["missing_samples"] == 2
    with Store(db) as store:
        assert store.query("SELECT status FROM bench_runs WHERE run_id = 'b1'")[0]["status"] == "partial"
        attempts = store.query("SELECT attempt FROM rollouts WHERE run_id = 'b1' AND task_id = ?", [tasks[0].id])
        assert [a["attempt"] for a in attempts] == [1, 1]  # retried once by the runner
    agent.broken.clear()  # the backend is back: resuming retries the unscored samples only
    second = anyio.run(lambda: bench_run(_manifest(tasks, db), agent=agent, samples=2, db=db, run_id="b1"))
    assert second.result.retried == 2 and second.result.skipped == 6
    assert second.status == "complete"
    r = build_report(second.data)
    assert r["status"] == "complete" and r["unscored"] == 0 and r["overall"]["tasks_scored"] == 4
    with Store(db) as store:
        assert store.query("SELECT status FROM bench_runs WHERE run_id = 'b1'")[0]["status"] == "complete"


def test_a_plain_run_resumed_with_more_samples_is_reported_with_them(db):
    tasks = _examples(FAST_EXAMPLES[:2])
    anyio.run(lambda: run(tasks, agent="oracle", samples=1, db=db, run_id="grow"))
    anyio.run(lambda: run(tasks, agent="oracle", samples=3, db=db, run_id="grow"))
    with Store(db) as store:
        r = build_report(load_run(store, "grow"), n_boot=50)
    assert r["k"] == 3 and r["ks"] == [1, 2, 3] and r["status"] == "complete"
    assert r["overall"]["samples_scored"] == 6 and r["overall"]["pass@k"]["3"]["n"] == 2


def _manifest(tasks, db):
    from clawsdk.bench.manifest import BenchTask, Manifest

    with Store(db) as store, store.transaction():
        for t in tasks:
            store.upsert_task(t)
    return Manifest(name="ex", version="1", tasks=[BenchTask(hash=t.hash, id=t.id, category=t.category) for t in tasks])


def test_flaky_verifier_found_by_reverification_and_by_repeated_oracle_runs(tmp_path, db):
    counter = tmp_path / "counter"
    # passes every other time it runs, whatever the workspace holds
    alternating = (f'n=$(cat {counter} 2>/dev/null || echo 0); echo $((n+1)) > {counter}; '
                   f'test $((n % 2)) -eq 0')
    flaky = load_task(make_task(tmp_path / "pool", "flaky", checks=[
        {"type": "text_contains", "path": "done.txt", "text": "done"},
        {"type": "command", "run": alternating}]))
    steady = load_task(make_task(tmp_path / "pool", "steady"))
    # the local sandbox, so the verifier's counter outside the workspace is shared by every pass
    rv = anyio.run(lambda: reverify_task(flaky, 3, "local"))
    assert rv.flaky and not rv.broken and rv.scores == [1.0, 0.5, 1.0]
    rv = anyio.run(lambda: reverify_task(steady, 3))  # the default sandbox
    assert not rv.flaky and rv.scores == [1.0, 1.0, 1.0]
    anyio.run(lambda: run([flaky, steady], agent="oracle", samples=2, db=db, run_id="ref", concurrency=1,
                          sandbox="local"))
    with Store(db) as store:
        found = flaky_in_runs(store, ["ref"])
    assert list(found) == [flaky.hash] and "scored" in found[flaky.hash]


def test_build_drops_a_task_whose_verifier_fails_validation(tmp_path):
    from clawsdk.bench.build import runtime_checks

    ok = load_task(make_task(tmp_path, "ok"))
    # passes untouched; its own reference solution (the same one as ok's would make it ok's near-duplicate)
    trivial = load_task(make_task(tmp_path, "trivial", instruction="Make sure the status file says done.",
                                  workspace={"done.txt": "done\n"},
                                  steps=[{"tool": "write", "args": {"path": "done.txt", "content": "done, as before\n"}}]))
    r = select([ok, trivial], BuildOptions(name="v", version="1", band=None),
               checks=runtime_checks(validate=True, reverify=2))
    assert [t.id for t in r.manifest.tasks] == ["ok"]
    assert [(d.id, d.reason) for d in r.dropped] == [("trivial", "validation_failed")]
    assert "already passes" in r.dropped[0].detail


def _png_size(b64: str) -> tuple[int, int]:
    data = base64.b64decode(b64)
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_report_of_a_real_run_in_markdown_json_and_html_with_plots(db, tmp_path):
    pytest.importorskip("matplotlib", reason="the HTML plots need matplotlib (pip install matplotlib)")
    tasks = _examples()
    rates = {tasks[0].id: 1.0, tasks[1].id: 0.5, tasks[2].id: 0.25, tasks[3].id: 0.0}
    anyio.run(lambda: run(tasks, agent=CoinAgent(rates, 4), samples=4, db=db, run_id="coin", concurrency=4))
    with Store(db) as store:
        data = load_run(store, "coin")
    assert [t.n for t in data.tasks] == [4, 4, 4, 4]
    r = build_report(data)
    assert r["ks"] == [1, 2, 4] and r["status"] == "complete"
    per_task = {t["id"]: t for t in r["tasks"]}
    assert per_task[tasks[0].id]["pass_rate"] == 1.0 and per_task[tasks[3].id]["passed"] == 0
    # pass@4 of a task counts if any of its 4 samples passed; pass^4 only if all did
    assert [t.c for t in data.tasks] == [{tasks[i].id: c for i, c in enumerate([4, 2, 1, 0])}[t.id] for t in data.tasks]
    assert r["overall"]["pass@k"]["4"]["value"] == pytest.approx(3 / 4)  # any of 4 passed: 3 tasks
    assert r["overall"]["pass^k"]["4"]["value"] == pytest.approx(1 / 4)  # all 4 passed: 1 task
    # pass@2 per task: 1, 1 - C(2,2)/C(4,2) = 5/6, 1 - C(3,2)/C(4,2) = 1/2, 0
    assert r["overall"]["pass@k"]["2"]["value"] == pytest.approx((1 + 5 / 6 + 1 / 2 + 0) / 4)
    assert r["overall"]["pass@1"]["value"] == pytest.approx((1 + 0.5 + 0.25 + 0) / 4)
    assert r["subscores"] and r["cost"]["tool_calls"]["total"] > 0 and r["cost"]["duration_s"]["mean"] > 0

    html = page(r)
    imgs = re.findall(r'<img data-plot="(\w+)" alt="[^"]*" src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)
    assert {name for name, _ in imgs} >= {"pass_at_k", "categories", "tasks", "endings", "subscores"}
    for _, b64 in imgs:
        w, h = _png_size(b64)
        assert w > 200 and h > 100
    assert "coin" in html and r["pins"]["config_hash"][:16] in html
    (tmp_path / "report.html").write_text(html)


class HalfDownAgent(Agent):
    """The model backend is down for every sample of `dead` and for the first sample of `once`."""

    name = "half-down"

    def __init__(self, dead: str, once: str):
        self.dead, self.once, self.seen = dead, once, set()

    async def run(self, ctx: AgentContext) -> None:
        if ctx.task.id == self.dead or (ctx.task.id == self.once and self.once not in self.seen):
            self.seen.add(ctx.task.id)
            raise ModelError("model server unreachable (test)")
        await OracleAgent().run(ctx)


def test_a_figure_over_fewer_tasks_says_so_and_a_missing_one_is_not_drawn_as_zero(db):
    pytest.importorskip("matplotlib", reason="the HTML plots need matplotlib (pip install matplotlib)")
    from clawsdk.bench.html import _err
    from clawsdk.bench.render import markdown

    # review-rating-summary is alone in its category: with nothing scored, that category has no value
    dead, once, fine = _examples(("review-rating-summary", "eml-contacts", "mailing-list-dedupe"))
    agent = HalfDownAgent(dead.id, once.id)
    anyio.run(lambda: run([dead, once, fine], agent=agent, samples=2, db=db, run_id="half", concurrency=1,
                          retries=0))
    with Store(db) as store:
        r = build_report(load_run(store, "half"))
    assert r["overall"]["tasks_scored"] == 2 and r["overall"]["pass@k"]["2"]["n"] == 1
    overall = next(line for line in markdown(r).splitlines() if line.startswith("| **all**"))
    assert "(1 of 2 tasks)" in overall  # pass@2 covers the one task with 2 scored samples
    empty = r["categories"][dead.category]["pass@1"]
    assert empty["value"] is None and all(math.isnan(x) for x in _err(empty))
    assert "(1 of" not in next(line for line in markdown(r).splitlines() if line.startswith(f"| {dead.category}"))
    page(r)  # the plots leave the missing figure out, and still render


def test_compare_pairs_tasks_and_finds_the_flips(db):
    tasks = _examples()
    weak = {tasks[0].id: 1.0, tasks[1].id: 0.0, tasks[2].id: 0.0, tasks[3].id: 1.0}
    anyio.run(lambda: run(tasks, agent=CoinAgent(weak, 2), samples=2, db=db, run_id="A", concurrency=4))
    anyio.run(lambda: run(tasks, agent="oracle", samples=2, db=db, run_id="B", concurrency=4))
    with Store(db) as store:
        c = compare_runs(load_run(store, "A"), load_run(store, "B"))
    assert c["paired_tasks"] == 4
    o = c["overall"]["pass@1"]
    assert o["mean_a"] == 0.5 and o["mean_b"] == 1.0 and o["diff"] == 0.5
    assert (o["wins"], o["losses"], o["ties"]) == (2, 0, 2)
    # exact: the two +1 differences keep their sign together in half of the 16 sign patterns
    assert o["p_permutation"] == pytest.approx(0.5) and o["p_sign"] == pytest.approx(0.5)
    # 0/2 -> 2/2 crossed 1/2, but at 2 samples a side no per-task test can call it (Fisher's least p is 1/3)
    assert sorted(f["id"] for f in c["flipped"]["changed"]) == sorted([tasks[1].id, tasks[2].id])
    assert c["flipped"]["improved"] == c["flipped"]["regressed"] == []


def test_cli_build_run_report_compare_end_to_end(tmp_path, db):
    """What a user types: measure, build, run the benchmark twice, report, compare."""
    pool = tmp_path / "pool"
    for n in FAST_EXAMPLES:
        shutil.copytree(EXAMPLES / n, pool / n)
    cli = make_group()
    runner = CliRunner()

    def ok(*args):
        res = runner.invoke(cli, [*args, "--db", str(db)], catch_exceptions=False)
        assert res.exit_code == 0, res.output
        return res.output

    tasks = load_tasks(str(pool)).tasks
    rates = {tasks[0].id: 1.0, tasks[1].id: 0.5, tasks[2].id: 0.5, tasks[3].id: 0.0}
    anyio.run(lambda: run(tasks, agent=CoinAgent(rates, 4), samples=4, db=db, run_id="measure", concurrency=4))
    training = tmp_path / "train.jsonl"
    training.write_text(json.dumps({"messages": [{"role": "user", "content": tasks[2].instruction}]}) + "\n")
    out = ok("build", str(pool), "--runs", "measure", "--band", "0.1:0.9", "--exclude-training", str(training),
             "--name", "mini", "--version", "0.1", "--samples", "2", "--out", str(tmp_path / "mini.json"))
    assert "mini@0.1" in out and "training_near_duplicate" in out
    manifest = json.loads((tmp_path / "mini.json").read_text())
    kept = [t["id"] for t in manifest["tasks"]]
    measured = {t.id: t for t in load_run(Store(db), "measure").tasks}
    assert sorted(kept) == [tasks[1].id]  # 1.0 too easy, 0.0 too hard, tasks[2] seen in training
    assert measured[tasks[1].id].pass_rate == 0.5
    assert manifest["build"]["dropped_counts"]["training_near_duplicate"] == 1

    out = ok("run", str(tmp_path / "mini.json"), "--agent", "oracle", "--run-id", "good")
    assert "complete" in out
    ok("run", str(tmp_path / "mini.json"), "--agent", "scripted", "--run-id", "idle")
    ok("report", "good", "--md", str(tmp_path / "good.md"), "--json", str(tmp_path / "good.json"))
    md = (tmp_path / "good.md").read_text()
    assert "| **all** |" in md and "mini@0.1" in md and "pass^2" in md
    rep = json.loads((tmp_path / "good.json").read_text())
    assert rep["overall"]["pass@1"]["value"] == 1.0 and rep["pins"]["benchmark"] == "mini@0.1"
    out = ok("compare", "idle", "good", "--md", str(tmp_path / "cmp.md"))
    assert "changed (1)" in out and "untested at k=2" in out  # one sample pair of 2 cannot show a flip
    assert "## Changed (1): untested at k=2" in (tmp_path / "cmp.md").read_text()
    out = ok("list")
    assert "good" in out and "mini" in out
    res = runner.invoke(cli, ["report", "nope", "--db", str(db)])
    assert res.exit_code == 2 and "no run 'nope'" in res.output


def test_a_task_changed_since_the_benchmark_was_frozen_is_refused(tmp_path):
    from clawsdk.bench.manifest import ManifestError

    pool = tmp_path / "pool"
    make_task(pool, "a")
    make_task(pool, "b", instruction="Write finished.txt containing done.")
    loaded = load_tasks(str(pool))
    r = select(loaded.tasks, BuildOptions(name="frozen", version="1", band=None), sources=[str(pool)])
    path = r.manifest.save(tmp_path / "frozen.json")
    spec = (pool / "b" / "task.yaml").read_text().replace("finished.txt", "complete.txt")
    (pool / "b" / "task.yaml").write_text(spec)
    with pytest.raises(ManifestError, match=r"not found by hash: b .*task 'b' in .* has hash \w+, the benchmark froze"):
        anyio.run(lambda: bench_run(str(path), agent="oracle", db=tmp_path / "fresh.db"))


@pytest.mark.slow
def test_html_report_renders_in_a_headless_browser(db, tmp_path):
    """The page opens in Chromium and shows its plots (a screenshot, checked for drawn content)."""
    import subprocess

    pytest.importorskip("matplotlib", reason="the HTML plots need matplotlib")
    image = pytest.importorskip("PIL.Image")
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        pytest.skip("no chromium here (apt-get install chromium)")
    tasks = _examples(FAST_EXAMPLES[:2])
    anyio.run(lambda: run(tasks, agent=CoinAgent({tasks[0].id: 1.0, tasks[1].id: 0.5}, 2), samples=2, db=db,
                          run_id="shot"))
    with Store(db) as store:
        report = build_report(load_run(store, "shot"))
    page_path = tmp_path / "report.html"
    page_path.write_text(page(report))
    shot = tmp_path / "shot.png"
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--screenshot={shot}", "--window-size=1200,1800", page_path.as_uri()],
                   check=True, timeout=120, capture_output=True)
    img = image.open(shot).convert("RGB")
    assert img.size == (1200, 1800)
    # the plots' coloured bars are on screen: count pixels of the bar colours the page draws
    raw = img.resize((300, 450)).tobytes()
    pixels = [tuple(raw[i:i + 3]) for i in range(0, len(raw), 3)]
    colours = set(pixels)
    assert len(colours) > 50  # not a blank or text-only page
    blue = sum(1 for r, g, b in pixels if b > 150 and r < 90 and 90 < g < 150)  # "#2a7ab0"
    assert blue > 30
