"""An export's rows are checked against its manifest: `n_rows` and `content_hash` (the sha256 of data.jsonl as
written). A file cut short, added to or edited after the export is refused, naming the file, the field and the
numbers, instead of training on part of a dataset whose id the checkpoint then claims in full."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from clawsdk.cli import cli as cli_main
from clawsdk.data.export import export_sft, load_hf, load_rows
from clawsdk.data.select import Selection, select
from clawsdk.runtime.runner import run_sync
from clawsdk.store.store import Store
from tests.data.test_data_select_export import hello_task


@pytest.fixture(scope="module")
def store_path(tmp_path_factory) -> Path:
    """Oracle rollouts of two tasks, two samples each: four SFT rows when nothing is deduplicated."""
    db = tmp_path_factory.mktemp("integrity") / "store.db"
    run_sync([hello_task("hello-a"), hello_task("hello-b", "bye")], agent="oracle", samples=2, run_id="oracle",
             db=db)
    return db


def exported(store_path: Path, out: Path, formats=("jsonl",)) -> Path:
    with Store(store_path) as store:
        exp = export_sft(store, select(store, Selection(dedup=False)), out, name="hello", formats=formats)
    assert exp.n_rows == 4
    return exp.path


def lines(folder: Path) -> list[str]:
    return (folder / "data.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)


def manifest(folder: Path, **change) -> None:
    m = json.loads((folder / "dataset.json").read_text())
    m.update(change)
    for key in [k for k, v in change.items() if v is ...]:
        del m[key]
    (folder / "dataset.json").write_text(json.dumps(m))


def refused(folder: Path, *expected: str) -> str:
    with pytest.raises(ValueError, match="export the dataset again") as err:
        load_rows(folder)
    text = str(err.value)
    for part in (str(folder / "data.jsonl"), "export the dataset again", *expected):
        assert part in text, text
    return text


def test_an_untouched_export_loads(store_path, tmp_path):
    folder = exported(store_path, tmp_path)
    rows = load_rows(folder)
    assert len(rows) == 4 and all(r["messages"] for r in rows)


def test_a_file_cut_to_its_first_row_is_refused(store_path, tmp_path):
    folder = exported(store_path, tmp_path)
    (folder / "data.jsonl").write_text(lines(folder)[0], encoding="utf-8")
    refused(folder, "content_hash", "dataset.json", "1 rows in the file, n_rows 4")


@pytest.mark.parametrize("newline", ["", "\n"])
def test_a_file_cut_mid_row_is_refused(store_path, tmp_path, newline):
    folder = exported(store_path, tmp_path)
    rows = lines(folder)
    (folder / "data.jsonl").write_text(rows[0] + rows[1][: len(rows[1]) // 2] + newline, encoding="utf-8")
    refused(folder, "content_hash", "2 rows in the file, n_rows 4")


def test_an_extra_row_is_refused(store_path, tmp_path):
    folder = exported(store_path, tmp_path)
    rows = lines(folder)
    (folder / "data.jsonl").write_text("".join(rows + rows[:1]), encoding="utf-8")
    refused(folder, "content_hash", "5 rows in the file, n_rows 4")


def test_an_edited_row_of_the_same_count_is_refused(store_path, tmp_path):
    folder = exported(store_path, tmp_path)
    rows = lines(folder)
    assert "hello world" in rows[0]
    rows[0] = rows[0].replace("hello world", "HELLO WORLD")
    (folder / "data.jsonl").write_text("".join(rows), encoding="utf-8")
    text = refused(folder, "content_hash", "4 rows in the file, n_rows 4")
    assert "changed after the export" in text


def test_without_a_content_hash_the_row_count_is_still_checked(store_path, tmp_path):
    folder = exported(store_path, tmp_path)
    manifest(folder, content_hash=...)
    (folder / "data.jsonl").write_text(lines(folder)[0], encoding="utf-8")
    refused(folder, "holds 1 rows", str(folder / "dataset.json"), "n_rows 4")


def test_a_manifest_without_the_fields_still_loads(store_path, tmp_path):
    folder = exported(store_path, tmp_path)
    manifest(folder, content_hash=..., n_rows=...)
    (folder / "data.jsonl").write_text("".join(lines(folder)[:3]), encoding="utf-8")
    assert len(load_rows(folder)) == 3


def test_an_hf_only_export_checks_its_row_count(store_path, tmp_path):
    folder = exported(store_path, tmp_path, formats=("hf",))
    assert not (folder / "data.jsonl").exists()
    assert len(load_rows(folder)) == 4 and len(load_hf(folder)) == 4
    manifest(folder, n_rows=6)
    for load in (load_rows, load_hf):
        with pytest.raises(ValueError, match=r"hf: holds 4 rows, but .*dataset.json says n_rows 6.*export the "
                                             r"dataset again"):
            load(folder)
    manifest(folder, n_rows=...)
    assert len(load_rows(folder)) == 4


def test_an_export_without_data_files_damaged_files_or_a_fifo_is_refused_naming_the_file(store_path, tmp_path):
    """No data file beside dataset.json was `RecursionError (a bug in clawsdk)`: load_rows and load_hf called
    each other; a row nested 100,000 deep the same; a garbage data.parquet gave pyarrow's words, naming no
    file; a fifo at data.jsonl or dataset.json blocked for ever."""
    import os

    folder = exported(store_path, tmp_path / "none")
    (folder / "data.jsonl").unlink()
    for load in (load_rows, load_hf):
        with pytest.raises(ValueError, match=r"none.*: no data files \(data.jsonl, data.parquet or hf/\)"):
            load(folder)
    folder = exported(store_path, tmp_path / "deep")
    (folder / "data.jsonl").write_text("[" * 100_000 + "]" * 100_000 + "\n", encoding="utf-8")
    manifest(folder, content_hash=..., n_rows=...)
    with pytest.raises(ValueError, match=r"data.jsonl:1: not a row clawsdk exports \(nested too deeply\)"):
        load_rows(folder)
    folder = exported(store_path, tmp_path / "parquet", formats=("parquet",))
    (folder / "data.parquet").write_bytes(b"PAR1 not really parquet PAR1")
    with pytest.raises(ValueError, match=r"data.parquet: cannot be read .*export the dataset again"):
        load_hf(folder)
    folder = exported(store_path, tmp_path / "fifo")
    (folder / "data.jsonl").unlink()
    os.mkfifo(folder / "data.jsonl")
    with pytest.raises(ValueError, match=r"data.jsonl: cannot be read \(data.jsonl is not a regular file\)"):
        load_rows(folder)
    (folder / "dataset.json").unlink()
    os.mkfifo(folder / "dataset.json")
    with pytest.raises(ValueError, match=r"dataset.json: not a regular file"):
        load_rows(folder)


def test_train_refuses_a_cut_export_before_loading_a_model(store_path, tmp_path):
    folder = exported(store_path, tmp_path / "ds")
    (folder / "data.jsonl").write_text(lines(folder)[0], encoding="utf-8")
    res = CliRunner().invoke(cli_main, ["train", "sft", "--db", str(store_path), "-d", str(folder),
                                        "--model", f"transformers:{tmp_path / 'no-such-model'}",
                                        "--out", str(tmp_path / "out")])
    text = " ".join(res.output.split())
    assert res.exit_code == 2, res.output
    assert "content_hash" in text and "1 rows in the file, n_rows 4" in text, text
    assert "no-such-model" not in text and not (tmp_path / "out").exists()
