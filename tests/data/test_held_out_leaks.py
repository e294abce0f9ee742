"""Held-out tasks stay out of training data: by id when their content changed, and as near-duplicates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from clawsdk.cli import cli as cli_main
from clawsdk.runtime.runner import run_sync
from clawsdk.tasks.native import save_task
from clawsdk.tasks.sources import load_tasks
from tests.conftest import EXAMPLES

PARAPHRASE = (
    "Please put together an address book for me. The messages I saved out of my mail program sit as .eml "
    "files under inbox/. List every person named in a From, To or Cc line of those messages in "
    "contacts.json, leaving out my own address (dana@northwind.test): a JSON array ordered by address, "
    'each entry holding "email" (lower-cased; compare addresses ignoring case), "name" (the display name '
    "as first given for that address, going through the files by name; null when none ever names it) "
    'and "messages" (in how many of the files the address shows up in those headers). Careful: a few '
    "names hold a comma, and a few headers are folded onto a second line."
)


def task(task_id: str):
    (t,) = load_tasks(EXAMPLES / task_id).tasks
    return t


@pytest.fixture(scope="module")
def store_path(tmp_path_factory) -> Path:
    """Oracle rollouts of two example tasks: eml-contacts (to be held out) and fix-slugify-bug (not)."""
    db = tmp_path_factory.mktemp("store") / "store.db"
    run_sync([task("eml-contacts"), task("fix-slugify-bug")], agent="oracle", run_id="oracle", db=db)
    return db


def data(db: Path, held: Path, *args: str) -> str:
    """The output of `clawsdk data ARGS` with `held` held out, its whitespace collapsed."""
    res = CliRunner().invoke(cli_main, [*args, "--db", str(db), "--exclude-tasks-from", str(held)])
    assert res.exit_code == 0, res.output
    return " ".join(res.output.split())


def decisions(db: Path, held: Path) -> dict:
    return json.loads(data(db, held, "data", "select", "--json"))


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in (path / "data.jsonl").read_text().splitlines()]


def test_a_held_out_task_whose_content_changed_still_holds_out_its_rollouts(store_path, tmp_path):
    """Only the hash was excluded: a held-out copy with a longer timeout (or a fixed verifier) let the old
    rollouts of the same task id into the training data."""
    held = tmp_path / "held-out"
    changed = task("eml-contacts")
    changed = changed.model_copy(update={"limits": changed.limits.model_copy(update={"timeout_s": 601})})
    save_task(changed, held / "eml-contacts")
    out = decisions(store_path, held)
    reasons = {r["task_id"]: r["reason"] for r in out["rollouts"]}
    assert reasons["eml-contacts"].startswith("excluded: task eml-contacts is held out (by id"), reasons
    assert reasons["fix-slugify-bug"] == "kept"
    assert out["held_out"] == {"hash": 0, "id": 1, "near_duplicate": 0}
    # the table says how many went by which
    assert "held out: 1 by id" in data(store_path, held, "data", "select")

    # the unchanged task goes by its hash; an SFT export leaves it out too
    save_task(task("eml-contacts"), held / "eml-contacts")
    assert decisions(store_path, held)["held_out"] == {"hash": 1, "id": 0, "near_duplicate": 0}
    save_task(changed, held / "eml-contacts")
    out = data(store_path, held, "data", "export", "--name", "sft", "--format", "jsonl", "-o", str(tmp_path))
    assert "held out: 1 by id" in out
    assert [r["task_id"] for r in rows(tmp_path / "sft-v1")] == ["fix-slugify-bug"]


def test_a_paraphrased_held_out_task_is_dropped_as_a_near_duplicate(store_path, tmp_path):
    """A held-out task reworded, under another id, with the same workspace, hidden files and solution: neither
    its id nor its hash matched, and `data select` had no near-duplicate test."""
    held = tmp_path / "held-out"
    save_task(task("eml-contacts").model_copy(update={"id": "address-book", "instruction": PARAPHRASE}),
              held / "address-book")
    out = decisions(store_path, held)
    reasons = {r["task_id"]: r["reason"] for r in out["rollouts"]}
    assert reasons["eml-contacts"] == (
        "held_out_near_duplicate: task eml-contacts is a near-duplicate of held-out task address-book: the "
        "same hidden files (check_contacts.py, expected_contacts.json), workspace (5 files), reference "
        "solution"), reasons
    assert reasons["fix-slugify-bug"] == "kept"
    assert out["reasons"] == {"held_out_near_duplicate": 1}
    assert out["held_out"] == {"hash": 0, "id": 0, "near_duplicate": 1}

    out = data(store_path, held, "data", "export", "--name", "near", "--format", "jsonl", "-o", str(tmp_path))
    assert "held out: 1 near-duplicate(s) of held-out tasks" in out
    manifest = json.loads((tmp_path / "near-v1" / "dataset.json").read_text())
    assert manifest["dropped"] == {"held_out_near_duplicate": 1}, manifest
    # an RL prompt set of the run's tasks leaves it out too
    data(store_path, held, "data", "export", "--kind", "rl", "--name", "rl", "--run", "oracle",
         "-o", str(tmp_path))
    assert [r["task_hash"] for r in rows(tmp_path / "rl-v1")] == [task("fix-slugify-bug").hash]


def test_another_task_of_a_held_out_tasks_family_is_kept(tmp_path):
    """A procedural family words its tasks alike: the instruction test alone would drop every training task of
    the family of any held-out task. Their files differ, so they are distinct tasks."""
    from clawsdk.bench.decontam import jaccard, shingles
    from clawsdk.synth import FAMILIES

    train, held_out = (FAMILIES["mail-contacts"].task(seed=1, index=i, level=1) for i in (0, 1))
    assert jaccard(shingles(train.instruction), shingles(held_out.instruction)) >= 0.7
    db = tmp_path / "store.db"
    run_sync([train], agent="oracle", run_id="oracle", db=db)
    save_task(held_out, tmp_path / "held-out" / held_out.id)
    out = decisions(db, tmp_path / "held-out")
    assert [r["reason"] for r in out["rollouts"]] == ["kept"]
    assert out["held_out"] == {"hash": 0, "id": 0, "near_duplicate": 0}
