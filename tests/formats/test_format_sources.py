"""Reading ClawGym folders, syn_task.jsonl and PinchBench markdown; exporting between the formats."""

from __future__ import annotations

import json
import shutil

import pytest
from clawsdk_plugins.sources.clawgym import REWARD_SH
from clawsdk_plugins.sources.clawgym_export import jsonl_record

from clawsdk.tasks.convert import ConvertError, export_tasks
from clawsdk.tasks.native import load_task, save_task
from clawsdk.tasks.sources import load_tasks
from tests.conftest import FIXTURES, make_task, needs_shared_data
from tests.formats.formats_helpers import CLAWGYM, PINCHBENCH, SAMPLE_CLAWGYM, SAMPLE_PINCHBENCH, SYN_TASKS


def hybrid_of(loaded):
    return next(t for t in loaded.tasks if t.id == "task_0003")


def test_every_fixture_task_imports_by_detection_and_by_scheme():
    detected = load_tasks(str(CLAWGYM))
    assert detected.source == "clawgym" and not detected.errors and len(detected.tasks) == 3
    t = next(t for t in detected.tasks if t.id == "task_0001")
    assert t.instruction.startswith("Our warehouse keeps its stock levels in input/stock.csv")
    assert [f.path for f in t.workspace] == ["input/stock.csv"]
    assert [f.path for f in t.hidden] == ["reward/check.py", "reward/reward.sh"]
    # ClawGym's empty category: inferred by clawsdk.tasks.categories, and marked as inferred
    assert t.verifier.type == "clawgym" and t.category == "analysis & reasoning"
    assert t.provenance["category_inferred"]["rule"] == "keywords-v1"
    assert "category_inferred" not in hybrid_of(detected).provenance  # a category the data gave is kept
    assert t.verifier.model_dump()["mount_dir"] == "/root/.openclaw/workspace"
    assert all(f.data.decode() == REWARD_SH for t in detected.tasks for f in t.hidden if f.path.endswith(".sh"))
    hybrid = next(t for t in detected.tasks if t.id == "task_0003")
    assert hybrid.verifier.type == "hybrid" and hybrid.category == "content & domain"
    assert [(p["name"], p["weight"]) for p in hybrid.verifier.model_dump()["parts"]] == [("code", 0.7),
                                                                                        ("rubric", 0.3)]

    syn = load_tasks(str(SYN_TASKS))
    assert syn.source == "clawgym" and not syn.errors
    assert [(t.id, t.verifier.type) for t in syn.tasks] == [
        ("syn_task_00001", "hybrid"), ("syn_task_00002", "hybrid"), ("syn_task_00003", "rubric")]
    first = syn.tasks[0]
    assert [f.path for f in first.workspace] == ["input/notes/monday.txt", "input/notes/tuesday.txt"]  # mount cut
    assert first.category == "systems & automation" and first.tags == ["file processing"]
    assert first.provenance["origin_template"] == "count-words-v2"
    assert syn.tasks[1].workspace[0].text.startswith('[\n  "renew passport"')  # JSON content kept as JSON

    pb = load_tasks(f"pinchbench:{PINCHBENCH}")
    assert pb.source == "pinchbench" and not pb.errors
    by_id = {t.id: t for t in pb.tasks}
    assert set(by_id) == {"task_01_greeting", "task_02_project_layout", "task_03_sales_summary"}  # not the template
    sheet = by_id["task_03_sales_summary"]
    assert {f.path for f in sheet.workspace} == {"regional_sales.csv", "team_costs.xlsx"}
    xlsx = next(f for f in sheet.workspace if f.path == "team_costs.xlsx")
    assert xlsx.b64 and xlsx.data[:2] == b"PK"  # a binary asset, kept byte for byte
    assert sheet.limits.timeout_s == 180 and sheet.verifier.type == "hybrid"
    parts = sheet.verifier.model_dump()["parts"]
    assert [(p["name"], p["weight"]) for p in parts] == [("automated", 0.6), ("llm_judge", 0.4)]
    assert "Total margin 2,064" not in sheet.instruction and "sales_summary.md" in sheet.instruction
    assert by_id["task_02_project_layout"].workspace[0].path == "notes/brief.txt"  # inline {path, content}
    assert load_tasks(str(PINCHBENCH / "task_02_project_layout.md")).source == "pinchbench"


@needs_shared_data
def test_every_sample_task_imports_by_detection_and_by_scheme():
    detected = load_tasks(str(SAMPLE_CLAWGYM))
    assert detected.source == "clawgym" and not detected.errors and len(detected.tasks) == 30
    t = next(t for t in detected.tasks if t.id == "task_0091")
    assert t.instruction.startswith("I’m building a small research utility")
    assert [f.path for f in t.workspace] == ["input/filters.yaml"]
    assert [f.path for f in t.hidden] == ["reward/check.py", "reward/reward.sh"]
    assert t.verifier.type == "clawgym" and t.category == "systems & automation"
    assert t.provenance["category_inferred"]["rule"] == "keywords-v1"
    assert all(f.data.decode() == REWARD_SH for t in detected.tasks for f in t.hidden if f.path.endswith(".sh"))

    pb = load_tasks(f"pinchbench:{SAMPLE_PINCHBENCH}")
    assert pb.source == "pinchbench" and not pb.errors
    by_id = {t.id: t for t in pb.tasks}
    assert set(by_id) == {"task_00_sanity", "task_09_files", "task_18_spreadsheet_summary"}  # not the template
    sheet = by_id["task_18_spreadsheet_summary"]
    assert {f.path for f in sheet.workspace} == {"quarterly_sales.csv", "company_expenses.xlsx"}
    assert sheet.limits.timeout_s == 180
    assert sheet.verifier.type == "hybrid"
    parts = sheet.verifier.model_dump()["parts"]
    assert [(p["name"], p["weight"]) for p in parts] == [("automated", 0.6), ("llm_judge", 0.4)]
    assert "Top region by revenue" not in sheet.instruction and "data_summary.md" in sheet.instruction
    assert load_tasks(str(SAMPLE_PINCHBENCH / "task_09_files.md")).source == "pinchbench"


def _clawgym_task(root, name="task_x", entry=None, reward=True):
    folder = root / name
    (folder / "input_files" / "input").mkdir(parents=True)
    (folder / "input_files" / "input" / "a.txt").write_text("a\n")
    if entry is not None:
        (folder / "data_entry.json").write_text(entry if isinstance(entry, str) else json.dumps(entry))
    if reward:
        (folder / "reward").mkdir()
        (folder / "reward" / "reward.sh").write_text(REWARD_SH)
        (folder / "reward" / "check.py").write_text("import json\nprint(json.dumps({'a': 0}))\n")
    return folder


def test_malformed_clawgym_folders_each_say_what_is_wrong_and_the_rest_load(tmp_path):
    good = {"task_id": "good", "user_query": "do it", "metadata": {"category": "", "grading_type": "automated"}}
    _clawgym_task(tmp_path, "a_good", good)
    _clawgym_task(tmp_path, "b_badjson", '{"task_id": "b", "user_query": ')
    _clawgym_task(tmp_path, "c_noquery", {"task_id": "c", "metadata": {}})
    _clawgym_task(tmp_path, "d_noreward", {"task_id": "d", "user_query": "x"}, reward=False)
    _clawgym_task(tmp_path, "e_badtype", {"task_id": "e", "user_query": "x", "metadata": {"grading_type": "vibes"}})
    loaded = load_tasks(f"clawgym:{tmp_path}")
    assert [t.id for t in loaded.tasks] == ["good"]
    msgs = {e.path.split("/")[-2]: str(e) for e in loaded.errors}
    assert "invalid JSON at line 1" in msgs["b_badjson"]
    assert "user_query: is required but missing" in msgs["c_noquery"]
    assert "reward/reward.sh is missing" in msgs["d_noreward"]
    assert "unknown grading_type 'vibes'" in msgs["e_badtype"]


def test_syn_task_jsonl_lines_become_tasks_and_bad_lines_are_errors(tmp_path):
    rules = [{"name": "report", "file_path": "out/report.md",
              "scores": {"0": "missing", "0.5": "partial", "1.0": "complete"}}]
    lines = [
        {"prompt": "Summarise input/a.csv into out/report.md", "hook_code": "def grade(t, w):\n    return {'x': 1}\n",
         "input_files": [{"file_path": "input/a.csv", "content": "a,b\n1,2\n"}], "rules": rules,
         "origin_template": "tmpl-7", "category": "reporting", "macro_category": "analysis & reasoning"},
        "{not json",
        {"hook_code": "print(1)"},
        {"prompt": "only code", "hook_code": "import json\nprint(json.dumps({'a': 1}))\n", "rule": "be good"},
    ]
    path = tmp_path / "syn_task.jsonl"
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
    loaded = load_tasks(str(path))
    assert loaded.source == "clawgym"
    assert [t.id for t in loaded.tasks] == ["syn_task_00001", "syn_task_00004"]
    t = loaded.tasks[0]
    assert t.category == "analysis & reasoning" and t.tags == ["reporting"]
    assert t.provenance["origin_template"] == "tmpl-7"
    assert t.verifier.type == "hybrid"  # code + rubric: ClawGym's 0.7 / 0.3
    assert [(p["name"], p["weight"]) for p in t.verifier.model_dump()["parts"]] == [("code", 0.7), ("rubric", 0.3)]
    check = next(f for f in t.hidden if f.path == "reward/check.py").data.decode()
    assert "__main__" in check  # a bare grade() becomes the script reward.sh runs
    errors = sorted(str(e) for e in loaded.errors)
    assert any("syn_task.jsonl:2" in e and "invalid JSON" in e for e in errors)
    assert any("syn_task.jsonl:3: prompt: is required" in e for e in errors)
    assert load_tasks(f"clawgym-jsonl:{path}").source == "clawgym-jsonl"


def test_a_task_id_that_is_not_text_is_refused_not_turned_into_text(tmp_path):
    line = {"prompt": "Write done.txt", "hook_code": "import json\nprint(json.dumps({'a': 1}))\n"}
    path = tmp_path / "syn_task.jsonl"
    path.write_text("\n".join(json.dumps({**line, "task_id": v}) for v in ({"a": 1}, 5, ["x"], "named")) + "\n")
    loaded = load_tasks(str(path))
    assert [t.id for t in loaded.tasks] == ["5", "named"]  # it was "{'a': 1}" and "['x']"
    errors = sorted(str(e) for e in loaded.errors)
    assert len(errors) == 2 and all("task_id: must be text" in e for e in errors), errors


def test_pinchbench_malformed_files_say_what_is_wrong(tmp_path):
    (tmp_path / "task_01_noid.md").write_text("---\nname: x\ngrading_type: automated\n---\n## Prompt\nhi\n")
    (tmp_path / "task_02_nofront.md").write_text("## Prompt\nhi\n")
    (tmp_path / "task_03_nograde.md").write_text("---\nid: t3\ngrading_type: automated\n---\n## Prompt\nhi\n")
    (tmp_path / "task_04_asset.md").write_text(
        "---\nid: t4\nworkspace_files:\n  - source: nope.csv\n    dest: a.csv\n---\n## Prompt\nhi\n"
        "## Automated Checks\n```python\ndef grade(transcript, workspace_path):\n    return {'a': 1.0}\n```\n")
    (tmp_path / "task_05_inline.md").write_text(
        "---\nid: t5\ngrading_type: llm_judge\nworkspace_files:\n  - path: notes/a.txt\n    content: hello\n---\n"
        "## Prompt\nhi\n\n## LLM Judge Rubric\n### Criterion 1: Tone (Weight: 100%)\n**Score 1.0**: nice\n")
    loaded = load_tasks(f"pinchbench:{tmp_path}")
    assert [t.id for t in loaded.tasks] == ["t5"]
    assert loaded.tasks[0].workspace[0].text == "hello" and loaded.tasks[0].verifier.type == "rubric"
    msgs = {e.path.rsplit("/", 1)[-1]: str(e) for e in loaded.errors}
    assert "id: the frontmatter has no 'id'" in msgs["task_01_noid.md"]
    assert "no YAML frontmatter" in msgs["task_02_nofront.md"]
    assert "needs a ```python grade() block" in msgs["task_03_nograde.md"]
    assert "workspace_files[0].source: source 'nope.csv' not found" in msgs["task_04_asset.md"]


def test_a_pinchbench_file_saved_with_a_byte_order_mark_loads_like_without(tmp_path):
    # an editor's BOM before the '---' read as "no YAML frontmatter"
    text = (FIXTURES / "pinchbench" / "task_01_greeting.md").read_text()
    (tmp_path / "plain").mkdir()
    (tmp_path / "bom").mkdir()
    (tmp_path / "plain" / "task_01_greeting.md").write_text(text)
    (tmp_path / "bom" / "task_01_greeting.md").write_bytes(b"\xef\xbb\xbf" + text.encode())
    plain, bom = load_tasks(f"pinchbench:{tmp_path / 'plain'}"), load_tasks(f"pinchbench:{tmp_path / 'bom'}")
    assert not bom.errors, bom.errors
    assert [t.hash for t in bom.tasks] == [t.hash for t in plain.tasks] and len(bom.tasks) == 1
    assert load_tasks(str(tmp_path / "bom")).tasks[0].id == plain.tasks[0].id  # found by detection too


def test_native_to_clawgym_to_jsonl_and_back_keeps_the_task(tmp_path):
    folder = _clawgym_task(tmp_path / "src", "task_7", {
        "task_id": "task_7", "user_query": "Write out/x.json", "input_mount_dir": "/root/.openclaw/workspace",
        "metadata": {"category": "", "grading_type": "automated", "source_note": "kept"}})
    (folder / "input_files" / "logo.bin").write_bytes(bytes(range(256)))
    original = load_tasks(f"clawgym:{folder}").tasks[0]
    # add what only native can hold: ClawGym's formats carry it under their `clawsdk` key
    richer = type(original).model_validate({
        **original.model_dump(), "difficulty": "hard", "tags": ["t"],
        "solution": [{"tool": "write", "args": {"path": "out/x.json", "content": "{}"}}]})
    save_task(richer, tmp_path / "native" / "task_7")
    native = load_task(tmp_path / "native" / "task_7")
    assert native.hash == richer.hash

    n, errs = export_tasks([native], tmp_path / "cg", "clawgym")
    assert (n, errs) == (1, [])
    entry = json.loads((tmp_path / "cg" / "task_7" / "data_entry.json").read_text())
    assert entry["user_query"] == "Write out/x.json" and entry["metadata"]["source_note"] == "kept"
    assert (tmp_path / "cg" / "task_7" / "reward" / "reward.sh").read_text() == REWARD_SH
    back = load_tasks(f"clawgym:{tmp_path / 'cg'}").tasks[0]
    assert back.hash == richer.hash and back.difficulty == "hard"

    n, errs = export_tasks([back], tmp_path / "syn.jsonl", "jsonl")
    assert n == 1 and not errs
    record = json.loads((tmp_path / "syn.jsonl").read_text())
    assert record["hook_code"].startswith("import json") and "reward_sh" not in record
    again = load_tasks(str(tmp_path / "syn.jsonl")).tasks[0]
    assert again.hash == richer.hash and again.solution == richer.solution

    n, errs = export_tasks([again], tmp_path / "cg2", "clawgym")
    assert json.loads((tmp_path / "cg2" / "task_7" / "data_entry.json").read_text())["user_query"] == "Write out/x.json"


@pytest.mark.parametrize("root", [CLAWGYM, pytest.param(SAMPLE_CLAWGYM, marks=needs_shared_data, id="sample")])
def test_every_task_round_trips_through_jsonl_with_the_same_hash(tmp_path, root):
    tasks = load_tasks(str(root)).tasks
    n, errs = export_tasks(tasks, tmp_path / "all.jsonl", "jsonl")
    assert n == len(tasks) >= 3 and not errs
    again = {t.id: t.hash for t in load_tasks(str(tmp_path / "all.jsonl")).tasks}
    assert again == {t.id: t.hash for t in tasks}
    n, errs = export_tasks(tasks, tmp_path / "folders", "clawgym")
    for t in tasks[:3]:
        a = json.loads((root / t.id / "data_entry.json").read_text())
        b = json.loads((tmp_path / "folders" / t.id / "data_entry.json").read_text())
        assert a == b  # nothing added, nothing lost


def test_a_verifier_clawgym_cannot_run_is_refused_not_dropped(tmp_path):
    task = load_task(make_task(tmp_path))
    with pytest.raises(ConvertError, match="cannot be expressed in ClawGym's format"):
        jsonl_record(task)
    n, errs = export_tasks([task], tmp_path / "out", "clawgym")
    assert n == 0 and "export it as native" in str(errs[0])
    shutil.rmtree(tmp_path / "out", ignore_errors=True)


def test_convert_command_writes_each_format(tmp_path):
    from click.testing import CliRunner

    from clawsdk.cli import cli

    src = f"clawgym:{CLAWGYM / 'task_0001'}"
    for fmt, out in (("jsonl", tmp_path / "t.jsonl"), ("native", tmp_path / "n"), ("clawgym", tmp_path / "c")):
        r = CliRunner().invoke(cli, ["convert", src, "--to", fmt, "--out", str(out)], catch_exceptions=False)
        assert r.exit_code == 0 and "wrote 1 task(s)" in r.output, r.output
    assert load_task(tmp_path / "n" / "task_0001").hash == load_tasks(str(tmp_path / "t.jsonl")).tasks[0].hash
    r = CliRunner().invoke(cli, ["convert", f"pinchbench:{PINCHBENCH}", "--to", "jsonl", "--out",
                                 str(tmp_path / "p.jsonl")], catch_exceptions=False)
    assert r.exit_code == 1 and "not exported" in r.output and "export it as native" in r.output


@pytest.mark.parametrize("counts, reward", [({"monday.txt": 4, "tuesday.txt": 6}, 1.0),
                                            ({"monday.txt": 4, "tuesday.txt": 5}, 0.5)])
def test_a_syn_task_hook_code_scores_the_workspace_in_the_sandbox(db, counts, reward):
    from clawsdk_plugins.agents.builtin import ScriptedAgent

    from clawsdk import run_sync


    task = load_tasks(str(SYN_TASKS)).tasks[0]
    code_only = task.model_copy(update={"verifier": type(task.verifier).model_validate(
        task.verifier.model_dump()["parts"][0]["verifier"])})  # the rubric part needs a judge: tested elsewhere
    calls = [{"tool": "write", "args": {"path": "out/word_counts.json", "content": json.dumps(counts)}}]
    result = run_sync([code_only], agent=ScriptedAgent(calls), db=db, run_id="syn", retries=0, sandbox="local")
    (outcome,) = result.outcomes
    assert outcome.kind.value == "ok", outcome.error
    assert outcome.reward == reward
