"""What makes an export folder load in one call, and the verdict columns its rows carry.

`datasets.load_dataset(EXPORT_DIR)` reads the folder's README.md, a dataset card whose `configs` name the
data file (Parquet where it was written, else the JSONL), so neither the manifest (dataset.json) nor the
other copies of the rows are read as data. `datasets.load_from_disk(EXPORT_DIR)` reads dataset_dict.json, a
DatasetDict of one split, `train`, a relative link to hf/ (the rows are not stored twice). Both give
`{"train": Dataset}`. (A state.json at the top, which load_from_disk would read as a Dataset, makes
load_dataset refuse the folder.)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["verdict_columns", "write_loaders"]


def verdict_columns(store: Any, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each row that names a rollout, with its run, whether its verdict passed and its sub-scores (one per
    check, rubric rule or grade() criterion: name, score, weight), as the store holds them."""
    out = []
    for row in rows:
        rid = row.get("rollout_id")
        if not rid:
            out.append(row)
            continue
        rollout = store.rollout(rid) or {}
        verdict = store.verdict(rid, row.get("attempt")) or {}
        passed = verdict.get("passed", rollout.get("passed"))
        out.append({**row, "run_id": rollout.get("run_id"), "passed": None if passed is None else bool(passed),
                    "subscores": [{"name": s["name"], "score": s["score"], "weight": s["weight"]}
                                  for s in verdict.get("subscores") or []]})
    return out


def write_loaders(folder: Path, manifest: dict[str, Any]) -> list[str]:
    """README.md (and, with hf/, state.json and dataset_info.json) in `folder`; the names written."""
    files = manifest.get("files") or []
    data = next((f for f in ("data.parquet", "data.jsonl") if f in files), None)
    written = []
    if data is None and "hf" in files:
        data = "hf/*.arrow"
    if data is not None:
        card = [
            "---",
            "configs:",
            "- config_name: default",
            "  data_files:",
            "  - split: train",
            f"    path: {data}",
            "tags:",
            "- clawsdk",
            f"- {manifest.get('kind', 'dataset')}",
            "---",
            "",
            f"# {manifest.get('id', folder.name)}",
            "",
            f"A clawsdk export ({manifest.get('kind')}, {manifest.get('n_rows')} rows). Load it with "
            f"`datasets.load_dataset(\"{folder.name}\")` (the rows of `{data}`)"
            + (" or `datasets.load_from_disk(...)`, both `{\"train\": Dataset}`" if "hf" in files else "")
            + "; dataset.json is the manifest: the selection, the store and the content hash.",
            "",
        ]
        (folder / "README.md").write_text("\n".join(card))
        written.append("README.md")
    if (folder / "hf" / "state.json").is_file():
        (folder / "train").symlink_to("hf", target_is_directory=True)
        (folder / "dataset_dict.json").write_text(json.dumps({"splits": ["train"]}) + "\n")
        written += ["dataset_dict.json", "train"]
    return written
