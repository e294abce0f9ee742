"""The events a rollout records, one type per kind.

An emitter builds one (`ToolCall(tool="read", args={...})`) and hands it to `Recorder.record`; the store keeps
its payload as the JSON object it always was (`Event.payload()`), and a reader gets the type back from a stored
row (`parse_event`). A payload field no type declares (another writer's, a newer clawsdk's) is kept in
`extra`, never dropped; a kind clawsdk does not write is read as `Foreign`; a payload that is not a JSON
object is read as `Unreadable`, so a view can show it as such instead of failing on it.

Dataclasses with slots, not pydantic: the recorder builds one per event on every rollout's hot path, and
nothing is validated on the way in (every emitter is ours). On the way out the fields hold what the store
holds: a row another writer put there may carry any JSON in a field, so readers stay defensive about values.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Literal

from clawsdk.errors import StoreError

__all__ = [
    "EVENT_KINDS",
    "LINKS",
    "ErrorEvent",
    "Event",
    "EventError",
    "Foreign",
    "ModelRequest",
    "ModelResponse",
    "Note",
    "SandboxExec",
    "StoredEvent",
    "ToolCall",
    "ToolResult",
    "Unreadable",
    "VerifierScore",
    "event_of",
    "parse_event",
]


class EventError(StoreError):
    """A stored event a reader cannot take: names the rollout, the attempt and the seq."""


@dataclass(slots=True, kw_only=True)
class _Event:
    #: set on the way out of the store: the event's place in its attempt, its time, how long it took
    seq: int | None = None
    ts: str | None = None
    duration_ms: float | None = None
    #: payload fields the type does not declare, as they were stored
    extra: dict[str, Any] = field(default_factory=dict)
    #: a stored payload's keys in their order, so that payload() gives back what was stored
    _order: tuple[str, ...] | None = field(default=None, init=False, repr=False, compare=False)

    #: (attribute, payload key, written when None) per declared field, in the order payloads have them
    _keys: ClassVar[tuple[tuple[str, str, bool], ...]] = ()
    _attrs: ClassVar[dict[str, str]] = {}  # payload key -> attribute
    #: the kind's name (a slotted dataclass keeps no field default on the class)
    KIND: ClassVar[str] = ""

    def payload(self) -> dict[str, Any]:
        """The payload as stored: declared fields (a None left out, unless the kind always writes it), then
        `extra`. (Each kind's own, built by _declare, is this loop unrolled: the recorder calls it per event.)"""
        return self._stored_payload()

    def _stored_payload(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self._order is not None:  # read from the store: its keys as they were, explicit nulls included
            attrs = self._attrs
            for key in self._order:
                attr = attrs.get(key)
                if attr is not None:
                    out[key] = getattr(self, attr)
                elif key in self.extra:
                    out[key] = self.extra[key]
        for attr, key, keep_none in self._keys:
            value = getattr(self, attr)
            if (value is not None or keep_none) and key not in out:
                out[key] = value
        if self.extra:
            for key, value in self.extra.items():
                out.setdefault(key, value)
        return out

    # the row shape of earlier releases (`e["kind"]`, `e["payload"]["tool"]`), for readers written against it
    def __getitem__(self, key: str) -> Any:
        if key == "payload":
            return self.payload()
        if key in ("seq", "kind", "ts", "duration_ms"):
            return getattr(self, key)
        raise KeyError(key)

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    @classmethod
    def from_payload(cls, payload: dict[str, Any], *, seq: int | None = None, ts: str | None = None,
                     duration_ms: float | None = None) -> Any:
        """The event of `payload` (not validated: a field holds whatever the payload has, None when absent)."""
        event = object.__new__(cls)
        rest = dict(payload)
        for attr, key, _ in cls._keys:
            object.__setattr__(event, attr, rest.pop(key, None))
        event.kind = cls.KIND  # type: ignore[attr-defined]
        event.seq, event.ts, event.duration_ms, event.extra = seq, ts, duration_ms, rest
        event._order = tuple(payload)
        return event


def _declare(cls: type[_Event], *, always: tuple[str, ...] = (), keys: dict[str, str] | None = None) -> None:
    """Record `cls`'s payload fields: its own dataclass fields, in order, but `kind` (`keys` renames an
    attribute whose payload key is `kind`; `always` are written even when None)."""
    base = {f.name for f in fields(_Event)}
    names = [f.name for f in fields(cls) if f.name not in base and f.name != "kind"]
    cls._keys = tuple((n, (keys or {}).get(n, n), n in always) for n in names)
    cls._attrs = {key: attr for attr, key, _ in cls._keys}
    cls.KIND = str(next(f.default for f in fields(cls) if f.name == "kind"))
    # payload() unrolled for this kind, as dataclasses builds __init__: on the recorder's hot path a loop
    # over the fields with getattr cost twice as much
    lines = ["def payload(self):", "    if self._order is not None:", "        return self._stored_payload()",
             "    out = {}"]
    for attr, key, keep_none in cls._keys:
        lines += [f"    out[{key!r}] = self.{attr}"] if keep_none else \
                 [f"    v = self.{attr}", "    if v is not None:", f"        out[{key!r}] = v"]
    lines += ["    if self.extra:", "        for k, v in self.extra.items():", "            out.setdefault(k, v)",
              "    return out"]
    namespace: dict[str, Any] = {}
    exec("\n".join(lines), namespace)  # noqa: S102 - our own field names, as dataclasses does
    namespace["payload"].__doc__ = _Event.payload.__doc__
    cls.payload = namespace["payload"]  # type: ignore[method-assign]  # the generated method replaces the loop


@dataclass(slots=True, kw_only=True)
class ModelRequest(_Event):
    """A model call as asked: the tool-loop agent's (`model`, `turn`) or a client's through the proxy
    (`protocol`: the API it spoke where not OpenAI chat; `params`: every other field it sent)."""

    kind: Literal["model_request"] = field(default="model_request", init=False)
    model: str | None = None
    turn: int | None = None
    messages: list[dict[str, Any]] | None = None
    tools: list[dict[str, Any]] | None = None
    params: dict[str, Any] | None = None
    protocol: str | None = None


@dataclass(slots=True, kw_only=True)
class ModelResponse(_Event):
    """A model's answer. `request` is the seq of the request it answers (the proxy: several may be in
    flight). An answer that failed has `error` (and `status`; `abandoned` when the client hung up, with
    the `partial` message that had come). Token ids and logprobs where the backend gives them."""

    kind: Literal["model_response"] = field(default="model_response", init=False)
    model: str | None = None
    turn: int | None = None
    message: dict[str, Any] | None = None
    usage: dict[str, Any] | None = None
    finish_reason: str | None = None
    prompt_token_ids: list[int] | None = None
    completion_token_ids: list[int] | None = None
    logprobs: list[Any] | None = None
    choices: list[dict[str, Any]] | None = None
    error: Any = None
    status: int | None = None
    abandoned: bool | None = None
    partial: dict[str, Any] | None = None
    request: int | None = None


@dataclass(slots=True, kw_only=True)
class ToolCall(_Event):
    """A tool call: `args` as the agent sent them (`{"unreadable": ...}` when they could not be read);
    `id` the call id an imported trajectory had."""

    kind: Literal["tool_call"] = field(default="tool_call", init=False)
    tool: str
    args: Any = None
    id: str | None = None


@dataclass(slots=True, kw_only=True)
class ToolResult(_Event):
    """A tool's answer to the call of seq `call`. `is_error` None: the call was `cancelled` before it
    answered. `structured`: the tool's structured content; `tool_host_start_ms`: the in-sandbox tool host's
    start, when this call paid for it."""

    kind: Literal["tool_result"] = field(default="tool_result", init=False)
    tool: str
    call: int | None = None
    is_error: bool | None = None
    content: str | None = None
    cancelled: bool | None = None
    structured: Any = None
    tool_host_start_ms: float | None = None


@dataclass(slots=True, kw_only=True)
class SandboxExec(_Event):
    """A command run in the sandbox (a verifier's, a harness agent's), with its output's tails."""

    kind: Literal["sandbox_exec"] = field(default="sandbox_exec", init=False)
    command: Any = None
    stage: str | None = None
    #: the harness agent whose run this was (its other figures, `model_calls`, `boot_s`, ..., in `extra`)
    harness: str | None = None
    exit_code: int | None = None
    stdout: str | None = None
    stderr: str | None = None
    timed_out: bool | None = None

    @classmethod
    def of(cls, command: Any, result: Any, *, stage: str | None = None, tail: int = 4000,
           **extra: Any) -> SandboxExec:
        """The event of a sandbox's ExecResult: its output's last `tail` characters, its duration."""
        return cls(command=command, stage=stage, exit_code=result.exit_code, timed_out=result.timed_out,
                   stdout=result.stdout[-tail:], stderr=result.stderr[-tail:], extra=extra,
                   duration_ms=result.duration_s * 1000)


@dataclass(slots=True, kw_only=True)
class VerifierScore(_Event):
    """One check of a verifier (kind `verifier`): its name, score and why."""

    kind: Literal["verifier"] = field(default="verifier", init=False)
    check: str
    score: float | None = None
    detail: str | None = None


@dataclass(slots=True, kw_only=True)
class ErrorEvent(_Event):
    """What went wrong (kind `error`): `error_kind` (the payload's `kind`: a failure kind, or
    `malformed_tool_call`, `context_overflow`), the message, and `raw` what a model answered when that was it."""

    kind: Literal["error"] = field(default="error", init=False)
    error_kind: str
    message: str | None = None
    raw: Any = None


@dataclass(slots=True, kw_only=True)
class Note(_Event):
    """Anything else worth keeping: `event` names it where it has a name (finish, end_turn, session_ended,
    task_read, replay, ...); its fields are in `extra` (a judge's answer, a harness's remark, an ATIF header)."""

    kind: Literal["note"] = field(default="note", init=False)
    event: str | None = None


_declare(ModelRequest, always=("messages", "tools", "params"))
_declare(ModelResponse)
_declare(ToolCall)
_declare(ToolResult, always=("is_error",))
_declare(SandboxExec)
_declare(VerifierScore)
_declare(ErrorEvent, keys={"error_kind": "kind"})
_declare(Note)

Event = ModelRequest | ModelResponse | ToolCall | ToolResult | SandboxExec | VerifierScore | ErrorEvent | Note
_TYPES: dict[str, Any] = {t.KIND: t for t in (ModelRequest, ModelResponse, ToolCall, ToolResult, SandboxExec,
                                              VerifierScore, ErrorEvent, Note)}
EVENT_KINDS = tuple(_TYPES)

#: payload fields that name another event of the attempt by its seq
LINKS = {"tool_result": "call", "model_response": "request"}


def event_of(kind: str, payload: dict[str, Any] | None) -> Event:
    """The event of kind `kind` with `payload`'s fields (its other fields in `extra`, its order kept);
    ValueError for a kind clawsdk does not record, TypeError for a payload that is not a dict."""
    cls = _TYPES.get(kind)
    if cls is None:
        raise ValueError(f"unknown event kind {kind!r}; one of {EVENT_KINDS}")
    if not isinstance(payload, dict):
        raise TypeError(f"the payload of a {kind} event is a dict, not {type(payload).__name__}")
    return cls.from_payload(payload)


@dataclass(slots=True, kw_only=True)
class Foreign(_Event):
    """An event of a kind clawsdk does not write (another writer's), its payload whole in `extra`."""

    kind: str


@dataclass(slots=True, kw_only=True)
class Unreadable(_Event):
    """A stored event whose payload is not a JSON object: its text as stored and what is wrong with it."""

    kind: str
    raw: str | None = None
    problem: str = ""

    def payload(self) -> dict[str, Any]:
        return {"raw": self.raw}


StoredEvent = Event | Foreign | Unreadable


def parse_event(row: dict[str, Any], *, strict: bool = False) -> StoredEvent:
    """The typed event of a stored row (`seq`, `kind`, `ts`, `duration_ms`, `payload` as JSON text or as
    parsed). A payload that is not a JSON object is `Unreadable`, or with `strict` an EventError naming the
    rollout, attempt and seq (a reader that cannot do without it: an export)."""
    payload, kind = row.get("payload"), str(row.get("kind"))
    seq, ts, ms = row.get("seq"), row.get("ts"), row.get("duration_ms")
    problem = ""
    if isinstance(payload, (str, bytes)):
        try:
            payload = json.loads(payload)
        except ValueError as e:
            problem = f"its payload is not JSON ({e})"
    if not problem and not isinstance(payload, dict):
        problem = f"its payload is a JSON {type(payload).__name__}, not an object"
    if problem:
        if strict:
            raise EventError(f"rollout {row.get('rollout_id', '?')} attempt {row.get('attempt', '?')}: the {kind} "
                             f"event at seq {seq}: {problem}; the store was written by something else, or damaged")
        raw = row.get("payload")
        return Unreadable(kind=kind, raw=raw if isinstance(raw, str) or raw is None else json.dumps(raw),
                          problem=problem, seq=seq, ts=ts, duration_ms=ms)
    assert isinstance(payload, dict)  # a payload that is not an object was returned as Unreadable above
    cls = _TYPES.get(kind)
    if cls is None:
        return Foreign(kind=kind, extra=payload, seq=seq, ts=ts, duration_ms=ms)  # payload(): in its order
    return cls.from_payload(payload, seq=seq, ts=ts, duration_ms=ms)
