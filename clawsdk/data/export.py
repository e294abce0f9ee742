"""Export selected trajectories: SFT conversations, preference pairs, RL prompt sets.

Each export is a folder NAME-vN/ holding `dataset.json` (the manifest, with `format_version`),
`data.jsonl`, and, when asked, `hf/` (datasets.save_to_disk) and `data.parquet`; and a row in
the store's `datasets` table with one `dataset_rows` row per rollout (or task) it holds.

Layout of an SFT row (style "openai", the default):
    messages   OpenAI chat messages: system, user, assistant (content and/or tool_calls with
               arguments as a JSON string), tool (tool_call_id, name, content)
    tools      the OpenAI function specs offered (a list in JSONL, a JSON string in hf/ and
               Parquet, which TRL's SFTTrainer reads as is)
    rollout_id, attempt, task_id, task_hash, reward, source, agent, model
Style "text" renders the messages in clawsdk's tool-call format (clawsdk.models.toolcalls),
plain system/user/assistant text that any chat template can train on; no tools column.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clawsdk.data import hub, lineage
from clawsdk.data.rows import REDO as _REDO
from clawsdk.data.rows import check_row, row_problem
from clawsdk.data.select import Candidate, SelectionResult
from clawsdk.data.tokenize import CONTROL_TOKENS, control_tokens, find_control_token
from clawsdk.data.trajectory import PromptStyle, Trajectory, tool_listing
from clawsdk.models import toolcalls

__all__ = [
    "FORMATS",
    "FORMAT_VERSION",
    "ROW_FORMATS",
    "STYLES",
    "EmptyExport",
    "Export",
    "drop_nulls",
    "explain_empty_selection",
    "export_preferences",
    "export_rl",
    "export_sft",
    "load_hf",
    "check_row",
    "load_rows",
    "read_manifest",
    "row_problem",
]

FORMAT_VERSION = 1
FORMATS = ("jsonl", "hf", "parquet")
#: formats that are datasets of their own, written by their module (`--format NAME`): name -> "module:function"
#: formats that are a dataset of their own (module:function(store, result, out, name=, formats=, tokenizer=))
ROW_FORMATS = {"rl": "clawsdk.data.rl:export_tokens", "atif": "clawsdk.data.atif:export_atif"}
STYLES = ("openai", "text")
MESSAGE_KEYS = ("role", "content", "tool_calls", "tool_call_id", "name")


#: the context SFT rows are checked against when no tokenizer says otherwise (TRL truncates past it)
DEFAULT_MAX_LENGTH = 2048


class EmptyExport(ValueError):
    """Nothing to export; the message says which rule left nothing. No dataset is written."""


@dataclass
class Export:
    dataset_id: str
    path: Path
    n_rows: int
    kind: str
    files: list[str]
    #: SFT: rows longer than max_length tokens (exact with a tokenizer, else estimated), and the longest
    too_long: int = 0
    longest: int = 0
    max_length: int | None = None
    length_basis: str = ""

    def length_warning(self) -> str | None:
        """One line for the user when rows are past max_length, else None."""
        if not self.too_long:
            return None
        return (f"{self.too_long} of {self.n_rows} conversations are longer than max_length={self.max_length} "
                f"tokens ({self.length_basis}; the longest {self.longest}): a trainer cut at that length "
                f"(TRL's SFTConfig.max_length) truncates them. Raise max_length, or leave them out with "
                f"`--max-tokens`")


def explain_empty_selection(result: SelectionResult) -> str:
    """Why a selection kept nothing: no rollouts at all, or the rules that dropped them, with counts."""
    if not result.candidates:
        runs = ", ".join(result.selection.runs) or "any run"
        return f"no finished rollouts in {runs} to select from"
    reasons = ", ".join(f"{k} {v}" for k, v in sorted(result.reasons().items(), key=lambda kv: -kv[1]))
    return f"no rollout passed the selection rules: {len(result.candidates)} dropped by rule ({reasons})"


def _check(formats: tuple[str, ...] | list[str], style: str) -> None:
    bad = [f for f in formats if f not in FORMATS]
    if bad or not formats:
        raise ValueError(f"export formats {bad or '(none)'}: choose from {', '.join(FORMATS)}")
    if style not in STYLES:
        raise ValueError(f"export style {style!r}: one of {', '.join(STYLES)}")


def drop_nulls(value: Any) -> Any:
    """Nested data with None-valued keys removed: what Arrow pads a struct with reads back as the original."""
    if isinstance(value, dict):
        return {k: drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [drop_nulls(v) for v in value]
    return value


def _styled(messages: list[dict], tools: list[dict], style: str) -> tuple[list[dict], list[dict] | None]:
    if style == "text":
        return toolcalls.render_messages(messages, tools), None
    return messages, tools


def _arrow_row(row: dict[str, Any]) -> dict[str, Any]:
    """The same row with a fixed shape for Arrow: every message has every key, tools as a JSON string."""
    out = dict(row)
    for key in ("messages", "prompt", "chosen", "rejected"):
        if key in out and isinstance(out[key], list):
            out[key] = [{k: m.get(k) for k in MESSAGE_KEYS} for m in out[key]]
    if "tools" in out:
        out["tools"] = json.dumps(out["tools"], ensure_ascii=False) if out["tools"] is not None else None
    return out


def _write(
    rows: list[dict[str, Any]], folder: Path, formats: tuple[str, ...] | list[str]
) -> tuple[list[str], str]:
    folder.mkdir(parents=True, exist_ok=True)
    data = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows).encode()
    (folder / "data.jsonl").write_bytes(data)
    files = ["data.jsonl"]
    if "hf" in formats or "parquet" in formats:
        import datasets

        datasets.disable_progress_bars()
        ds = (
            datasets.Dataset.from_list([_arrow_row(r) for r in rows])
            if rows
            else datasets.Dataset.from_dict({})
        )
        if "hf" in formats:
            ds.save_to_disk(str(folder / "hf"))
            files.append("hf")
        if "parquet" in formats:
            ds.to_parquet(str(folder / "data.parquet"))
            files.append("data.parquet")
    if "jsonl" not in formats:
        (folder / "data.jsonl").unlink()
        files.remove("data.jsonl")
    return files, hashlib.sha256(data).hexdigest()


def _finish(
    store: Any,
    *,
    name: str,
    kind: str,
    out: str | Path,
    rows: list[dict],
    lineage_rows: list[tuple],
    formats: tuple[str, ...] | list[str],
    selection: dict | None,
    extra: dict | None = None,
    write_extra: Any = None,
) -> Export:
    if not name or "/" in name or "@" in name:
        raise ValueError(f"dataset name {name!r}: use letters, digits, '-' or '_' (no '/' or '@')")
    version = lineage.next_version(store, name)
    dataset_id = f"{name}@v{version}"
    store_path = str(Path(store.path).resolve())
    folder = Path(out) / f"{name}-v{version}"
    # The version comes from this store only, so the folder may hold another store's export of the same
    # name, or anything else: never remove what this store's export did not make.
    own_leftover = folder.exists() and _made_by(folder, dataset_id, store_path)
    if folder.exists() and not own_leftover:
        raise FileExistsError(
            f"{folder} exists (from another store or not an export); choose another --out or --name"
        )
    # Everything is written into a hidden sibling and renamed into place at the end, so an interrupted
    # export leaves no half-written NAME-vN behind.
    Path(out).mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f".{folder.name}.partial-", dir=out))
    rows = hub.verdict_columns(store, rows)  # lineage, passed and the sub-scores, on every rollout's row
    try:
        files, digest = _write(rows, partial, formats)
        if write_extra is not None:  # a format of its own files (clawsdk.data.atif)
            files += write_extra(partial)
        manifest = {
            "format_version": FORMAT_VERSION,
            "id": dataset_id,
            "name": name,
            "version": version,
            "kind": kind,
            "n_rows": len(rows),
            "files": files,
            "content_hash": digest,
            "selection": selection,
            "store": store_path,
            **(extra or {}),
        }
        (partial / "dataset.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
        hub.write_loaders(partial, manifest)  # datasets.load_dataset / load_from_disk on the folder itself
        if own_leftover:
            shutil.rmtree(folder)  # this store's export of this very version that never reached the store
        partial.rename(folder)  # fails, rather than replaces, if something non-empty appeared meanwhile
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    try:
        lineage.record_dataset(
            store,
            name=name,
            version=version,
            kind=kind,
            format_version=FORMAT_VERSION,
            path=str(folder.resolve()),
            n_rows=len(rows),
            content_hash=digest,
            selection=selection,
            rows=lineage_rows,
        )
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)  # ours, just made: the store does not know it
        raise
    return Export(dataset_id=dataset_id, path=folder, n_rows=len(rows), kind=kind, files=files)


def _made_by(folder: Path, dataset_id: str, store_path: str) -> bool:
    """Whether `folder` is this store's export of `dataset_id` (interrupted before the store recorded it)."""
    try:
        manifest = json.loads((folder / "dataset.json").read_text())
    except (OSError, ValueError):
        return False
    return (isinstance(manifest, dict) and manifest.get("id") == dataset_id
            and manifest.get("store") == store_path)


def _meta(c: Candidate) -> dict[str, Any]:
    r, t = c.rollout, c.trajectory
    return {
        "rollout_id": r["id"],
        "attempt": r["attempt"],
        "task_id": r["task_id"],
        "task_hash": r["task_hash"],
        "reward": c.reward,
        "source": t.source if t else None,
        "agent": r.get("agent"),
        "model": r.get("model"),
    }


def export_sft(
    store: Any,
    result: SelectionResult,
    out: str | Path,
    *,
    name: str,
    formats: tuple[str, ...] | list[str] = FORMATS,
    style: str = "openai",
    max_length: int | None = None,
    tokenizer: Any = None,
) -> Export:
    """The kept trajectories as SFT conversations. Rows longer than `max_length` tokens (default: the
    tokenizer's context window, else 2048) are counted in `Export.too_long`: exactly with `tokenizer`
    (as clawsdk and TRL render them), else estimated at 4 characters a token. A conversation that holds a special
    token of `tokenizer` as text is left out (`control_tokens: ...`): the tokenizer would read it as that token.
    Raises EmptyExport (saying which rules dropped what) when the selection kept nothing."""
    _check(formats, style)
    if tokenizer is not None:
        tokens = control_tokens(tokenizer)
        for c in result.kept:
            found = find_control_token({"messages": c.traj.messages, "tools": c.traj.tools}, tokens)
            if found:
                whose = "" if found[0] in CONTROL_TOKENS else " (a special token of the tokenizer)"
                c.keep, c.reason = False, f"control_tokens: {found[0]!r} in {found[1]}{whose}"
    if not result.kept:
        raise EmptyExport(explain_empty_selection(result))
    if max_length is None:
        max_length = _context_of(tokenizer) or DEFAULT_MAX_LENGTH
    rows, lin, lengths = [], [], []
    for i, c in enumerate(result.kept):
        messages, tools = _styled(c.traj.messages, c.traj.tools, style)
        row = {"messages": messages, **_meta(c)}
        if tools is not None:
            row["tools"] = tools
        rows.append(row)
        lin.append((i, "example", c.rollout["id"], c.rollout["attempt"], c.rollout["task_hash"]))
        lengths.append(_length(c, tokenizer))
    exp = _finish(
        store,
        name=name,
        kind="sft",
        out=out,
        rows=rows,
        lineage_rows=lin,
        formats=formats,
        selection=result.selection.to_dict(),
        extra={"style": style, "max_length": max_length, "too_long": sum(n > max_length for n in lengths),
               "dropped": result.reasons()},
    )
    exp.too_long = sum(n > max_length for n in lengths)
    exp.longest = max(lengths)
    exp.max_length = max_length
    exp.length_basis = "counted with the tokenizer" if tokenizer is not None else "estimated at 4 characters a token"
    return exp


def _context_of(tokenizer: Any) -> int | None:
    # tokenizers often say 1e30 ("no limit"); the model config's window is what matters then
    n = getattr(tokenizer, "clawsdk_context_window", None) or getattr(tokenizer, "model_max_length", None)
    return int(n) if n and n < 1_000_000 else None


def _length(c: Candidate, tokenizer: Any) -> int:
    if tokenizer is None:
        return c.tokens
    from clawsdk.data.tokenize import encode_chat

    return len(encode_chat(tokenizer, c.traj.messages, c.traj.tools)[0])


def export_preferences(
    store: Any,
    candidates: list[Candidate],
    out: str | Path,
    *,
    name: str,
    min_chosen: float = 1.0,
    margin: float = 0.01,
    pairs_per_task: int = 1,
    formats: tuple[str, ...] | list[str] = FORMATS,
    style: str = "openai",
    selection: dict | None = None,
) -> Export:
    """Chosen/rejected pairs from the same task: the best trajectory (reward >= min_chosen) against the
    worst ones that scored at least `margin` lower. Both share the prompt (system + user turn) and the
    tools: rollouts the model was shown differently (other agents) are not paired. `margin` is above 0: at 0
    the best rollout was paired with itself, chosen and rejected the same trajectory."""
    _check(formats, style)
    if not margin > 0:
        raise ValueError(f"margin must be above 0 (got {margin}): a pair needs a rejected rollout that scored lower")
    by_task: dict[str, list[Candidate]] = defaultdict(list)
    for c in candidates:
        if (
            c.trajectory is not None
            and c.rollout.get("scored")
            and c.reward is not None
            and c.trajectory.n_assistant_turns
        ):
            by_task[c.rollout["task_hash"]].append(c)
    rows: list[dict[str, Any]] = []
    lin = []
    with_chosen = apart = 0
    for task_hash, group in by_task.items():
        group.sort(key=lambda c: (-c.score, c.traj.n_assistant_turns, c.tokens))
        if group[0].score < min_chosen:
            continue
        with_chosen += 1
        # a row has one prompt and one tool list: a rejected answer given to another prompt, or calling
        # tools the row does not offer, would teach the model about a conversation it never sees
        shown: dict[str, list[Candidate]] = defaultdict(list)
        for c in group:  # each keeps the order of `group`, the best first
            shown[_prompt_key(c.traj)].append(c)
        pairs = [(g[0], c) for g in shown.values() if g[0].score >= min_chosen
                 for c in reversed(g) if c is not g[0] and c.score <= g[0].score - margin]
        if not pairs and group[-1].score <= group[0].score - margin:
            apart += 1
        for best, c in pairs[:pairs_per_task]:
            chosen, tools = _styled(best.traj.messages, best.traj.tools, style)
            rejected, _ = _styled(c.traj.messages, c.traj.tools, style)
            row = {
                "prompt": chosen[: _n_prompt(chosen)],
                "chosen": chosen[_n_prompt(chosen) :],
                "rejected": rejected[_n_prompt(rejected) :],
                "task_id": best.rollout["task_id"],
                "task_hash": task_hash,
                "chosen_rollout_id": best.rollout["id"],
                "rejected_rollout_id": c.rollout["id"],
                "chosen_reward": best.score,
                "rejected_reward": c.score,
            }
            if tools is not None:
                row["tools"] = tools
            i = len(rows)
            rows.append(row)
            lin += [
                (i, "chosen", best.rollout["id"], best.rollout["attempt"], task_hash),
                (i, "rejected", c.rollout["id"], c.rollout["attempt"], task_hash),
            ]
    if not rows:
        raise EmptyExport(_no_pairs(candidates, by_task, with_chosen, apart, min_chosen, margin))
    return _finish(
        store,
        name=name,
        kind="preference",
        out=out,
        rows=rows,
        lineage_rows=lin,
        formats=formats,
        selection=selection,
        extra={"style": style, "min_chosen": min_chosen, "margin": margin},
    )


def _n_prompt(messages: list[dict]) -> int:
    """How many messages come before the first assistant turn: the prompt."""
    return next(i for i, m in enumerate(messages) if m["role"] == "assistant")


def _prompt_key(t: Trajectory) -> str:
    """What the model was shown before its first turn: the prompt messages and the tools."""
    return json.dumps([t.messages[: _n_prompt(t.messages)], t.tools], sort_keys=True, ensure_ascii=False)


def _no_pairs(candidates: list[Candidate], by_task: dict[str, list[Candidate]], with_chosen: int, apart: int,
              min_chosen: float, margin: float) -> str:
    """Which rule left no preference pair, with the counts behind it."""
    if not candidates:
        return "no preference pairs: there are no finished rollouts to pair"
    if not by_task:
        return (f"no preference pairs: none of the {len(candidates)} rollouts is a scored one with an assistant "
                f"turn (infrastructure failures are unscored; a pair needs two scored conversations)")
    n_tasks = len(by_task)
    if not with_chosen:
        best = max(c.score for group in by_task.values() for c in group)
        return (f"no preference pairs: no task had a rollout scoring at least --min-chosen {min_chosen} "
                f"({n_tasks} tasks; the best reward was {best:.2f})")
    if apart:
        return (f"no preference pairs: in {apart} of {n_tasks} tasks the passing and the failing rollouts "
                f"(at least --margin {margin} lower) were made with different prompts or tools (by different "
                f"agents), and a pair needs one prompt and one tool list for both: run more samples of one "
                f"agent, so that it has both a passing and a failing rollout")
    single = sum(1 for g in by_task.values() if len(g) == 1)
    return (f"no preference pairs: no task had both a passing (reward >= {min_chosen}) and a failing rollout "
            f"(at least --margin {margin} lower): {with_chosen} of {n_tasks} tasks had a passing rollout, and "
            f"every other rollout of theirs scored as well"
            + (f" ({single} tasks have one scored rollout only: run more --samples)" if single else ""))


def export_rl(
    store: Any,
    tasks: list[Any],
    out: str | Path,
    *,
    name: str,
    style: PromptStyle | None = None,
    formats: tuple[str, ...] | list[str] = FORMATS,
) -> Export:
    """An RL prompt set: per task, the opening prompt the agent sees and a reference to the task in the
    store (its hash). No solution, no hidden files: the trainer runs the task in a sandbox to score."""
    _check(formats, "openai")
    if not tasks:
        raise EmptyExport("no tasks for the RL prompt set (every task was held out, or the run has none)")
    style = style or PromptStyle()
    with store.transaction():
        for task in tasks:
            store.upsert_task(task)
    rows, lin = [], []
    for i, task in enumerate(tasks):
        tools, instructions = tool_listing(task)
        tools = list(tools)
        if style.finish_tool and "finish" not in {t["function"]["name"] for t in tools}:
            from clawsdk.models.prompt import FINISH_TOOL

            tools.append(FINISH_TOOL)
        system = "\n\n".join(
            [style.resolved_system_prompt().strip()]
            + [f"## {s}\n{t.strip()}" for s, t in instructions.items()]
        )
        rows.append(
            {
                "prompt": [
                    {"role": "system", "content": system},
                    {"role": "user", "content": task.instruction},
                ],
                "tools": tools,
                "task_id": task.id,
                "task_hash": task.hash,
                "category": task.category,
                "difficulty": task.difficulty,
            }
        )
        lin.append((i, "task", None, None, task.hash))
    return _finish(
        store,
        name=name,
        kind="rl",
        out=out,
        rows=rows,
        lineage_rows=lin,
        formats=formats,
        selection={"tasks": [t.id for t in tasks]},
        extra={"style": "openai"},
    )


def read_manifest(path: str | Path) -> dict[str, Any]:
    """An export's manifest; refuses a layout newer than this clawsdk knows, and one it cannot read, naming
    the file and the field."""
    folder = Path(path)
    if folder.name == "dataset.json":
        folder = folder.parent
    file = folder / "dataset.json"
    if not file.exists():
        raise FileNotFoundError(f"{folder} is not a clawsdk dataset export (no dataset.json)")
    redo = "export the dataset again with `clawsdk data export`"
    if not file.is_file():  # a fifo would block the read for ever
        raise ValueError(f"{file}: not a regular file (a fifo, socket or device); {redo}")
    try:
        manifest = json.loads(file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        where = f"line {e.lineno}, column {e.colno}"
        raise ValueError(f"{file}: not valid JSON ({where}: {e.msg}); {redo}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"{file}: cannot be read ({e}); {redo}") from None
    if not isinstance(manifest, dict):
        raise ValueError(f"{file}: a dataset manifest is a JSON object, not a {type(manifest).__name__}; "
                         f"{redo}")
    version = manifest.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ValueError(f"{file}: format_version {version!r} is not a version number (1 and up); {redo}")
    if version > FORMAT_VERSION:
        raise ValueError(
            f"{file}: format_version {version!r} is newer than this clawsdk reads ({FORMAT_VERSION}); "
            f"upgrade clawsdk"
        )
    for key in ("id", "kind"):
        if not isinstance(manifest.get(key), str) or not manifest[key]:
            raise ValueError(f"{file}: {key}: missing or not a string ({manifest.get(key)!r}); {redo}")
    manifest["path"] = str(folder)
    return manifest


def _check_count(manifest: dict[str, Any], n: int, where: Path, what: str) -> None:
    """Refuse rows that are not as many as the manifest's `n_rows` (a manifest without it is not checked)."""
    want = manifest.get("n_rows")
    if isinstance(want, int) and not isinstance(want, bool) and n != want:
        raise ValueError(
            f"{where}: holds {n} {what}, but {Path(manifest['path']) / 'dataset.json'} says n_rows {want}: "
            f"the export was cut short or added to after it was written; {_REDO}"
        )


def _check_hash(manifest: dict[str, Any], data: bytes, n_lines: int, jsonl: Path) -> None:
    """Refuse a data.jsonl whose sha256 is not the manifest's `content_hash` (as `_write` computes it).
    A manifest without one (or with one that is not a sha256 hex digest) is not checked."""
    want = manifest.get("content_hash")
    if not (isinstance(want, str) and len(want) == 64 and all(c in "0123456789abcdef" for c in want)):
        return
    got = hashlib.sha256(data).hexdigest()
    if got != want:
        rows = f"{n_lines} rows in the file, n_rows {manifest.get('n_rows')!r} in dataset.json"
        raise ValueError(
            f"{jsonl}: its sha256 {got[:16]}... is not the content_hash {want[:16]}... in "
            f"{jsonl.parent / 'dataset.json'} ({rows}): the file was changed after the export; {_REDO}"
        )


def load_rows(path: str | Path) -> list[dict[str, Any]]:
    """The rows of an export, from its JSONL (else its hf/ or Parquet), as plain dicts, each checked to be the
    shape of the export's kind (ValueError naming the file, the line and the field). The JSONL must match the
    manifest's `content_hash` and `n_rows`, the hf/ or Parquet rows its `n_rows` (ValueError naming both)."""
    manifest = read_manifest(path)
    folder = Path(manifest["path"])
    kind = manifest["kind"]
    jsonl = folder / "data.jsonl"
    if jsonl.exists():
        rows = []
        try:
            if not jsonl.is_file():  # a fifo would block the read for ever
                raise OSError(f"{jsonl.name} is not a regular file")
            data = jsonl.read_bytes()
            # "\n" only: json.dumps leaves U+2028 and U+0085 unescaped, which str.splitlines() would split on
            lines = data.decode("utf-8").split("\n")
        except (OSError, UnicodeDecodeError) as e:
            raise ValueError(f"{jsonl}: cannot be read ({e}); export the dataset again") from None
        _check_hash(manifest, data, sum(1 for line in lines if line.strip()), jsonl)
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{jsonl}:{n}: not valid JSON (column {e.colno}: {e.msg}); "
                                 f"export the dataset again") from None
            except (RecursionError, ValueError) as e:  # nested past Python's stack; an integer of 5,000 digits
                what = "nested too deeply" if isinstance(e, RecursionError) else str(e).split(";")[0]
                raise ValueError(f"{jsonl}:{n}: not a row clawsdk exports ({what}); export the dataset again") \
                    from None
            check_row(row, kind, f"{jsonl}:{n}")
            rows.append(row)
        _check_count(manifest, len(rows), jsonl, "rows")
        return rows
    ds = load_hf(folder)
    rows = [drop_nulls(r) for r in ds]
    for i, r in enumerate(rows):
        if isinstance(r, dict) and isinstance(r.get("tools"), str):
            try:
                r["tools"] = json.loads(r["tools"])
            except json.JSONDecodeError:
                raise ValueError(f"{folder}: row {i}: tools: not valid JSON; export the dataset again") \
                    from None
        check_row(r, kind, f"{folder}: row {i}")
    return rows


def load_hf(path: str | Path) -> Any:
    """The export as a `datasets.Dataset` (hf/ folder, else Parquet, else JSONL)."""
    import datasets

    manifest = read_manifest(path)
    folder = Path(manifest["path"])
    for name, load in (("hf", lambda f: datasets.load_from_disk(str(f))),
                       ("data.parquet", lambda f: datasets.load_dataset("parquet", data_files=str(f), split="train"))):
        if (folder / name).exists():
            try:
                ds = load(folder / name)
            except Exception as e:  # pyarrow's and datasets' errors name no file
                raise ValueError(f"{folder / name}: cannot be read ({type(e).__name__}: {e}); "
                                 "export the dataset again") from None
            _check_count(manifest, len(ds), folder / name, "rows")
            return ds
    if not (folder / "data.jsonl").exists():  # else load_rows and load_hf called each other for ever
        raise ValueError(f"{folder}: no data files (data.jsonl, data.parquet or hf/) beside dataset.json; "
                         "export the dataset again")
    rows = [_arrow_row(r) for r in load_rows(folder)]
    return datasets.Dataset.from_list(rows)
