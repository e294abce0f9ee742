"""ATIF, Harbor's Agent Trajectory Interchange Format (ATIF-v1.7): one JSON document per rollout, out and in.

Out (`clawsdk data export --format atif`): each selected rollout attempt becomes `atif/ROLLOUT_ID.json`:
the system prompt and the instruction as `system` and `user` steps, each model turn an `agent` step (its
text, reasoning, tool calls, the results of those calls as its observation, and metrics: tokens, token ids
and logprobs where the store has them), each tool call made without a model (the oracle, a scripted agent)
an `agent` step with `llm_call_count: 0`; `agent.tool_definitions` are the OpenAI function specs the rollout
offered; the verdict (reward, passed, sub-scores) and the lineage (run, rollout, attempt, task) are under the
root's `extra.clawsdk`.

In (`clawsdk data import atif:PATH`): each document is recorded as a rollout of agent `imported`: its steps
become the events a rollout of clawsdk's own records (model requests and responses, tool calls and
results), so it flows through selection and export like any other. Its score is the one the document
carries (`extra.clawsdk.reward`, or a root `extra.reward`), never re-scored here: replay it against the
task (`clawsdk run TASKS --agent replay --agent-opt run=RUN`) to score it again.

The rules a document must keep are those of Harbor's reference models (harbor.models.trajectories):
`validate` checks the shape and the cross-field rules (step ids 1..n, agent-only fields on agent steps,
every `source_call_id` naming a call of its step); tests/fixtures/atif/atif-v1.7.schema.json is the shape
as a JSON Schema.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from clawsdk.store.events import ModelRequest, ModelResponse, Note, StoredEvent, ToolCall, ToolResult

__all__ = ["ATIF_VERSION", "AtifError", "atif_rows", "export_atif", "import_atif", "to_atif", "validate",
           "write_atif"]

ATIF_VERSION = "ATIF-v1.7"
#: the versions a document may say it is; newer ones are refused (their fields are not known here)
READABLE = tuple(f"ATIF-v1.{n}" for n in range(8))
IMPORTED_AGENT = "imported"

_ROOT = {"schema_version", "session_id", "trajectory_id", "agent", "steps", "notes", "final_metrics",
         "continued_trajectory_ref", "extra", "subagent_trajectories"}
_AGENT = {"name", "version", "model_name", "tool_definitions", "extra"}
_STEP = {"step_id", "timestamp", "source", "model_name", "reasoning_effort", "message", "reasoning_content",
         "tool_calls", "observation", "metrics", "is_copied_context", "llm_call_count", "extra"}
_AGENT_ONLY = ("model_name", "reasoning_effort", "reasoning_content", "tool_calls", "metrics")
_CALL = {"tool_call_id", "function_name", "arguments", "extra"}
_RESULT = {"source_call_id", "content", "subagent_trajectory_ref", "extra"}
_METRICS = {"prompt_tokens", "completion_tokens", "cached_tokens", "cost_usd", "prompt_token_ids",
            "completion_token_ids", "logprobs", "extra"}
_FINAL = {"total_prompt_tokens", "total_completion_tokens", "total_cached_tokens", "total_cost_usd",
          "total_steps", "extra"}


class AtifError(ValueError):
    """A document that is not ATIF this clawsdk reads; the message names the field (`steps[2].tool_calls`)."""


# ---- validation ------------------------------------------------------------------------------------


def _keys(obj: Any, allowed: set[str], required: tuple[str, ...], where: str) -> dict:
    if not isinstance(obj, dict):
        raise AtifError(f"{where}: must be an object, not {type(obj).__name__}")
    extra = sorted(set(obj) - allowed)
    if extra:
        raise AtifError(f"{where}: unknown field {extra[0]!r} (ATIF forbids fields it does not define; custom "
                        f"data goes under 'extra')")
    for key in required:
        if key not in obj:
            raise AtifError(f"{where}.{key}: required")
    return obj


def _typed(value: Any, types: tuple, where: str, what: str) -> None:
    if value is not None and (not isinstance(value, types) or (isinstance(value, bool) and bool not in types)):
        raise AtifError(f"{where}: must be {what}, not {type(value).__name__}")


def _content(value: Any, where: str, optional: bool = False) -> None:
    if value is None and optional:
        return
    if isinstance(value, str):
        return
    if not isinstance(value, list):
        raise AtifError(f"{where}: must be text or a list of content parts")
    for i, part in enumerate(value):
        _keys(part, {"type", "text", "source"}, ("type",), f"{where}[{i}]")
        if part["type"] == "text":
            if not isinstance(part.get("text"), str) or part.get("source") is not None:
                raise AtifError(f"{where}[{i}]: a text part has 'text' and no 'source'")
        elif part["type"] == "image":
            src = part.get("source")
            _keys(src, {"media_type", "path"}, ("media_type", "path"), f"{where}[{i}].source")
            if part.get("text") is not None:
                raise AtifError(f"{where}[{i}]: an image part has no 'text'")
        else:  # audio parts are ATIF-v1.8
            raise AtifError(f"{where}[{i}].type: {part['type']!r} is not a content type of {ATIF_VERSION} "
                            f"(text, image)")


def _metrics(m: Any, where: str) -> None:
    _keys(m, _METRICS, (), where)
    for key in ("prompt_tokens", "completion_tokens", "cached_tokens"):
        _typed(m.get(key), (int,), f"{where}.{key}", "a whole number")
    _typed(m.get("cost_usd"), (int, float), f"{where}.cost_usd", "a number")
    for key, kind in (("prompt_token_ids", int), ("completion_token_ids", int), ("logprobs", (int, float))):
        value = m.get(key)
        if value is not None and (not isinstance(value, list) or not all(
                isinstance(v, kind) and not isinstance(v, bool) for v in value)):
            raise AtifError(f"{where}.{key}: must be a list of numbers")


def validate(doc: Any, where: str = "trajectory") -> dict:
    """`doc` if it is an ATIF document of a version up to ATIF-v1.7, else AtifError naming the field."""
    _keys(doc, _ROOT, ("schema_version", "agent", "steps"), where)
    version = doc["schema_version"]
    if version not in READABLE:
        newer = isinstance(version, str) and re.fullmatch(r"ATIF-v\d+\.\d+", version)
        raise AtifError(f"{where}.schema_version: {version!r} " + (
            f"is newer than this clawsdk reads ({ATIF_VERSION}); upgrade clawsdk" if newer
            else f"is not an ATIF version (ATIF-v1.0 .. {ATIF_VERSION})"))
    for key in ("session_id", "trajectory_id", "notes", "continued_trajectory_ref"):
        _typed(doc.get(key), (str,), f"{where}.{key}", "text")
    agent = _keys(doc["agent"], _AGENT, ("name", "version"), f"{where}.agent")
    for key in ("name", "version"):
        _typed(agent[key], (str,), f"{where}.agent.{key}", "text")
        if agent[key] is None:
            raise AtifError(f"{where}.agent.{key}: must be text")
    defs = agent.get("tool_definitions")
    if defs is not None and (not isinstance(defs, list) or not all(isinstance(d, dict) for d in defs)):
        raise AtifError(f"{where}.agent.tool_definitions: must be a list of function definitions (objects)")
    steps = doc["steps"]
    if not isinstance(steps, list) or not steps:
        raise AtifError(f"{where}.steps: must be a list of at least one step")
    for i, step in enumerate(steps):
        at = f"{where}.steps[{i}]"
        _keys(step, _STEP, ("step_id", "source", "message"), at)
        if step["step_id"] != i + 1 or isinstance(step["step_id"], bool):
            raise AtifError(f"{at}.step_id: expected {i + 1} (sequential from 1), got {step['step_id']!r}")
        if step["source"] not in ("system", "user", "agent"):
            raise AtifError(f"{at}.source: must be system, user or agent, not {step['source']!r}")
        _content(step["message"], f"{at}.message")
        if step["source"] != "agent":
            for key in _AGENT_ONLY:
                if step.get(key) is not None:
                    raise AtifError(f"{at}.{key}: only an agent step has it (source is {step['source']!r})")
        count = step.get("llm_call_count")
        _typed(count, (int,), f"{at}.llm_call_count", "a whole number")
        if count is not None and count < 0:
            raise AtifError(f"{at}.llm_call_count: must be >= 0")
        if count == 0 and step["source"] == "agent" and (step.get("metrics") is not None
                                                         or step.get("reasoning_content") is not None):
            raise AtifError(f"{at}: a step with llm_call_count 0 has no metrics or reasoning_content")
        for key in ("timestamp", "model_name", "reasoning_content"):
            _typed(step.get(key), (str,), f"{at}.{key}", "text")
        ids = set()
        for j, call in enumerate(step.get("tool_calls") or []):
            _keys(call, _CALL, ("tool_call_id", "function_name", "arguments"), f"{at}.tool_calls[{j}]")
            _typed(call["tool_call_id"], (str,), f"{at}.tool_calls[{j}].tool_call_id", "text")
            _typed(call["function_name"], (str,), f"{at}.tool_calls[{j}].function_name", "text")
            if not isinstance(call["arguments"], dict):
                raise AtifError(f"{at}.tool_calls[{j}].arguments: must be an object")
            ids.add(call["tool_call_id"])
        if step.get("observation") is not None:
            obs = _keys(step["observation"], {"results"}, ("results",), f"{at}.observation")
            if not isinstance(obs["results"], list):
                raise AtifError(f"{at}.observation.results: must be a list")
            for j, result in enumerate(obs["results"]):
                _keys(result, _RESULT, (), f"{at}.observation.results[{j}]")
                _content(result.get("content"), f"{at}.observation.results[{j}].content", optional=True)
                ref = result.get("source_call_id")
                if ref is not None and ref not in ids:
                    raise AtifError(f"{at}.observation.results[{j}].source_call_id: {ref!r} is not a "
                                    f"tool_call_id of step {i + 1}'s tool_calls")
        if step.get("metrics") is not None:
            _metrics(step["metrics"], f"{at}.metrics")
    if doc.get("final_metrics") is not None:
        _keys(doc["final_metrics"], _FINAL, (), f"{where}.final_metrics")
    for i, sub in enumerate(doc.get("subagent_trajectories") or []):
        validate(sub, f"{where}.subagent_trajectories[{i}]")
    return doc


# ---- out: a rollout's events -> one document -------------------------------------------------------


def _arguments(raw: Any) -> dict:
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError:
            return {"raw": raw}
    return raw if isinstance(raw, dict) else {"value": raw}


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return "" if content is None else str(content)


def to_atif(rollout: dict[str, Any], events: list[StoredEvent], *, tools: list[dict] | None = None,
            preamble: Sequence[dict[str, Any]] = (), verdict: dict | None = None, version: str = "") -> dict:
    """The ATIF document of one rollout attempt: `events` as the store holds them; `preamble` the system and
    user messages that framed it where no model request records them (a rollout without a model)."""
    header = next((e.extra["atif"] for e in events
                   if isinstance(e, Note) and isinstance(e.extra.get("atif"), dict)), None)
    steps: list[dict[str, Any]] = []
    by_seq: dict[Any, tuple[dict, str]] = {}  # tool_call seq -> (its step, its tool_call_id)
    pending: list[tuple[dict, str, str]] = []  # calls the last model turn announced: (step, id, name)
    seen_users = 0
    requested = False

    def add(step: dict) -> dict:
        step["step_id"] = len(steps) + 1
        steps.append(step)
        return step

    def framing(messages: list[dict]) -> None:
        nonlocal seen_users
        if not steps:  # the system prompt, once
            for m in messages:
                if m.get("role") == "system":
                    add({"source": "system", "message": _text(m.get("content"))})
                    break
        users = [m for m in messages if m.get("role") == "user"]
        for m in users[seen_users:]:
            add({"source": "user", "message": _text(m.get("content"))})
        seen_users = max(seen_users, len(users))

    for e in events:
        ts = e.ts
        if isinstance(e, ModelRequest):
            requested = True
            framing(e.messages or [])
        elif isinstance(e, ModelResponse):
            msg = e.message or {}
            step: dict[str, Any] = {"source": "agent", "timestamp": ts, "message": _text(msg.get("content")),
                                    "llm_call_count": 1}
            if e.model:
                step["model_name"] = str(e.model)
            if msg.get("reasoning_content"):
                step["reasoning_content"] = str(msg["reasoning_content"])
            calls: list[dict[str, Any]] = []
            for j, c in enumerate(msg.get("tool_calls") or []):
                fn = c.get("function") or {}
                calls.append({"tool_call_id": str(c.get("id") or f"call_{e.seq}_{j}"),
                              "function_name": str(fn.get("name", "")), "arguments": _arguments(fn.get("arguments"))})
            if calls:
                step["tool_calls"] = calls
            usage = e.usage or {}
            metrics = {k: usage[k] for k in ("prompt_tokens", "completion_tokens") if isinstance(usage.get(k), int)}
            for key, value in (("prompt_token_ids", e.prompt_token_ids),
                               ("completion_token_ids", e.completion_token_ids), ("logprobs", e.logprobs)):
                if value is not None:
                    metrics[key] = list(value)
            if metrics:
                step["metrics"] = metrics
            add(step)
            pending = [(step, c["tool_call_id"], c["function_name"]) for c in calls]
        elif isinstance(e, ToolCall):
            if not steps and not requested:
                for m in preamble:
                    add({"source": "system" if m["role"] == "system" else "user", "message": _text(m["content"])})
            name = "" if e.tool is None else str(e.tool)
            match = next((x for x in pending if x[2] == name), None)
            if match is not None:
                pending.remove(match)
                by_seq[e.seq] = (match[0], match[1])
            else:  # a call no model turn made: a step of its own (an imported one keeps its id)
                cid = str(e.id or f"call_{e.seq}")
                step = add({"source": "agent", "timestamp": ts, "message": "", "llm_call_count": 0,
                            "tool_calls": [{"tool_call_id": cid, "function_name": name,
                                            "arguments": e.args if isinstance(e.args, dict) else {}}]})
                by_seq[e.seq] = (step, cid)
        elif isinstance(e, ToolResult):
            found = by_seq.get(e.call) if isinstance(e.call, int) else None
            if found is None:
                continue
            step, cid = found
            result: dict[str, Any] = {"source_call_id": cid, "content": "" if e.content is None else str(e.content)}
            if e.is_error:
                result["extra"] = {"is_error": True}
            step.setdefault("observation", {"results": []})["results"].append(result)
    if not steps:
        for m in preamble:
            add({"source": "system" if m["role"] == "system" else "user", "message": _text(m["content"])})
    for step in steps:  # ATIF's field order, for people reading the file
        order = ["step_id", "timestamp", "source", "model_name", "message", "reasoning_content", "tool_calls",
                 "observation", "metrics", "llm_call_count"]
        ordered = {k: step[k] for k in order if step.get(k) is not None}
        step.clear()
        step.update(ordered)
    llm = [s.get("metrics") or {} for s in steps]
    final = {"total_steps": len(steps)}
    for key, total in (("prompt_tokens", "total_prompt_tokens"), ("completion_tokens", "total_completion_tokens")):
        if any(key in m for m in llm):
            final[total] = sum(m.get(key, 0) for m in llm)
    rid, attempt = rollout["id"], rollout.get("attempt", 0)
    clawsdk: dict[str, Any] = {
        "run_id": rollout.get("run_id"), "rollout_id": rid, "attempt": attempt, "task_id": rollout.get("task_id"),
        "task_hash": rollout.get("task_hash"), "agent": rollout.get("agent"), "failure_kind": rollout.get("failure_kind"),
        "reward": rollout.get("reward"), "passed": None if rollout.get("passed") is None else bool(rollout["passed"]),
    }
    if verdict:
        clawsdk["verifier"] = verdict.get("verifier")
        clawsdk["subscores"] = [{"name": s["name"], "score": s["score"], "weight": s["weight"]}
                                for s in verdict.get("subscores") or []]
    doc: dict[str, Any] = {
        "schema_version": ATIF_VERSION,
        "session_id": (header or {}).get("session_id") or rid,
        "trajectory_id": (header or {}).get("trajectory_id") or f"{rid}-{attempt}",
        "agent": (header or {}).get("agent") or {
            "name": rollout.get("agent") or "unknown", "version": version or "unknown",
            **({"model_name": rollout["model"]} if rollout.get("model") else {}),
            **({"tool_definitions": tools} if tools else {})},
        "steps": steps,
        "final_metrics": final,
        "extra": {**((header or {}).get("extra") or {}), "clawsdk": clawsdk},
    }
    if header and header.get("notes"):
        doc["notes"] = header["notes"]
    return validate(doc)


def atif_rows(store: Any, candidates: list[Any]) -> list[dict[str, Any]]:
    """One row per candidate (a kept rollout): its ATIF document as JSON text (`atif`), the file it is
    written to (`file`) and the rollout's lineage."""
    from clawsdk import __version__

    rows = []
    for c in candidates:
        r = c.rollout
        traj = c.trajectory
        preamble = [m for m in (traj.messages if traj else [])[:2] if m["role"] in ("system", "user")]
        doc = to_atif(r, store.events(r["id"], r["attempt"]), tools=traj.tools if traj else None, preamble=preamble,
                      verdict=store.verdict(r["id"], r["attempt"]), version=__version__)
        rows.append({"rollout_id": r["id"], "attempt": r["attempt"], "task_id": r["task_id"],
                     "task_hash": r["task_hash"], "reward": c.reward, "agent": r.get("agent"),
                     "model": r.get("model"), "file": f"atif/{r['id']}.json",
                     "atif": json.dumps(doc, ensure_ascii=False)})
    return rows


def write_atif(rows: list[dict[str, Any]], folder: Path) -> list[str]:
    """Each row's document, indented, at its `file` under `folder`."""
    (folder / "atif").mkdir(parents=True, exist_ok=True)
    for row in rows:
        doc = json.loads(row["atif"])
        (folder / row["file"]).write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    return ["atif"]


def export_atif(store: Any, result: Any, out: str | Path, *, name: str,
                formats: tuple[str, ...] | list[str] = ("jsonl",), tokenizer: Any = None) -> Any:
    """The kept rollouts of `result` (a SelectionResult) as an export NAME-vN/ of kind `atif`: one document
    per rollout under atif/, an index row per document in the data files `formats` (each row holds its
    document as JSON text), recorded with its rollouts like any export. EmptyExport when nothing is kept.
    (`tokenizer` is not used: the documents carry the token ids the store holds, none made up.)"""
    formats = [f for f in formats if f != "atif"] or ["jsonl"]
    from clawsdk.data import export

    if not result.kept:
        raise export.EmptyExport(export.explain_empty_selection(result))
    rows = atif_rows(store, result.kept)
    lineage_rows = [(i, "example", c.rollout["id"], c.rollout["attempt"], c.rollout["task_hash"])
                    for i, c in enumerate(result.kept)]
    return export._finish(store, name=name, kind="atif", out=out, rows=rows, lineage_rows=lineage_rows,
                          formats=formats, selection=result.selection.to_dict(),
                          extra={"atif_version": ATIF_VERSION}, write_extra=lambda folder: write_atif(rows, folder))


# ---- in: documents -> rollouts -----------------------------------------------------------------------


def read_documents(path: Path) -> Iterator[tuple[str, Any]]:
    """(where, parsed JSON) of each document at `path`: a .json file, a .jsonl file (one a line), or a folder
    of them (an export's atif/ included); AtifError for a file that is not JSON."""
    # in an export folder, the documents are under atif/; its own files (the manifest, the index rows) are not
    files = sorted(p for p in path.rglob("*") if p.suffix in (".json", ".jsonl") and p.is_file()
                   and not (p.parent / "dataset.json").is_file()) if path.is_dir() else [path]
    if not files:
        raise AtifError(f"{path}: no .json or .jsonl files")
    for f in files:
        text = f.read_text(encoding="utf-8")
        lines = [(f"{f}:{n}", ln) for n, ln in enumerate(text.splitlines(), 1) if ln.strip()] \
            if f.suffix == ".jsonl" else [(str(f), text)]
        for where, body in lines:
            try:
                yield where, json.loads(body)
            except json.JSONDecodeError as e:
                raise AtifError(f"{where}: not JSON ({e.msg}, line {e.lineno})") from None


def _events(doc: dict) -> tuple[list[tuple[str, dict, str | None]], str]:
    """The events a clawsdk rollout records for the document's steps: [(kind, payload, ts)], and the
    instruction (the first user step)."""
    tools = doc["agent"].get("tool_definitions") or []
    model = doc["agent"].get("model_name")
    history: list[dict[str, Any]] = []
    out: list[tuple[str, dict, str | None]] = [("note", {"atif": {k: doc[k] for k in (
        "schema_version", "session_id", "trajectory_id", "agent", "notes", "extra") if doc.get(k) is not None}}, None)]
    out[0][1]["atif"]["extra"] = {k: v for k, v in (doc.get("extra") or {}).items() if k != "clawsdk"}
    instruction = ""
    seq = 1  # the note is seq 0
    for step in doc["steps"]:
        ts = step.get("timestamp")
        text = _text(step["message"])
        if step["source"] in ("system", "user"):
            history.append({"role": step["source"], "content": text})
            instruction = instruction or (text if step["source"] == "user" else "")
            continue
        calls = step.get("tool_calls") or []
        results = {r.get("source_call_id"): r for r in (step.get("observation") or {}).get("results") or []}
        if step.get("llm_call_count") != 0:
            message: dict[str, Any] = {"role": "assistant", "content": text}
            if step.get("reasoning_content"):
                message["reasoning_content"] = step["reasoning_content"]
            if calls:
                message["tool_calls"] = [{"id": c["tool_call_id"], "type": "function", "function": {
                    "name": c["function_name"], "arguments": json.dumps(c["arguments"], ensure_ascii=False)}}
                    for c in calls]
            out.append(("model_request", {"model": step.get("model_name") or model, "messages": list(history),
                                          "tools": tools}, ts))
            metrics = step.get("metrics") or {}
            response: dict[str, Any] = {"model": step.get("model_name") or model, "message": message,
                                        "usage": {k: metrics[k] for k in ("prompt_tokens", "completion_tokens")
                                                  if k in metrics}, "finish_reason": "stop"}
            for key in ("prompt_token_ids", "completion_token_ids", "logprobs"):
                if metrics.get(key) is not None:
                    response[key] = metrics[key]
            out.append(("model_response", response, ts))
            seq += 2
            history.append(message)
        for c in calls:
            call_seq = seq
            call_event = {"tool": c["function_name"], "args": c["arguments"]}
            if step.get("llm_call_count") == 0:  # no model turn names it: the call keeps its id here
                call_event["id"] = c["tool_call_id"]
            out.append(("tool_call", call_event, ts))
            seq += 1
            r = results.get(c["tool_call_id"])
            if r is not None:
                content = _text(r.get("content"))
                error = bool((r.get("extra") or {}).get("is_error"))
                out.append(("tool_result", {"tool": c["function_name"], "call": call_seq, "is_error": error,
                                            "content": content}, ts))
                seq += 1
                history.append({"role": "tool", "tool_call_id": c["tool_call_id"], "name": c["function_name"],
                                "content": content})
    return out, instruction


def import_atif(store: Any, path: Path, *, run_id: str, tasks: dict[str, Any] | None = None) -> dict[str, Any]:
    """Record each document under `path` as a finished rollout of agent `imported` in run `run_id`.

    A document's task is the one of `tasks` (id -> Task) its `extra.clawsdk.task_id` names, else a task made
    from its first user step (its instruction, no verifier to run). Returns {"imported": n, "skipped": n
    (already in the run), "errors": [messages]}; a document that is not ATIF is an error, the others go on."""
    from clawsdk.runtime.ids import rollout_id
    from clawsdk.store.store import now
    from clawsdk.tasks.model import Task

    tasks = tasks or {}
    report: dict[str, Any] = {"imported": 0, "skipped": 0, "errors": []}
    docs = []
    for where, doc in read_documents(path):
        try:
            docs.append((where, validate(doc)))
        except AtifError as e:
            report["errors"].append(f"{where}: {e}")
    store.upsert_run(run_id, status="running", agent=IMPORTED_AGENT, config={"imported_from": str(path)})
    samples: dict[str, int] = {}
    for where, doc in docs:
        ours = (doc.get("extra") or {}).get("clawsdk") or {}
        events, instruction = _events(doc)
        task = tasks.get(ours.get("task_id") or "")
        if task is None:
            digest = hashlib.sha256(json.dumps(doc["steps"], sort_keys=True).encode()).hexdigest()[:12]
            task = Task(id=str(ours.get("task_id") or f"atif-{digest}"), instruction=instruction or "(none)",
                        provenance={"source": "atif", "path": where})
        sample = samples.get(task.id, 0)
        samples[task.id] = sample + 1
        rid = rollout_id(run_id, task.id, sample)
        if store.rollout(rid) is not None and store.query("SELECT 1 FROM rollouts WHERE id = ? AND status = "
                                                          "'finished'", [rid]):
            report["skipped"] += 1
            continue
        reward = ours.get("reward", (doc.get("extra") or {}).get("reward"))
        reward = float(reward) if isinstance(reward, (int, float)) and not isinstance(reward, bool) else None
        passed = ours.get("passed")
        with store.transaction():
            store.upsert_task(task, source="atif")
            store.start_rollout(rollout_id=rid, run_id=run_id, task_id=task.id, task_hash=task.hash, sample=sample,
                                attempt=0, agent=IMPORTED_AGENT, model=doc["agent"].get("model_name"))
            store.insert_events([(rid, 0, i, kind, ts or now(), None, json.dumps(payload, ensure_ascii=False))
                                 for i, (kind, payload, ts) in enumerate(events)])
            verdict = None
            if reward is not None:
                verdict = {"verifier": ours.get("verifier") or IMPORTED_AGENT, "score": reward,
                           "passed": bool(passed) if passed is not None else reward >= 1.0,
                           "detail": f"imported from {where}", "subscores": ours.get("subscores") or []}
            store.finish_rollout(rollout_id=rid, attempt=0, status="finished", failure_kind="ok",
                                 scored=reward is not None, reward=reward,
                                 passed=None if verdict is None else verdict["passed"], error=None,
                                 n_tool_calls=sum(k == "tool_call" for k, _, _ in events),
                                 n_model_calls=sum(k == "model_response" for k, _, _ in events), duration_s=0.0,
                                 verdict=verdict)
        report["imported"] += 1
    store.end_run(run_id, "finished")
    return report
