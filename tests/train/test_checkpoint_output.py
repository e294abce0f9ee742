"""`clawsdk train -o` never replaces a checkpoint or the base model: a used or base folder is refused
before training, and a checkpoint reaches its folder whole (renamed from a hidden sibling) before the
store records it."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from clawsdk.cli import cli as cli_main
from clawsdk.store.store import Store
from tests.train.test_train_sft_grpo import sft_export


def _digests(folder: Path) -> dict[str, str]:
    return {str(f.relative_to(folder)): hashlib.sha256(f.read_bytes()).hexdigest()
            for f in sorted(folder.rglob("*")) if f.is_file()}


def _train(db: Path, model: Path, out: Path):
    return CliRunner().invoke(cli_main, [
        "train", "sft", "--db", str(db), "--dataset", "hello", "--model", f"transformers:{model}",
        "--out", str(out), "--max-steps", "1", "--batch-size", "1", "--opt", "threads=1",
    ])


def _records(db: Path, out: Path) -> list:
    with Store(db) as store:
        return store.query("SELECT id FROM checkpoints WHERE path = ?", [str(out.resolve())])


@pytest.mark.timeout(300)
def test_a_second_run_into_the_same_folder_is_refused_and_the_first_checkpoint_kept(tiny_model, tmp_path):
    db, _ = sft_export(tmp_path, n=1)
    out = tmp_path / "ckpt"
    res = _train(db, tiny_model, out)
    assert res.exit_code == 0, res.output
    first = _digests(out)
    assert "model.safetensors" in first and "clawsdk-checkpoint.json" in first
    assert len(_records(db, out)) == 1
    assert [p.name for p in tmp_path.iterdir() if ".partial-" in p.name] == []  # renamed into place

    res = _train(db, tiny_model, out)
    assert res.exit_code == 2 and str(out) in res.output and "not empty" in res.output, res.output
    assert _digests(out) == first
    assert len(_records(db, out)) == 1


@pytest.mark.timeout(300)
def test_the_base_models_folder_is_refused_and_its_weights_unchanged(tiny_model, tmp_path):
    db, _ = sft_export(tmp_path, n=1)
    base = Path(shutil.copytree(tiny_model, tmp_path / "base"))  # the shared tiny model stays unharmed
    before = _digests(base)
    for out in (base, base / "sft"):
        res = _train(db, base, out)
        assert res.exit_code == 2 and "base model" in res.output, res.output
        assert _digests(base) == before
    with Store(db) as store:
        assert store.query("SELECT id FROM checkpoints") == []
