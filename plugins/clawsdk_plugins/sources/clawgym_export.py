"""Write tasks in ClawGym's formats (task folders, syn_task.jsonl): the writer half of the ClawGym sources.

`clawsdk convert` reaches it through the task sources' `export` method (clawsdk.tasks.convert). Each format
keeps what it can hold. What ClawGym's formats have no field for (difficulty, tags,
limits, a reference solution, a verifier other than the default one) goes under a `clawsdk` key
that ClawGym's own tools ignore and clawsdk reads back, so native -> ClawGym -> native gives the
same task (the same Task.hash). A verifier ClawGym cannot run (native declarative checks,
PinchBench grade()) is refused with a message rather than exported without its verifier.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from clawsdk.tasks.convert import ConvertError
from clawsdk.tasks.model import CATEGORIES, File, Task
from clawsdk.tasks.native import task_folder
from clawsdk_plugins.sources import clawgym as cg


def _verifier_parts(task: Task) -> tuple[dict | None, dict | None, str]:
    """(clawgym spec, rubric spec, grading_type) of a task, or ConvertError."""
    v = task.verifier.model_dump(mode="json")
    if v["type"] == "clawgym":
        return v, None, "automated"
    if v["type"] == "rubric":
        return None, v, "llm_judge"
    if v["type"] == "hybrid":
        parts = v.get("parts") or []
        code = [p["verifier"] for p in parts if p.get("verifier", {}).get("type") == "clawgym"]
        judge = [p["verifier"] for p in parts if p.get("verifier", {}).get("type") == "rubric"]
        if len(code) == 1 and len(judge) == 1 and len(parts) == 2:
            return code[0], judge[0], "hybrid"
    raise ConvertError(f"task {task.id}: its verifier ({v['type']}) cannot be expressed in ClawGym's format, "
                       "which scores with reward/reward.sh and a rubric; export it as native instead")


def _rules(judge: dict | None) -> tuple[list[dict] | None, str | None]:
    if not judge:
        return None, None
    if judge.get("rules"):
        rules = []
        for r in judge["rules"]:
            r = {k: v for k, v in r.items() if not (k == "weight" and v == 1.0)
                 and not (k == "description" and v == "") and not (k == "scores" and v == {})}
            rules.append(r)
        return rules, None
    return None, judge.get("rubric")


def _extras(task: Task, rebuilt: Task) -> dict[str, Any]:
    """The fields a ClawGym record cannot carry, where they differ from what its reader rebuilds."""
    mine, theirs = task.model_dump(mode="json"), rebuilt.model_dump(mode="json")
    extras = {}
    for key in ("difficulty", "tags", "tools", "solution", "limits", "verifier", "category", "tool_policy",
                "tool_config"):
        if mine.get(key) != theirs.get(key):
            extras[key] = mine.get(key)
    meta = {k: v for k, v in task.metadata.items() if k not in ("clawgym", "clawgym_jsonl")}
    if meta:
        extras["metadata"] = meta
    return extras


def _reward_files(task: Task) -> list[File]:
    prefix = cg.REWARD_DIR + "/"
    outside = [f.path for f in task.hidden if not f.path.startswith(prefix)]
    if outside:
        raise ConvertError(f"task {task.id}: hidden files outside {prefix} have no place in ClawGym's format: "
                           f"{outside[:5]}")
    return list(task.hidden)


def clawgym_entry(task: Task) -> tuple[dict[str, Any], list[File], list[File]]:
    """(data_entry.json, input_files, reward files) of a task."""
    code, judge, grading = _verifier_parts(task)
    reward = _reward_files(task)
    original = dict(task.metadata.get("clawgym") or {})
    meta = dict(original.get("metadata") or {})
    # an inferred category goes back as the data had it (empty): reading infers it again
    meta["category"] = "" if task.provenance.get("category_inferred") else (task.category or "")
    meta["grading_type"] = grading
    rules, rubric = _rules(judge)
    meta.pop("rule", None)
    meta.pop("rules", None)
    if rules or rubric:
        meta["rule"] = rules if rules else rubric
    entry = {k: v for k, v in original.items() if k not in ("metadata", "clawsdk")}
    entry.update({"task_id": task.id, "user_query": task.instruction, "metadata": meta,
                  "input_mount_dir": (code or {}).get("mount_dir") or entry.get("input_mount_dir") or cg.MOUNT_DIR})
    return entry, list(task.workspace), reward


def _rebuild_folder(entry: dict, workspace: list[File], reward: list[File]) -> Task:
    """What the ClawGym folder reader makes of a record (without writing it)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "t"
        _write_folder(folder, entry, workspace, reward)
        return cg.load_folder_task(folder)


def _write_folder(folder: Path, entry: dict, workspace: list[File], reward: list[File]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "data_entry.json").write_text(json.dumps(entry, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    for base, files in (("input_files", workspace), ("", reward)):
        for f in files:
            target = folder / base / f.path if base else folder / f.path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(f.data)
            target.chmod(0o755 if f.executable else 0o644)
    (folder / "input_files").mkdir(exist_ok=True)


def write_clawgym_folder(task: Task, parent: str | Path) -> Path:
    """Write `task` as parent/<task id>/ in ClawGym's folder format."""
    entry, workspace, reward = clawgym_entry(task)
    extras = _extras(task, _rebuild_folder(entry, workspace, reward))
    if extras:
        entry["clawsdk"] = extras
    folder = task_folder(parent, task)
    _write_folder(folder, entry, workspace, reward)
    return folder


def _text_of(task: Task, f: File | None, field: str) -> str | None:
    """A reward file's text for a jsonl field, or ConvertError naming the task and file: replacing its
    bytes that are not UTF-8 would change the script (and the task's hash) without a word."""
    if f is None:
        return None
    try:
        return f.data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConvertError(f"task {task.id}: {f.path} is not UTF-8 text; a syn_task.jsonl line holds it as text "
                           f"({field}); export it as clawgym folders or native instead") from None


def jsonl_record(task: Task) -> dict[str, Any]:
    """One syn_task.jsonl line for `task`."""
    code, judge, grading = _verifier_parts(task)
    reward = {f.path: f for f in _reward_files(task)}
    check = reward.pop(f"{cg.REWARD_DIR}/check.py", None)
    sh = reward.pop(f"{cg.REWARD_DIR}/reward.sh", None)
    if reward:
        raise ConvertError(f"task {task.id}: a syn_task.jsonl line holds only check.py (hook_code) and the "
                           f"standard reward.sh; these hidden files have no place: {sorted(reward)[:5]}")
    if code and check is None:
        raise ConvertError(f"task {task.id}: no reward/check.py to write as hook_code")
    record = dict(task.metadata.get("clawgym_jsonl") or {})
    record.pop("rule", None)
    record.pop("rules", None)
    record["task_id"] = task.id
    record["prompt"] = task.instruction
    check_text, sh_text = _text_of(task, check, "hook_code"), _text_of(task, sh, "reward_sh")
    if check_text is not None:
        record["hook_code"] = check_text
    if sh_text is not None and sh_text != cg.REWARD_SH:
        record["reward_sh"] = sh_text
    files: list[dict[str, Any]] = []
    for f in task.workspace:
        if f.text is not None:
            files.append({"file_path": f.path, "content": f.text})
        else:
            files.append({"file_path": f.path, "content": f.b64, "encoding": "base64"})
    record["input_files"] = files
    rules, rubric = _rules(judge)
    if rules:
        record["rules"] = rules
    elif rubric:
        record["rule"] = rubric
    record.setdefault("origin_template", task.provenance.get("origin_template", ""))
    if task.category and not task.provenance.get("category_inferred") and "category" not in record \
            and "macro_category" not in record:
        record["macro_category" if task.category in CATEGORIES else "category"] = task.category
    if grading != "hybrid" or "grading_type" in record:
        record["grading_type"] = grading
    rebuilt = cg.load_jsonl_record(json.loads(json.dumps(record)), "(export)", task.id)
    extras = _extras(task, rebuilt)
    if extras:
        record["clawsdk"] = extras
    return record


def write_jsonl(tasks: Iterable[Task], path: str | Path) -> tuple[int, list[ConvertError]]:
    """Write tasks as a syn_task.jsonl; tasks it cannot hold are returned as errors, not written.

    The lines go to a temporary sibling that replaces `path` only when at least one task was written:
    an existing file is never emptied by an export that could hold none of its tasks, nor cut short by
    one that was interrupted."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    n, errors = 0, []
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.partial")  # "x": made here, umask's mode
    try:
        with tmp.open("x", encoding="utf-8") as out:
            for task in tasks:
                try:
                    line = json.dumps(jsonl_record(task), ensure_ascii=False)
                except ConvertError as e:
                    errors.append(e)
                    continue
                out.write(line + "\n")
                n += 1
        if n:
            os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return n, errors


def write_folders(tasks: Iterable[Task], dest: str | Path) -> tuple[int, list[ConvertError]]:
    """Write tasks as ClawGym folders under dest; tasks it cannot hold are returned as errors, not written."""
    n, errors = 0, []
    for task in tasks:
        try:
            write_clawgym_folder(task, dest)
            n += 1
        except ConvertError as e:
            errors.append(e)
    return n, errors


__all__ = ["clawgym_entry", "jsonl_record", "write_clawgym_folder", "write_folders", "write_jsonl"]
