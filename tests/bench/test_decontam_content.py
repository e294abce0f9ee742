"""Decontamination by content: a reworded task with a benchmark task's files is a near-duplicate, and
distinct tasks that share boilerplate (a README, a helper script, a short answer) are not."""

from __future__ import annotations

import json
from collections import defaultdict

from clawsdk.bench.decontam import DEFAULT_THRESHOLD, TrainingSet, fingerprint, read_datasets
from clawsdk.tasks.model import File
from clawsdk.tasks.sources import load_tasks
from tests.conftest import EXAMPLES, FIXTURES

REWORDED = (
    "Please put together an address book for me from the messages saved as .eml files under inbox/: "
    "everyone in a From, To or Cc line except my own address goes into contacts.json, ordered by address, "
    "with their lower-cased email, the display name first given for them and how many files mention them."
)

SPAM = ("From: Deals <deals@shop.test>\nTo: dana@northwind.test\nSubject: 50% off\n\n"
        "Only today, everything half price.\n")


def example(task_id: str):
    (t,) = load_tasks(EXAMPLES / task_id).tasks
    return t


def benchmark() -> TrainingSet:
    ts = TrainingSet()
    for t in load_tasks(EXAMPLES).tasks:
        ts.add_task(t)
    return ts


def test_a_reworded_task_with_a_benchmark_tasks_files_is_a_near_duplicate():
    """Only the instruction was compared: reworded, the same workspace and answer passed as distinct."""
    ts, eml = benchmark(), example("eml-contacts")
    reworded = eml.model_copy(update={"id": "address-book", "instruction": REWORDED})
    sim, _ = ts.nearest(reworded.instruction)
    assert sim < DEFAULT_THRESHOLD  # the instruction test alone misses it
    m = ts.near_duplicate(reworded)
    assert m is not None and m.other == "eml-contacts", m
    assert m.signals == ("hidden", "workspace", "solution")
    assert m.detail == ("the same hidden files (check_contacts.py, expected_contacts.json), "
                        "workspace (5 files), reference solution"), m.detail

    # the same answer, re-indented, beside a workspace with one more mail and no reference solution
    expected = next(f for f in eml.hidden if f.path == "expected_contacts.json")
    hidden = [f for f in eml.hidden if f is not expected]
    reindented = json.dumps(json.loads(expected.text), indent=4) + "\n\n"
    hidden.append(File(path="answer/expected.json", text=reindented))
    variant = reworded.model_copy(update={
        "workspace": [*eml.workspace, File(path="inbox/006-spam.eml", text=SPAM)],
        "hidden": hidden, "solution": None})
    m = ts.near_duplicate(variant)
    assert m is not None and (m.other, m.signals) == ("eml-contacts", ("hidden",)), m
    # the same workspace, another question about it
    other_question = reworded.model_copy(update={"hidden": [], "solution": None})
    m = ts.near_duplicate(other_question)
    assert m is not None and (m.other, m.signals) == ("eml-contacts", ("workspace",)), m
    # the same instruction: the instruction test, as before
    bare = example("fix-slugify-bug").model_copy(update={"workspace": [], "hidden": [], "solution": None})
    m = ts.near_duplicate(bare)
    assert m is not None and (m.other, m.signals) == ("fix-slugify-bug", ("instruction",)), m
    assert m.detail == "instruction Jaccard 1.00"
    # nothing shared
    unrelated = variant.model_copy(update={"workspace": variant.workspace[:2], "hidden": hidden[:1]})
    assert ts.near_duplicate(unrelated) is None


def test_distinct_tasks_sharing_boilerplate_are_not_near_duplicates():
    """Procedural families share files between distinct tasks (fix-failing-test's difftest.py, some READMEs,
    meeting-slot's short answers, ClawGym's reward.sh); no content signal may pair two distinct tasks."""
    from clawsdk.synth import generate, resolve_families

    tasks = list(generate(resolve_families("all"), n=390, seed=1)) + load_tasks(EXAMPLES).tasks
    for source in ("clawgym:", "pinchbench:", "clawgym-jsonl:"):
        folder = {"clawgym-jsonl:": "clawgym-jsonl/syn_task.jsonl"}.get(source, source[:-1])
        tasks += load_tasks(f"{source}{FIXTURES / folder}").tasks
    assert len({t.hash for t in tasks}) == len(tasks) == 390 + 14 + 9
    files, signals = defaultdict(set), defaultdict(set)
    for t in tasks:
        for f in [*t.workspace, *t.hidden]:
            files[f.data].add(t.hash)
        for signal, digest in fingerprint(t).items():
            signals[signal, digest].add(t.hash)
    assert sum(len(v) > 1 for v in files.values()) >= 10  # the boilerplate is there
    assert {k: len(v) for k, v in signals.items() if len(v) > 1} == {}
    # nor does their wording: a family words its tasks alike, and files that differ make them distinct
    held = TrainingSet()
    for t in tasks[:78]:  # 6 of each family
        held.add_task(t)
    similar = [t for t in tasks[78:] if held.nearest(t.instruction)[0] >= DEFAULT_THRESHOLD]
    assert len(similar) > 200  # 248 of the 335 others
    assert [(t.id, held.near_duplicate(t)) for t in similar if held.near_duplicate(t)] == []


def test_a_dataset_export_in_the_store_brings_its_tasks_content(tmp_path):
    from clawsdk.data.export import export_sft
    from clawsdk.data.select import Selection, select
    from clawsdk.runtime.runner import run_sync
    from clawsdk.store.store import Store

    db = tmp_path / "store.db"
    run_sync([example("eml-contacts")], agent="oracle", run_id="o", db=db)
    with Store(db) as store:
        export_sft(store, select(store, Selection()), tmp_path / "out", name="sft", formats=("jsonl",))
        training = read_datasets(store, ["sft@v1"])
    reworded = example("eml-contacts").model_copy(update={"id": "address-book", "instruction": REWORDED})
    m = training.near_duplicate(reworded)
    assert m is not None and (m.other, m.signals) == ("eml-contacts", ("hidden", "workspace", "solution")), m
