import json

from click.testing import CliRunner

from clawsdk.cli import cli
from tests.conftest import make_task


def invoke(*args):
    result = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    return result


def test_run_then_show_the_trajectory(tmp_path, db):
    make_task(tmp_path / "tasks", "alpha", steps=[
        {"tool": "exec", "args": {"command": "echo working"}},
        {"tool": "write", "args": {"path": "done.txt", "content": "done"}},
    ])
    r = invoke("run", tmp_path / "tasks", "--samples", 2, "--db", db, "--run-id", "cli", "--json")
    assert r.exit_code == 0, r.output
    summary = json.loads(r.output)
    assert summary["total"] == {"rollouts": 2, "scored": 2, "passed": 2, "tasks": 1, "tasks_scored": 1,
                                "pass_rate": 1.0, "mean_reward": 1.0}
    rid = summary["rollouts"][0]["id"]
    shown = invoke("show", rid[:8], "--db", db)
    assert shown.exit_code == 0
    out = shown.output
    assert "→ exec" in out and "working" in out and "→ write" in out and "verdict (checks): score 1.00" in out
    assert out.index("→ exec") < out.index("→ write") < out.index("verdict")
    as_json = json.loads(invoke("show", rid, "--db", db, "--json").output)
    assert [e["kind"] for e in as_json["events"]][:4] == ["tool_call", "tool_result", "tool_call", "tool_result"]
    runs = invoke("runs", "--db", db)
    assert "cli" in runs.output and "2/2" in runs.output


def test_human_summary_names_the_store(tmp_path, db):
    make_task(tmp_path / "tasks", "beta")
    r = invoke("run", tmp_path / "tasks", "--db", db)
    assert r.exit_code == 0
    assert "all" in r.output and "1.00" in r.output and str(db) in r.output and "clawsdk show r" in r.output


def test_malformed_task_is_one_clear_line_and_the_rest_runs(tmp_path, db):
    make_task(tmp_path / "tasks", "good")
    bad = make_task(tmp_path / "tasks", "bad", checks=[{"type": "regex", "path": "x"}])
    r = invoke("run", tmp_path / "tasks", "--db", db, "--json")
    assert r.exit_code == 0
    lines = [line for line in r.stderr.splitlines() if "skipped task" in line]
    assert len(lines) == 1 and str(bad / "task.yaml") in lines[0] and "pattern" in lines[0]
    summary = json.loads(r.stdout)
    assert summary["total"]["rollouts"] == 1 and summary["skipped_tasks"][0]["field"] == "verifier.checks[0].pattern"


def test_unknown_agent_is_a_clear_error(tmp_path, db):
    make_task(tmp_path / "tasks", "x")
    r = invoke("run", tmp_path / "tasks", "--agent", "nope", "--db", db)
    assert r.exit_code == 2 and "no agent named 'nope'" in r.stderr and "oracle" in r.stderr


def test_tasks_list_and_validate(tmp_path):
    make_task(tmp_path / "tasks", "ok-task")
    make_task(tmp_path / "tasks", "broken", steps=[{"tool": "write", "args": {"path": "x.txt", "content": "x"}}])
    listed = invoke("tasks", "list", tmp_path / "tasks", "--json")
    assert [t["id"] for t in json.loads(listed.output)["tasks"]] == ["broken", "ok-task"]
    v = invoke("tasks", "validate", tmp_path / "tasks", "--json")
    assert v.exit_code == 1
    report = {t["task_id"]: t for t in json.loads(v.output)["tasks"]}
    assert report["ok-task"]["ok"] and report["ok-task"]["baseline_score"] == 0.0
    assert not report["broken"]["ok"] and "does not pass" in report["broken"]["problem"]


def test_show_unknown_rollout(tmp_path, db):
    make_task(tmp_path / "tasks", "x")
    invoke("run", tmp_path / "tasks", "--db", db, "--json")
    r = invoke("show", "zzz", "--db", db)
    assert r.exit_code == 2 and "no rollout 'zzz'" in r.stderr


def test_samples_past_the_bound_are_a_usage_error_not_a_hang(tmp_path, db):
    """-k 99999999999999999999999 hung building the list of rollouts to run."""
    make_task(tmp_path / "tasks", "x")
    for k in ("99999999999999999999999", "100001"):
        r = invoke("run", tmp_path / "tasks", "-k", k, "--db", db)
        assert r.exit_code == 2 and "'-k'" in r.stderr and "100000" in r.stderr, r.output
    assert not db.exists()  # refused before anything was recorded
