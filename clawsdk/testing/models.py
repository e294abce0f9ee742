"""The model conformance kit: a model backend checked against the contract the agents rely on.

    from clawsdk.testing import check_model

    def test_my_backend():
        check_model(MyModel("name"), failing=MyModel("name", base_url="http://127.0.0.1:9")).assert_ok()

The contract (`clawsdk.models.base.Model`):

- ``name`` is a non-empty string (recorded on every rollout);
- ``chat(messages, tools, **params)`` returns a `ChatResponse` whose ``message`` is an assistant
  message: ``role`` "assistant", ``content`` a string or None, ``tool_calls`` absent or a list of
  OpenAI-shaped calls (``id``, ``function.name``, ``function.arguments`` a JSON object as text);
  ``usage`` holds integer token counts; it honours ``max_tokens`` and ``timeout_s``;
- a backend failure (server down, bad answer) raises ``ModelError``, never another exception type,
  and its message says what failed;
- ``aclose()`` releases the backend and may be called twice.
"""

from __future__ import annotations

import json
from typing import Any

import anyio

from clawsdk.errors import ModelError
from clawsdk.models.base import ChatResponse
from clawsdk.testing.report import Report

MESSAGES = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Say ok."}]
TOOLS = [{"type": "function", "function": {
    "name": "echo", "description": "Repeat a text.",
    "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}}]


def _message_problems(r: Any) -> list[str]:
    if not isinstance(r, ChatResponse):
        return [f"chat() returned {type(r).__name__}, not a ChatResponse"]
    m, problems = r.message, []
    if not isinstance(m, dict) or m.get("role") != "assistant":
        return [f"message is not an assistant message: {str(m)[:200]}"]
    if m.get("content") is not None and not isinstance(m["content"], str):
        problems.append(f"content is {type(m['content']).__name__}, not a string or None")
    calls = m.get("tool_calls")
    if calls is not None and not isinstance(calls, list):
        problems.append("tool_calls is not a list")
    for call in calls or []:
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not call.get("id"):
            problems.append(f"tool call without id or function.name: {str(call)[:200]}")
            continue
        try:
            ok = isinstance(json.loads(fn.get("arguments") or "{}"), dict)
        except (TypeError, ValueError):
            ok = False
        if not ok:
            problems.append(f"tool call {fn['name']}: arguments are not a JSON object as text: {fn.get('arguments')!r}")
    if not isinstance(r.usage, dict) or not all(isinstance(v, int) for v in r.usage.values()):
        problems.append(f"usage is not a dict of integer counts: {r.usage!r}")
    if r.finish_reason is not None and not isinstance(r.finish_reason, str):
        problems.append(f"finish_reason is {r.finish_reason!r}")
    return problems


def check_model(model: Any, *, failing: Any | None = None, timeout_s: float = 60.0) -> Report:
    """Check `model`; `failing`, when given, is the same backend set up so it cannot answer."""
    report = Report("model", str(getattr(model, "name", type(model).__name__)))
    report.add("name is a non-empty string", isinstance(getattr(model, "name", None), str) and bool(model.name),
               f"name is {getattr(model, 'name', None)!r}")

    async def main() -> None:
        for what, tools in (("a plain chat", None), ("a chat with tools offered", TOOLS)):
            try:
                r = await model.chat(list(MESSAGES), tools, max_tokens=32, timeout_s=timeout_s, temperature=0.0)
            except Exception as e:
                report.add(f"{what}: answers", False, f"raised {type(e).__name__}: {e}")
                continue
            problems = _message_problems(r)
            report.add(f"{what}: an assistant message of the contract's shape", not problems, "; ".join(problems))
        if failing is not None:
            try:
                await failing.chat(list(MESSAGES), None, max_tokens=8, timeout_s=timeout_s)
            except ModelError as e:
                report.add("a backend failure raises ModelError saying what failed", bool(str(e).strip()),
                           "the ModelError has no message")
            except Exception as e:
                report.add("a backend failure raises ModelError saying what failed", False,
                           f"raised {type(e).__name__}: {e} (the contract is ModelError)")
            else:
                report.add("a backend failure raises ModelError saying what failed", False,
                           "the failing model answered")
        for m in (model, failing):
            if m is None:
                continue
            try:
                await m.aclose()
                await m.aclose()
                report.add("aclose() twice", True)
            except Exception as e:
                report.add("aclose() twice", False, f"{type(e).__name__}: {e}")

    anyio.run(main)
    return report


__all__ = ["check_model"]
