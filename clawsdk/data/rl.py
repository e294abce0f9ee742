"""`clawsdk data export --format rl`: token ids, logprobs and loss masks per turn, from the prefix tree of each
rollout's model calls (calltree.py), for policy-gradient training on exactly what the model saw and sampled.

One row per branch of the tree (a root-to-leaf chain of kept calls): the tokens of its first prompt, then, turn by
turn, what the model sampled (trained: mask 1, with the sampler's logprobs) and what came between (the tool
results and the chat template's tokens the next prompt adds: mask 0, logprob 0.0). Where the upstream returned
token ids (vLLM with `return_token_ids`, the transformers and embedded backends, `clawsdk models serve`), they are
used as they are: nothing is tokenized again. A later prompt that does not begin with the tokens so far (a chat
template that renders an earlier turn anew) ends the row; the rest of the branch is a row of its own. A branch
with no token ids is tokenized with `--tokenizer` (marked `retokenized`, no logprobs), or left out.

Layout of a row:
    prompt_ids            the first prompt's tokens
    completion_ids        everything after it: the model's turns and what came between them
    completion_mask       1 on the model's tokens (the loss), 0 on the rest
    completion_logprobs   the sampler's logprob of each model token, 0.0 elsewhere (null when retokenized)
    turns                 per model turn: {call, start, end, finish_reason} (a span of completion_ids)
    calls, retries        the model_request seqs of the branch, and of the retried attempts at its prompts
    retokenized           true when the ids come from --tokenizer, not from the model server
    rollout_id, attempt, task_id, task_hash, reward, agent, model, branch
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from clawsdk.data.calltree import Call, branches, call_tree
from clawsdk.store.events import ModelResponse, StoredEvent

__all__ = ["episode_rows", "export_tokens"]


def _logprobs(response: ModelResponse | None, n: int) -> list[float]:
    """The sampled tokens' logprobs as floats (vLLM's {"content": [{logprob}]} or a list), padded to `n`."""
    lp = response.logprobs if response is not None else None
    if isinstance(lp, dict):
        lp = [t.get("logprob", 0.0) if isinstance(t, dict) else 0.0 for t in lp.get("content") or []]
    values = [float(x) for x in lp] if isinstance(lp, list) else []
    return (values + [0.0] * n)[:n]


def _ids(call: Call) -> tuple[list[int], list[int]] | None:
    r = call.response
    if r is None:
        return None
    prompt, completion = r.prompt_token_ids, r.completion_token_ids
    if isinstance(prompt, list) and isinstance(completion, list) and completion:
        return list(prompt), list(completion)
    return None


def _finish_reason(call: Call) -> Any:
    return call.response.finish_reason if call.response is not None else None


def _from_ids(chain: list[Call]) -> list[dict[str, Any]]:
    """The chain's rows from the recorded ids: split where a prompt does not extend the tokens so far."""
    rows: list[dict[str, Any]] = []
    row: dict[str, Any] | None = None
    so_far: list[int] = []
    for call in chain:
        prompt, completion = _ids(call)  # type: ignore[misc]
        if row is not None and prompt[:len(so_far)] == so_far:
            gap = prompt[len(so_far):]
            row["completion_ids"] += gap
            row["completion_mask"] += [0] * len(gap)
            row["completion_logprobs"] += [0.0] * len(gap)
        else:
            row = {"prompt_ids": prompt, "completion_ids": [], "completion_mask": [], "completion_logprobs": [],
                   "turns": [], "calls": []}
            rows.append(row)
        start = len(row["completion_ids"])
        row["completion_ids"] += completion
        row["completion_mask"] += [1] * len(completion)
        row["completion_logprobs"] += _logprobs(call.response, len(completion))
        row["turns"].append({"call": call.seq, "start": start, "end": start + len(completion),
                             "finish_reason": _finish_reason(call)})
        row["calls"].append(call.seq)
        so_far = row["prompt_ids"] + row["completion_ids"]
    return rows


def _retokenized(chain: list[Call], tokenizer: Any) -> dict[str, Any]:
    """The chain's leaf conversation tokenized with `tokenizer` (its chat template), the assistant turns masked."""
    from clawsdk.data.tokenize import encode_chat

    leaf = chain[-1]
    # a chain ends in an answered call: its response has a message (Call.answered)
    messages = [*(leaf.request.messages or []), {**leaf.response.message, "role": "assistant"}]  # type: ignore[union-attr, dict-item]
    ids, mask = encode_chat(tokenizer, messages, leaf.request.tools)
    cut = mask.index(1) if 1 in mask else len(ids)
    turns, start = [], None
    for i, m in enumerate([*mask[cut:], 0]):
        if m and start is None:
            start = i
        elif not m and start is not None:
            turns.append({"call": None, "start": start, "end": i, "finish_reason": None})
            start = None
    # not strict: a chat template may render fewer assistant turns than the chain has calls
    for turn, call in zip(turns, chain, strict=False):
        turn["call"] = call.seq
        turn["finish_reason"] = _finish_reason(call)
    return {"prompt_ids": ids[:cut], "completion_ids": ids[cut:], "completion_mask": mask[cut:],
            "completion_logprobs": None, "turns": turns, "calls": [c.seq for c in chain], "retokenized": True}


def episode_rows(events: list[StoredEvent], *, tokenizer: Any = None) -> tuple[list[dict[str, Any]], str | None]:
    """The token rows of one rollout attempt's events, and why a branch was left out (None if none was)."""
    calls = call_tree(events)
    rows, why = [], None
    for i, chain in enumerate(branches(calls)):
        prompts = {c.retry_of or c.seq for c in chain}
        retries = [c.seq for c in calls if c.retried and (c.retry_of or c.seq) in prompts]
        if all(_ids(c) is not None for c in chain):
            got = [{**r, "retokenized": False} for r in _from_ids(chain)]
        elif tokenizer is not None:
            got = [_retokenized(chain, tokenizer)]
        else:
            why = "no token ids recorded (ask the model server for them: --agent-opt token_ids=true) and no --tokenizer"
            continue
        rows += [{**r, "branch": i, "retries": retries,
                  "relations": {str(c.seq): c.relation for c in chain}} for r in got]
    if not calls:
        why = "no model calls recorded"
    return rows, why


def export_tokens(store: Any, result: Any, out: str | Path, *, name: str, formats: tuple[str, ...] | list[str] = (),
                  tokenizer: Any = None) -> Any:
    """The selected rollouts' token rows as a dataset (kind `rl-tokens`); EmptyExport when none has any."""
    from clawsdk.data.export import EmptyExport, _finish, explain_empty_selection

    if not result.kept:
        raise EmptyExport(explain_empty_selection(result))
    rows: list[dict[str, Any]] = []
    lin, dropped = [], {}
    for c in result.kept:
        r = c.rollout
        events = store.events(r["id"], attempt=r["attempt"])
        got, why = episode_rows(events, tokenizer=tokenizer)
        if why and not got:
            dropped[r["id"]] = why
            continue
        for row in got:
            lin.append((len(rows), "example", r["id"], r["attempt"], r["task_hash"]))
            rows.append({**row, "rollout_id": r["id"], "attempt": r["attempt"], "task_id": r["task_id"],
                         "task_hash": r["task_hash"], "reward": c.reward, "agent": r.get("agent"),
                         "model": r.get("model")})
    if not rows:
        reasons = "; ".join(sorted(set(dropped.values()))) or "no branch"
        raise EmptyExport(f"none of the {len(result.kept)} selected rollouts has token rows: {reasons}")
    files = [f for f in formats if f != "rl"] or ["jsonl"]
    return _finish(store, name=name, kind="rl-tokens", out=out, rows=rows, lineage_rows=lin, formats=files,
                   selection=result.selection.to_dict(), extra={"dropped": dropped, "retokenized":
                                                                sum(bool(r["retokenized"]) for r in rows)})
