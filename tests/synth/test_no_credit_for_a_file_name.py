"""A deliverable of the right name and the wrong content scores nothing.

The JSON and CSV families scored an existence check at weight 1 beside the answer's 3: any file of that
name (empty, `{}`, a copy of an input) scored 0.25, which a mean score counts as progress (found by a
read-only audit with cheap agents)."""

from __future__ import annotations

from clawsdk_plugins.agents.builtin import ScriptedAgent

from clawsdk import run_sync
from clawsdk.synth.families import resolve_families
from clawsdk.synth.procedural import generate

FAMILIES = ("mail-contacts", "meeting-actions", "log-summary", "config-convert", "csv-reconcile", "sales-rollup",
            "table-report", "project-schedule", "meeting-slot")


def test_a_file_of_the_right_name_with_nothing_right_in_it_scores_0(tmp_path):
    tasks = list(generate(resolve_families(",".join(FAMILIES)), len(FAMILIES), 5, "easy"))
    assert sorted({t.provenance["family"] for t in tasks}) == sorted(FAMILIES)

    def calls(task):
        paths = [c["path"] for c in task.verifier.checks if c["type"] == "file_exists"]
        assert paths, task.id
        return [{"tool": "write", "args": {"path": p, "content": "{}\n" if p.endswith(".json") else "x\n"}}
                for p in paths]

    r = run_sync(tasks, agent=ScriptedAgent(calls), db=tmp_path / "names.db", retries=0, concurrency=4)
    assert [(o.kind.value, o.reward) for o in r.outcomes] == [("ok", 0.0)] * len(tasks), r.outcomes
