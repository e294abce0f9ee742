"""The persona and skill routes against a real OpenAI-compatible HTTP server with scripted answers."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
from clawsdk_plugins.commands.synth import synth_group
from click.testing import CliRunner

from clawsdk.runtime.validate import validate_task
from clawsdk.store.store import Store
from clawsdk.synth.records import SynthRecords
from clawsdk.tasks.native import load_task
from tests.sandbox.sandbox_backends import skip_unless_available

INSTRUCTION = ("My expenses for the trip are in expenses.csv (columns category,amount). Add up the amounts per "
               "category and write totals.json, a JSON object mapping each category to its total as a number. "
               "notes.txt has some context if you need it.")


def draft(instruction: str) -> dict:
    return {
        "instruction": instruction,
        "category": "analysis & reasoning",
        "subcategory": "spreadsheet and CSV analysis",
        "difficulty": "easy",
        "input_files": [
            {"path": "expenses.csv", "content": "category,amount\nfood,10\ntravel,30\nfood,2.5\n"},
            {"path": "notes.txt", "content": None, "description": "a short note about the trip"},
        ],
        "expected_behavior": "totals.json is {\"food\": 12.5, \"travel\": 30}.",
        "deliverables": ["totals.json"],
        "reference_solution": [
            {"tool": "read", "args": {"path": "expenses.csv"}},
            {"tool": "write", "args": {"path": "totals.json", "content": "{\"food\": 12.5, \"travel\": 30}\n"}},
        ],
    }


DRAFTS = [
    draft(INSTRUCTION + " Thanks!"),
    draft("Write totals.json containing {\"food\": 12.5, \"travel\": 30} exactly; expenses.csv has the data."),
    draft(INSTRUCTION + " Thank you!"),  # a near-duplicate of the first
]
BAD_CHECK = "print(1.0)\n"  # scores the untouched workspace 1: must be repaired
GOOD_CHECK = """```python
import json
try:
    data = json.load(open("totals.json"))
except Exception:
    print(0.0)
    raise SystemExit
print(1.0 if data == {"food": 12.5, "travel": 30} else 0.0)
```"""
RUBRIC = json.dumps([{"name": "totals are faithful", "file_path": "totals.json",
                      "scores": {"0": "missing", "0.25": "mostly wrong", "0.5": "half right", "0.75": "one slip",
                                 "1": "every total right"}}])


class Script:
    def __init__(self, fail_verifier: bool = False, prelude: str = ""):
        self.drafts = 0
        self.fail_verifier = fail_verifier
        self.prelude = prelude  # code every check.py runs first

    def check(self, code: str) -> str:
        return code.replace("```python\n", "```python\n" + self.prelude) if "```" in code else self.prelude + code

    def __call__(self, messages: list[dict]) -> str | int:
        last = messages[-1]["content"]
        whole = "\n".join(m.get("content") or "" for m in messages)
        if "Persona:" in last or "# Primary skill" in last:
            d = DRAFTS[self.drafts % len(DRAFTS)]
            self.drafts += 1
            return "Here is the task:\n```json\n" + json.dumps(d) + "\n```"
        if "Check this task draft for two defects" in last:
            leak = "containing {" in last
            return json.dumps({"answer_leak": leak, "factual_error": False,
                               "reason": "the instruction states the totals" if leak else "fine"})
        if "Write the full content of the input file notes.txt" in last:
            return "We spent most of the money on the train.\n"
        if "That check.py failed its execution test" in last:
            return self.check(GOOD_CHECK)
        if "Write a Python 3 program check.py" in whole:
            if self.fail_verifier:
                return 500
            return self.check(BAD_CHECK if "Thanks!" in whole else GOOD_CHECK)
        if "rubric rules" in whole:
            return RUBRIC
        return "I do not understand."


def invoke(args: list[str]) -> object:
    result = CliRunner().invoke(synth_group, args, catch_exceptions=False)
    return result


def route_args(route: str, server, out: Path, db: Path, extra: list[str] = ()) -> list[str]:
    return [route, "--model", "openai:scripted", "--base-url", server.base_url, "--model-opt", f"api_key={server.token}",
            "--model-opt", "retries=0", "--n", "3", "--categories", "analysis & reasoning", "--concurrency", "1",
            "--dedup", "minhash", "--out", str(out), "--db", str(db), "--run-id", f"{route}-test", *extra]


def test_persona_route_repairs_a_verifier_rejects_a_leak_and_removes_a_duplicate(tmp_path, scripted_server):
    server = scripted_server(Script())
    out, db = tmp_path / "out", tmp_path / "synth.db"
    result = invoke(route_args("persona", server, out, db, ["--json"]))
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["status"] == {"accepted": 1, "rejected": 2}
    assert abs(report["validity"] - 1 / 3) < 1e-9

    with Store(db) as store:
        records = SynthRecords(store)
        cands = records.candidates("persona-test")
        a, b, c = cands
        assert a["status"] == "accepted" and a["task_id"] == "persona-test-00000"
        assert b["status"] == "rejected" and b["stage"] == "leak_judge" and "answer leak" in b["reason"]
        assert c["status"] == "rejected" and c["stage"] == "dedup"
        assert "near-duplicate of persona-test-00000" in c["reason"]
        stages = [(s["stage"], s["round"], s["verdict"]) for s in records.stages(a["id"])]
        assert stages == [("draft", 0, "pass"), ("leak_judge", 0, "pass"), ("workspace", 0, "pass"),
                          ("verifier", 0, "repair"), ("verifier", 1, "pass"), ("rubric", 0, "pass"),
                          ("dedup", 0, "pass"), ("assemble", 0, "pass")]
        repair = records.stages(a["id"])[3]
        assert "scored 1" in repair["detail"] and repair["output"]["code"] == BAD_CHECK
        assert records.stages(a["id"])[2]["output"]["generated"] == ["notes.txt"]
        # every candidate keeps what it was made from
        assert all(c["seed"]["persona"]["name"] and len(c["seed"]["operations"]) == 3 for c in cands)

    task = load_task(out / "persona-test-00000")
    assert {f.path for f in task.workspace} == {"expenses.csv", "notes.txt"}
    assert task.metadata["rubric"][0]["name"] == "totals are faithful"
    assert task.provenance["route"] == "persona" and task.provenance["candidate"] == a["id"]
    v = anyio.run(validate_task, task)
    assert v.ok, v.problem
    assert sorted(p.name for p in out.iterdir()) == ["persona-test-00000"]

    why = invoke(["why", "persona-test/00002", "--db", str(db)])
    assert "near-duplicate of persona-test-00000" in why.output and "dedup" in why.output
    why_leak = invoke(["why", "persona-test/00001", "--db", str(db)])
    assert "answer leak" in why_leak.output

    # a rerun of the run id resumes: everything is final, so no model call is made
    before = len(server.requests)
    again = invoke(route_args("persona", server, out, db, ["--json"]))
    assert json.loads(again.stdout)["status"] == {"accepted": 1, "rejected": 2}
    assert len(server.requests) == before


def test_an_interrupted_synthesis_resumes_at_the_stage_that_failed(tmp_path, scripted_server):
    script = Script(fail_verifier=True)
    server = scripted_server(script)
    out, db = tmp_path / "out", tmp_path / "synth.db"
    first = invoke(route_args("persona", server, out, db, ["--json", "--n", "1"]))
    assert json.loads(first.stdout)["status"] == {"error": 1}
    with Store(db) as store:
        (cand,) = SynthRecords(store).candidates("persona-test")
        assert cand["stage"] == "verifier" and "ModelError" in cand["reason"]
    drafts = script.drafts
    script.fail_verifier = False
    second = invoke(route_args("persona", server, out, db, ["--json", "--n", "1"]))
    assert json.loads(second.stdout)["status"] == {"accepted": 1}
    assert script.drafts == drafts  # the draft, judge and workspace were not asked for again
    assert (out / "persona-test-00000" / "task.yaml").exists()


def test_skill_route_grounds_tasks_in_a_skill_md(tmp_path, scripted_server):
    skills = tmp_path / "skills"
    for name in ("ledger", "charts"):
        (skills / name).mkdir(parents=True)
        (skills / name / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: work with {name}\n---\n# {name}\nUse the {name} conventions.\n")
    server = scripted_server(Script())
    out, db = tmp_path / "out", tmp_path / "synth.db"
    result = invoke(route_args("skill", server, out, db, ["--skills", str(skills), "--n", "1", "--json"]))
    assert json.loads(result.stdout)["status"] == {"accepted": 1}, result.output
    prompt = server.requests[0][-1]["content"]
    assert "# Primary skill" in prompt and "Use the charts conventions." in prompt  # sorted: charts first
    assert "# Supporting skills" in prompt and "ledger" in prompt
    task = load_task(out / "skill-test-00000")
    assert task.provenance["primary"] == "charts" and task.provenance["supporting"] == ["ledger"]


def test_the_execution_gate_runs_model_written_code_isolated_by_default(tmp_path, scripted_server):
    """check.py and the reference solution come from a model: with no --sandbox they run in bwrap, so
    code that reaches for the host's files finds none of them."""
    skip_unless_available("bwrap")
    host = tmp_path / "host"
    host.mkdir()
    (host / "secret.txt").write_text("the host's own file\n")
    reach = (f"import pathlib\nfor name, act in (('secret.txt', 'read'), ('escaped.txt', 'write')):\n"
             f"    try:\n        p = pathlib.Path({str(host)!r}) / name\n"
             f"        p.read_text() if act == 'read' else p.write_text('out')\n"
             f"        pathlib.Path({str(host)!r}, 'reached-' + name).write_text('')\n"
             f"    except OSError:\n        pass\n")
    server = scripted_server(Script(prelude=reach))
    out, db = tmp_path / "out", tmp_path / "synth.db"
    result = invoke(route_args("persona", server, out, db, ["--json", "--n", "1"]))
    assert json.loads(result.stdout)["status"] == {"accepted": 1}, result.output  # the gate ran check.py twice
    assert sorted(p.name for p in host.iterdir()) == ["secret.txt"]  # neither read nor written from the gate
    assert "isolates nothing" not in result.output


def test_a_run_id_that_cannot_name_its_tasks_is_refused_before_any_model_call(tmp_path):
    """A route's tasks are RUN_ID-00000...; a run id of ../x would make every candidate fail to assemble."""
    out, db = tmp_path / "tasks", tmp_path / "s.db"
    result = CliRunner().invoke(synth_group, ["persona", "--model", "openai:scripted", "--base-url",
                                              "http://127.0.0.1:9", "--out", str(out), "--db", str(db),
                                              "--run-id", "../x"])
    assert result.exit_code == 2 and "--run-id" in result.output and "cannot be a task id" in result.output
    assert not out.exists() and not db.exists()


TOTALS_PY = ("import csv, json\nt = {}\nfor r in csv.DictReader(open('expenses.csv')):\n"
             "    t[r['category']] = t.get(r['category'], 0) + float(r['amount'])\n"
             "print(json.dumps({k: int(v) if v == int(v) else v for k, v in t.items()}))\n")
#: a totals.py that adds nothing up: it prints the dict it finds in the grader beside it
PEEK_TOTALS_PY = ("import glob, os, re\n"
                  "for f in glob.glob(os.environ.get('CLAWSDK_HIDDEN', '/nowhere') + '/*.py'):\n"
                  "    m = re.search(r'==\\s*(\\{[^}]*\\})', open(f).read())\n"
                  "    if m:\n        print(m.group(1))\n")
GRADE = """try:
    data = json.loads(out)
except Exception:
    print(0.0)
    raise SystemExit
print(1.0 if data == {"food": 12.5, "travel": 30} else 0.0)
"""
RUNS_THE_AGENTS_SCRIPT = ("import json, subprocess\nout = subprocess.run(['python3', 'totals.py'], capture_output=True, "
                          "text=True).stdout\n" + GRADE)
READS_AGENT_RUN = "# agent_run: python3 totals.py\nimport json, sys\nout = sys.stdin.read()\n" + GRADE


class ScriptTask(Script):
    """A task whose deliverable is a program: the model's first check.py runs it beside itself."""

    def __call__(self, messages: list[dict]) -> str | int:
        last = messages[-1]["content"]
        if "Persona:" in last:
            d = draft("Write totals.py, a program that reads expenses.csv (columns category,amount) and prints a "
                      "JSON object mapping each category to the total of its amounts. notes.txt has context.")
            d["deliverables"] = ["totals.py"]
            d["reference_solution"] = [{"tool": "write", "args": {"path": "totals.py", "content": TOTALS_PY}}]
            return json.dumps(d)
        if "That check.py failed its execution test" in last:
            return READS_AGENT_RUN
        if "Write a Python 3 program check.py" in "\n".join(m.get("content") or "" for m in messages):
            return RUNS_THE_AGENTS_SCRIPT if "rubric rules" not in last else RUBRIC
        return super().__call__(messages)


def test_a_check_that_runs_the_agents_program_is_sent_back_to_use_agent_run(tmp_path, scripted_server):
    """A model-written check.py that ran the agent's totals.py ran it beside the hidden files: a totals.py
    that printed the dict it found in check.py passed. The gate sends such a check back; the repaired one
    names the command in `# agent_run:`, which runs before the hidden files exist."""
    skip_unless_available("bwrap")
    from clawsdk_plugins.agents.builtin import ScriptedAgent

    from clawsdk import run_sync
    from clawsdk.synth import gates

    server = scripted_server(ScriptTask())
    out, db = tmp_path / "out", tmp_path / "synth.db"
    result = invoke(route_args("persona", server, out, db, ["--json", "--n", "1", "--no-rubric"]))
    assert json.loads(result.stdout)["status"] == {"accepted": 1}, result.output
    [repair] = [m[-1]["content"] for m in server.requests if "failed its execution test" in m[-1]["content"]]
    assert "line 1: `subprocess` starts processes" in repair and "# agent_run: COMMAND" in repair
    task = load_task(out / "persona-test-00000")
    assert task.verifier.checks[0]["agent_run"] == "python3 totals.py"

    def score(t, program: str) -> float:
        agent = ScriptedAgent([{"tool": "write", "args": {"path": "totals.py", "content": program}}])
        [o] = run_sync([t], agent=agent, sandbox="bwrap", db=tmp_path / f"{len(list(tmp_path.iterdir()))}.db",
                       retries=0).outcomes
        assert o.kind.value == "ok", o
        return o.reward

    assert (score(task, TOTALS_PY), score(task, PEEK_TOTALS_PY)) == (1.0, 0.0)
    # the check the gate sent back, assembled anyway: the peeking program passes it
    ungated = gates.build_task("ungated", gates.Draft.model_validate(task.model_dump(mode="json") | {
        "input_files": [], "reference_solution": None}), {f.path: f.text for f in task.workspace},
        RUNS_THE_AGENTS_SCRIPT, list(task.tools or []), {}, {})
    assert score(ungated, PEEK_TOTALS_PY) == 1.0


#: a check.py that gives half the score for totals.json being there at all
CREDIT_FOR_A_FILE = """```python
import json, os
if not os.path.exists("totals.json"):
    print(0.0)
    raise SystemExit
try:
    data = json.load(open("totals.json"))
except Exception:
    print(0.5)
    raise SystemExit
print(1.0 if data == {"food": 12.5, "travel": 30} else 0.5)
```"""


class CreditForAFile(Script):
    def __call__(self, messages: list[dict]) -> str | int:
        last = messages[-1]["content"]
        whole = "\n".join(m.get("content") or "" for m in messages)
        if "Write a Python 3 program check.py" in whole and "failed its execution test" not in last \
                and "rubric rules" not in whole:
            return CREDIT_FOR_A_FILE
        return super().__call__(messages)


def test_a_check_that_rewards_an_empty_deliverable_is_sent_back(tmp_path, scripted_server):
    """The untouched workspace scores 0 under this check.py, but an empty totals.json scores 0.5: the gate's
    cheap agents find it and send it back for repair, and the repaired check is accepted."""
    server = scripted_server(CreditForAFile())
    out, db = tmp_path / "out", tmp_path / "synth.db"
    result = invoke(route_args("persona", server, out, db, ["--json", "--n", "1", "--no-rubric"]))
    assert json.loads(result.stdout)["status"] == {"accepted": 1}, result.output
    with Store(db) as store:
        records = SynthRecords(store)
        (cand,) = records.candidates("persona-test")
        verifier = [s for s in records.stages(cand["id"]) if s["stage"] == "verifier"]
    assert [s["verdict"] for s in verifier] == ["repair", "pass"]
    assert "rewards an agent that did no work" in verifier[0]["detail"]
    assert "'empty' agent" in verifier[0]["detail"] and "0.50" in verifier[0]["detail"]
    assert verifier[1]["output"]["cheap_scores"] == {"wipe": 0.0, "empty": 0.0, "copy": 0.0}
