"""Procedural families: deterministic, distinct, valid (untouched fails, reference passes), recorded."""

from __future__ import annotations

import json
from collections import Counter

import anyio
import pytest
from clawsdk_plugins.commands.synth import synth_group
from click.testing import CliRunner

from clawsdk.runtime.validate import validate_tasks
from clawsdk.store.store import Store
from clawsdk.synth.families import FAMILIES, resolve_families
from clawsdk.synth.procedural import generate
from clawsdk.synth.records import SynthRecords
from clawsdk.tasks.model import CATEGORIES
from clawsdk.tasks.native import load_task, save_task
from clawsdk.tasks.sources import load_tasks

CORE = {"read", "write", "edit", "ls", "glob", "grep", "exec"}


def test_at_least_twelve_families_cover_all_six_categories():
    assert len(FAMILIES) >= 12
    assert Counter(f.category for f in FAMILIES.values()).keys() == set(CATEGORIES)


def test_every_family_at_every_level_is_valid_and_its_solution_is_core_tool_calls(tmp_path):
    tasks = [f.task(7, i, level) for f in FAMILIES.values() for level in (1, 2, 3) for i in range(2)]
    results = anyio.run(lambda: validate_tasks(tasks, concurrency=4))
    bad = [(t.id, t.difficulty, r.problem) for t, r in zip(tasks, results, strict=True) if not r.ok]
    assert not bad
    for t in tasks:
        assert t.solution and {s.tool for s in t.solution} <= CORE
        assert t.verifier.type == "checks" and t.category in CATEGORIES
        # hidden expected files never reach the workspace
        assert not {f.path for f in t.hidden} & {f.path for f in t.workspace}
        assert save_task(t, tmp_path / t.id) and load_task(tmp_path / t.id).hash == t.hash


def test_generation_is_deterministic_for_a_seed_and_differs_across_seeds():
    fams = resolve_families("all")
    a = [t.hash for t in generate(fams, 40, seed=3)]
    b = [t.hash for t in generate(fams, 40, seed=3)]
    c = [t.hash for t in generate(fams, 40, seed=4)]
    assert a == b
    assert not set(a) & set(c)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_a_family_makes_thousands_of_distinct_tasks(family):
    hashes = {FAMILIES[family].task(1, i, i % 3 + 1).hash for i in range(2000)}
    assert len(hashes) >= 1990  # near-collisions are replaced by generate(); the space is far larger


def test_families_and_categories_resolve_and_bad_names_say_what_exists():
    assert [f.name for f in resolve_families("srt-shift,software development")] == \
        ["srt-shift", "fix-failing-test", "semver-bump"]
    with pytest.raises(LookupError, match="mail-contacts"):
        resolve_families("no-such-family")


def test_procedural_task_source_yields_the_same_tasks_as_the_generator():
    loaded = load_tasks("procedural:mail-contacts,log-summary?n=6&seed=9&difficulty=hard")
    assert not loaded.errors and len(loaded.tasks) == 6
    assert {t.difficulty for t in loaded.tasks} == {"hard"}
    assert [t.hash for t in loaded.tasks] == [t.hash for t in generate(
        resolve_families("mail-contacts,log-summary"), 6, 9, "hard")]
    bad = load_tasks("procedural:all?n=2&sede=1")
    assert bad.errors and "sede" in str(bad.errors[0])


def test_cli_writes_valid_tasks_records_every_gate_and_resumes(tmp_path):
    out, db = tmp_path / "tasks", tmp_path / "s.db"
    args = ["procedural", "--families", "all", "--n", "14", "--seed", "5", "--out", str(out), "--db", str(db),
            "--run-id", "p1", "--json"]
    result = CliRunner().invoke(synth_group, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["status"] == {"accepted": 14} and report["validity"] == 1.0
    assert dict(report["gates"]) == {"generate": 14, "untouched_fails": 14, "reference_passes": 14,
                                     "cheap_agents_fail": 14, "assemble": 14}
    assert len(report["groups"]) == len(FAMILIES)
    folders = sorted(p.name for p in out.iterdir())
    assert len(folders) == 14 and len({load_task(out / f).hash for f in folders}) == 14
    # the tasks are in the store's task table, and `why` explains one by task id
    with Store(db) as store:
        assert store.query("SELECT COUNT(*) AS n FROM tasks WHERE source = 'synth:procedural'")[0]["n"] == 14
        assert len(SynthRecords(store).find(folders[0])) == 1
    why = CliRunner().invoke(synth_group, ["why", folders[0], "--db", str(db)])
    assert "reference_passes: pass" in why.output and "accepted" in why.output
    # a rerun skips what is done; a deleted task folder is made again
    (out / folders[0] / "task.yaml").unlink()
    again = CliRunner().invoke(synth_group, args, catch_exceptions=False)
    assert json.loads(again.stdout)["skipped_already_done"] == 13
    assert (out / folders[0] / "task.yaml").exists()
