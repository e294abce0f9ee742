"""`clawsdk show` prints what a rollout did as text: files it wrote as files, edits as diffs, commands and their
output as lines, never as one line of escaped JSON; `--json` is the data for machines."""

from __future__ import annotations

import json

from click.testing import CliRunner

from clawsdk.cli import cli
from tests.conftest import make_task

REPORT = "# March report\n\n| category | total |\n| --- | --- |\n| food | 12.50 |\n| rent | 900.00 |\n"
DATA = {"total": 912.5, "categories": ["food", "rent"]}


def run_and_show(tmp_path, db, *show_args):
    make_task(tmp_path / "tasks", "files", checks=[{"type": "file_exists", "path": "report.md"}], steps=[
        {"tool": "write", "args": {"path": "report.md", "content": REPORT}},
        {"tool": "write", "args": {"path": "data.json", "content": json.dumps(DATA, indent=2)}},
        {"tool": "edit", "args": {"path": "report.md", "old_text": "| food | 12.50 |", "new_text": "| food | 14.00 |"}},
        {"tool": "exec", "args": {"command": "wc -l report.md"}},
        {"tool": "exec", "args": {"command": "printf 'bell\\a esc\\033[2J end\\n'"}},
        {"tool": "read", "args": {"path": "data.json"}},
    ])
    r = CliRunner().invoke(cli, ["run", str(tmp_path / "tasks"), "--db", str(db),
                                 "--run-id", "show", "--json"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    rid = json.loads(r.output)["rollouts"][0]["id"]
    return rid, CliRunner().invoke(cli, ["show", rid, "--db", str(db), *show_args], catch_exceptions=False)


def test_show_prints_file_writes_edits_and_command_output_as_text(tmp_path):
    _, shown = run_and_show(tmp_path, tmp_path / "s.db")
    assert shown.exit_code == 0, shown.output
    out = shown.output
    lines = [line.rstrip() for line in out.splitlines()]
    # the written file, line by line, as the file (not "# March report\\n\\n| category ...")
    for line in ("# March report", "| category | total |", "| rent | 900.00 |", '"total": 912.5,'):
        assert any(line in shown_line for shown_line in lines), line
    assert not [line for line in lines if "\\n" in line and not line.strip().startswith("$ printf")]
    assert '"content":' not in out and '"stdout":' not in out
    # the edit as a diff
    assert any(line.strip() == "-| food | 12.50 |" for line in lines)
    assert any(line.strip() == "+| food | 14.00 |" for line in lines)
    assert any("--- a/report.md" in line for line in lines)
    # the command and its output, as a shell line and lines; control characters as their pictures
    assert any(line.strip().startswith("$ wc -l report.md") for line in lines)
    assert any(line.strip() == "6 report.md" for line in lines)
    assert "bell␇ esc␛[2J end" in out and "\x1b[2J" not in out and "\x07" not in out
    # a file read back is the file's text
    assert out.count('"categories": [') == 2  # written, then read


def test_show_json_is_the_data_for_machines(tmp_path):
    _, shown = run_and_show(tmp_path, tmp_path / "s.db", "--json")
    doc = json.loads(shown.output)
    writes = [e["payload"]["args"] for e in doc["events"] if e["kind"] == "tool_call"
              and e["payload"]["tool"] == "write"]
    assert writes[0] == {"path": "report.md", "content": REPORT}
    assert doc["verdict"]["passed"]


def test_show_folds_long_bodies_unless_full(tmp_path):
    long = "".join(f"line {i}\n" for i in range(60))
    make_task(tmp_path / "tasks", "long", checks=[{"type": "file_exists", "path": "a.txt"}],
              steps=[{"tool": "write", "args": {"path": "a.txt", "content": long}}])
    r = CliRunner().invoke(cli, ["run", str(tmp_path / "tasks"), "--db", str(tmp_path / "s.db"),
                                 "--json"], catch_exceptions=False)
    rid = json.loads(r.output)["rollouts"][0]["id"]
    folded = CliRunner().invoke(cli, ["show", rid, "--db", str(tmp_path / "s.db")]).output
    assert "line 19" in folded and "line 20\n" not in folded and "40 more lines (--full shows all)" in folded
    full = CliRunner().invoke(cli, ["show", rid, "--db", str(tmp_path / "s.db"), "--full"]).output
    assert "line 59" in full and "more lines" not in full
