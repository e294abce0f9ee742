"""Every export folder loads with one call of `datasets.load_dataset` (and `load_from_disk`), and its rows carry
their verdict (passed, per-check sub-scores) and lineage (run, rollout, attempt, task hash)."""

from __future__ import annotations

import datasets
import pytest

from clawsdk.data.export import export_preferences, export_rl, export_sft, load_rows
from clawsdk.data.select import Selection, load_candidates, select
from clawsdk.store.store import Store
from tests.data.test_data_select_export import hello_task

datasets.disable_progress_bars()


@pytest.mark.parametrize("formats", [("jsonl", "hf", "parquet"), ("jsonl",), ("hf",)], ids=["all", "jsonl", "hf"])
def test_load_dataset_on_an_sft_export_folder_gives_its_rows(store_path, tmp_path, formats):
    with Store(store_path) as store:
        exp = export_sft(store, select(store, Selection()), tmp_path / "out", name="hello", formats=formats)
        verdicts = {r["id"]: store.verdict(r["id"]) for r in store.query("SELECT id FROM rollouts")}
    ds = datasets.load_dataset(str(exp.path), split="train")
    assert ds.num_rows == exp.n_rows == 3
    for row in ds:
        verdict = verdicts[row["rollout_id"]]
        assert row["passed"] is True and row["run_id"] in ("oracle-run", "model-good")
        assert row["subscores"] == [{"name": s["name"], "score": s["score"], "weight": s["weight"]}
                                    for s in verdict["subscores"]]
        assert row["subscores"] and row["task_hash"] and row["attempt"] == 0
    if "hf" in formats:
        on_disk = datasets.load_from_disk(str(exp.path))["train"]
        assert on_disk.num_rows == 3 and sorted(on_disk["rollout_id"]) == sorted(ds["rollout_id"])
    if "jsonl" in formats:  # the rows on disk carry the same columns
        assert {r["rollout_id"]: r["passed"] for r in load_rows(exp.path)} == dict(zip(ds["rollout_id"],
                                                                                        ds["passed"], strict=True))


def test_a_failed_rollout_carries_its_failing_check(store_path, tmp_path):
    with Store(store_path) as store:
        exp = export_sft(store, select(store, Selection(min_reward=None, runs=["model-bad"])), tmp_path / "o",
                         name="bad")
    (row,) = datasets.load_dataset(str(exp.path), split="train")
    assert row["passed"] is False and row["reward"] == 0
    assert [s["score"] for s in row["subscores"]] == [0.0]  # text_equals failed


def test_preference_and_rl_exports_load_in_one_call_too(store_path, tmp_path):
    with Store(store_path) as store:
        pool = Selection(min_reward=None, failure_kinds=[])
        pref = export_preferences(store, [c for c in load_candidates(store, pool) if not c.reason], tmp_path / "p",
                                  name="pairs", selection=pool.to_dict())
        rl = export_rl(store, [hello_task("hello-a")], tmp_path / "r", name="prompts")
    pairs = datasets.load_dataset(str(pref.path), split="train")
    assert pairs.num_rows == pref.n_rows >= 1 and {"chosen", "rejected"} <= set(pairs.column_names)
    prompts = datasets.load_dataset(str(rl.path), split="train")
    assert prompts.num_rows == 1 and datasets.load_from_disk(str(rl.path))["train"].num_rows == 1
