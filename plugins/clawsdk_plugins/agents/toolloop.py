"""The `tool-loop` agent: a chat model calling the task's MCP tools until it answers or calls `finish`.

Every model call is recorded (model_request / model_response) and every tool call goes through
the tool session (tool_call / tool_result), so the trajectory in the store is complete. A tool
call the model botches is answered with an error it can read and fix, and recorded; it never
ends the rollout. Budgets: turns, tokens per turn and per rollout, a wall clock per model call
(within the task's own timeout). Running out of any of them ends the rollout as agent_timeout.
Past the context budget the oldest tool outputs are elided; when the model still says the
conversation does not fit (ContextOverflow), the turn is asked again once with a budget scaled to
what it said, and a second overflow ends the rollout as the agent's failure.
"""

from __future__ import annotations

import copy
import time
from typing import Any

from clawsdk.errors import AgentError, AgentTimeout, ContextOverflow
from clawsdk.hookspecs import hookimpl
from clawsdk.models import toolcalls
from clawsdk.models.base import ChatResponse, Model
from clawsdk.models.prompt import ELIDED, FINISH_TOOL, SYSTEM_PROMPT, truncate_middle
from clawsdk.plugins import get_registry
from clawsdk.runtime.agent import Agent, AgentContext
from clawsdk.store.events import ErrorEvent, ModelRequest, ModelResponse


def resolve_model(spec: str | Model, **options: Any) -> Model:
    """'BACKEND' or 'BACKEND:NAME' (e.g. embedded, openai:gpt-4o-mini, transformers:/ckpt) -> a Model."""
    if isinstance(spec, Model):
        return spec
    backend, _, name = str(spec).partition(":")
    factory = get_registry().get("models", backend)
    options = {k: v for k, v in options.items() if v is not None}
    try:
        return factory(name=name, **options) if name else factory(**options)
    except TypeError as e:
        raise ValueError(f"model backend {backend!r} does not accept these options "
                         f"({', '.join(sorted(options)) or 'none'}): {e}") from e


class ToolLoopAgent(Agent):
    """Options (all from --agent-opt KEY=VALUE; --model and --base-url fill the first two):

    model              BACKEND[:NAME], default 'embedded'
    base_url, api_key  for the openai backend (or $OPENAI_BASE_URL, $OPENAI_API_KEY)
    max_turns          model calls per rollout (default 30)
    max_tokens         completion tokens per model call (default 1024)
    max_rollout_tokens completion tokens per rollout (default 32768)
    temperature, top_p, seed
    turn_timeout_s     wall clock per model call (default 300); a call past it is the server's failure (model_error),
                       a call still waiting when the task's time runs out is the agent's (agent_timeout)
    max_tool_output_chars  longer tool outputs are cut in the middle with a note (default 8000)
    max_context_chars  older tool outputs are elided past this (default: from the model's context window)
    system_prompt      replaces the built-in system prompt
    finish_tool        offer the `finish` tool (default true)
    tool_choice        auto (default) or required: every answer must be a tool call (end with `finish`);
                       local backends start the answer with <tool_call>, which gets tiny models calling tools
    tools              offer only these tools (comma-separated names; default: all the task's tools)
    any other option goes to the model backend (e.g. concurrency, timeout_s, retries, device)
    """

    name = "tool-loop"

    def __init__(self, model: str | Model = "embedded", *, base_url: str | None = None, api_key: str | None = None,
                 max_turns: int = 30, max_tokens: int = 1024, max_rollout_tokens: int = 32768,
                 temperature: float | None = 0.0, top_p: float | None = None, seed: int | None = None,
                 turn_timeout_s: float = 300.0, max_tool_output_chars: int = 8000,
                 max_context_chars: int | None = None, system_prompt: str | None = None,
                 finish_tool: bool = True, tools: str | list[str] | None = None, tool_choice: str = "auto",
                 **model_options: Any):
        # --agent-opt values arrive as YAML scalars: a wrong one is refused here, before any rollout
        self.max_turns = _option("max_turns", max_turns, int, low=1)
        self.max_tokens = _option("max_tokens", max_tokens, int, low=1)
        self.max_rollout_tokens = _option("max_rollout_tokens", max_rollout_tokens, int, low=1)
        self.temperature = _option("temperature", temperature, float, low=0)
        self.top_p = _option("top_p", top_p, float, low=0)
        self.seed = _option("seed", seed, int)
        self.turn_timeout_s = _option("turn_timeout_s", turn_timeout_s, float, low=1e-3)
        self.max_tool_output_chars = _option("max_tool_output_chars", max_tool_output_chars, int, low=1)
        self.max_context_chars = _option("max_context_chars", max_context_chars, int, low=1)
        if system_prompt is not None and not isinstance(system_prompt, str):
            raise ValueError(f"system_prompt must be text, not {system_prompt!r}")
        if not isinstance(finish_tool, bool):
            raise ValueError(f"finish_tool must be true or false, not {finish_tool!r}")
        if isinstance(tools, str):
            tools = [t.strip() for t in tools.split(",") if t.strip()]
        if tools is not None and not (isinstance(tools, list) and all(isinstance(t, str) for t in tools)):
            raise ValueError(f"tools must be tool names separated by commas (e.g. tools=read,write), not {tools!r}")
        self.llm = resolve_model(model, base_url=base_url, api_key=api_key, **model_options)
        #: a --base-url given is asked once before the run (preflight): a wrong one is one line, not every
        #: rollout's model_error after its retries
        self.check_url = getattr(self.llm, "base_url", None) if base_url else None
        self.model = self.llm.name
        self.system_prompt = system_prompt or SYSTEM_PROMPT
        self.finish_tool = finish_tool
        self.only_tools = list(tools) if tools else None
        if tool_choice not in ("auto", "required"):
            raise ValueError(f"tool_choice must be auto or required, not {tool_choice!r}")
        self.tool_choice = tool_choice

    async def preflight(self, tasks: Any, sandbox: str) -> None:
        if self.check_url:
            from clawsdk.proxy import check_base_url

            await check_base_url(self.check_url, getattr(self.llm, "api_key", None))

    def build_system_prompt(self, ctx: AgentContext) -> str:
        parts = [self.system_prompt.strip()]
        for server, text in ctx.tools.instructions().items():
            parts.append(f"## {server}\n{text.strip()}")
        return "\n\n".join(parts)

    def context_budget(self) -> int | None:
        """Characters of conversation to send: max_context_chars, or from the model's context window
        (about 3 characters a token, less room for the answer) once the backend knows it."""
        if self.max_context_chars:
            return self.max_context_chars
        window = getattr(self.llm, "context_window", None)
        return int(max(window - self.max_tokens, window // 2) * 3) if window else None

    def fit_context(self, messages: list[dict[str, Any]], budget: int | None = None) -> list[dict[str, Any]]:
        """The messages to send: past the context budget, the oldest tool outputs are elided first."""
        budget = budget or self.context_budget()
        if not budget:
            return messages
        size = _chars(messages)
        if size <= budget:
            return messages
        fitted = copy.deepcopy(messages)
        last_turn = max((i for i, m in enumerate(fitted) if m["role"] == "assistant"), default=len(fitted))
        for m in fitted[:last_turn]:  # keep the outputs the model has not yet answered
            if size <= budget:
                break
            content = str(m.get("content") or "")
            if m["role"] == "tool" and len(content) > len(ELIDED):
                size -= len(content) - len(ELIDED)
                m["content"] = ELIDED
        return fitted

    async def run(self, ctx: AgentContext) -> None:
        tools = [spec.openai() for spec in ctx.tools.tools()]
        names = {t["function"]["name"] for t in tools}
        if self.only_tools:
            missing = sorted(set(self.only_tools) - names - {"finish"})
            if missing:
                raise AgentError(f"tools={','.join(self.only_tools)}: task {ctx.task.id} offers no tool "
                                 f"{', '.join(missing)} (it has {', '.join(sorted(names))})")
            tools = [t for t in tools if t["function"]["name"] in self.only_tools]
            names = {t["function"]["name"] for t in tools}
        if self.finish_tool and "finish" not in names:
            tools.append(FINISH_TOOL)
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": self.build_system_prompt(ctx)},
            {"role": "user", "content": ctx.instruction},
        ]
        started = time.monotonic()
        used_tokens = 0
        budget: int | None = None  # tightened for the rest of the rollout by what an overflow said
        for turn in range(self.max_turns):
            left_s = ctx.time_left()  # the runner's clock: time the run spent paused is given back
            if left_s is None:
                left_s = ctx.task.limits.timeout_s - (time.monotonic() - started)
            max_tokens = min(self.max_tokens, self.max_rollout_tokens - used_tokens)
            if max_tokens <= 0:
                raise AgentTimeout(f"used the rollout's {self.max_rollout_tokens} completion tokens "
                                   f"without finishing (max_rollout_tokens)")
            # a call still waiting when the task's time runs out is ended by the runner, as agent_timeout;
            # its own limit (past which a server that does not answer is model_error) must not come first
            call_s = self.turn_timeout_s if self.turn_timeout_s < left_s else max(0.0, left_s) + 1.0
            params: dict[str, Any] = {"max_tokens": max_tokens, "timeout_s": round(call_s, 3)}
            if self.tool_choice != "auto":
                params["tool_choice"] = self.tool_choice
            for key in ("temperature", "top_p", "seed"):
                if getattr(self, key) is not None:
                    params[key] = getattr(self, key)
            prompt = self.fit_context(messages, budget)
            for retry in (False, True):
                await ctx.recorder.record(ModelRequest(model=self.model, turn=turn, messages=list(prompt),
                                                       tools=tools, params=params))
                t0 = time.perf_counter()
                try:
                    response = await self.llm.chat(prompt, tools, **params)
                    break
                except ContextOverflow as e:
                    budget = _budget_after(e, _chars(prompt), max_tokens)
                    smaller = self.fit_context(messages, budget)
                    if retry or _chars(smaller) >= _chars(prompt):
                        raise  # asked again already, or nothing left to elide: this turn's outputs do not fit
                    await ctx.recorder.record(ErrorEvent(error_kind="context_overflow", message=str(e)))
                    prompt = smaller
            await self._record_response(ctx, turn, response, (time.perf_counter() - t0) * 1000)
            used_tokens += response.usage.get("completion_tokens") or len(str(response.message.get("content") or "")) // 4
            if response.finish_reason == "timeout":
                raise AgentTimeout(f"the model was still generating after {params['timeout_s']:g} s "
                                   f"(turn {turn}); cut by the wall-clock limit")
            if await self._act(ctx, response.message, messages, names):
                return
        raise AgentTimeout(f"no final answer after {self.max_turns} model turns (max_turns)")

    async def _record_response(self, ctx: AgentContext, turn: int, r: ChatResponse, ms: float) -> None:
        await ctx.recorder.record(ModelResponse(
            model=self.model, turn=turn, message=r.message, usage=r.usage, finish_reason=r.finish_reason,
            prompt_token_ids=r.prompt_token_ids, completion_token_ids=r.completion_token_ids, logprobs=r.logprobs,
            duration_ms=ms))

    async def _act(self, ctx: AgentContext, message: dict[str, Any], messages: list[dict[str, Any]],
                   names: set[str]) -> bool:
        """Run the tool calls of one assistant message; True when the agent is done."""
        calls = list(message.get("tool_calls") or [])
        # calls the server left in the text (or that a text-format model botched)
        parsed = toolcalls.parse_tool_calls(message.get("content") or "") if message.get("content") else None
        if parsed and (parsed.calls or parsed.errors):
            calls += toolcalls.openai_tool_calls(parsed.calls)
            content = parsed.content or None
            if parsed.errors:  # keep what the model wrote, so it sees its own mistake
                content = "\n".join(p for p in [parsed.content] + [raw for raw, _ in parsed.errors] if p)
            message = {**message, "content": content}
        assistant = {"role": "assistant", "content": message.get("content")}
        if calls:
            assistant["tool_calls"] = calls
        messages.append(assistant)
        if not calls and not (parsed and parsed.errors):
            return True  # answered without a tool call
        done = False
        for call in calls:
            fn = call.get("function") or {}
            name = fn.get("name") or ""
            args = toolcalls.arguments_of(call)
            if done:
                content = "error: not run, `finish` was called before this call"
            elif name == "finish" and "finish" not in names:  # the core's finish: recorded like serve's
                content = (await ctx.tools.finish(args)).text
                done = True
            elif not isinstance(args, dict):
                error = f"the arguments of {name!r} are not a JSON object: {str(args)[:200]}"
                await ctx.recorder.record(ErrorEvent(error_kind="malformed_tool_call", message=error,
                                                     raw=fn.get("arguments")))
                content = f"error: {error}. {toolcalls.FORMAT_REMINDER}"
            else:
                result = await ctx.tools.call(name, args)
                text = truncate_middle(result.text, self.max_tool_output_chars)
                content = f"error: {text}" if result.is_error else text
            messages.append({"role": "tool", "tool_call_id": call.get("id"), "name": name, "content": content})
        if parsed and parsed.errors:
            lines = []
            for raw, error in parsed.errors:
                await ctx.recorder.record(ErrorEvent(error_kind="malformed_tool_call", message=error, raw=raw))
                lines.append(f"error: your tool call could not be read: {error}. {toolcalls.FORMAT_REMINDER}")
            messages.append({"role": "user", "content": toolcalls.format_tool_response("\n".join(lines))})
        return done


@hookimpl
def register_agents(register):
    register("tool-loop", ToolLoopAgent)


def _option(name: str, value: Any, kind: type, low: float | None = None) -> Any:
    """An option of `kind` (None stays None), at least `low`; a ValueError naming it otherwise."""
    if value is None:
        return None
    what = "a whole number" if kind is int else "a number"
    try:
        if isinstance(value, bool) or (kind is int and isinstance(value, float) and not value.is_integer()):
            raise ValueError
        number = kind(value)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{name} must be {what}, not {value!r}") from None
    if number != number or number in (float("inf"), float("-inf")) or (low is not None and number < low):
        raise ValueError(f"{name} must be {what}" + (f" of at least {low:g}" if low is not None else "")
                         + f", not {value!r}")
    return number


def _chars(messages: list[dict[str, Any]]) -> int:
    return sum(len(str(m.get("content") or "")) for m in messages)


def _budget_after(e: ContextOverflow, sent_chars: int, max_tokens: int) -> int:
    """A character budget that should fit, from what the overflow said: the characters sent scaled by
    the share of the window left after the answer, with a margin; half of what was sent when it did
    not say."""
    if e.window and e.prompt_tokens:
        room = e.window - min(max_tokens, e.window // 4)
        return int(sent_chars * room / e.prompt_tokens * 0.9)
    return sent_chars // 2
