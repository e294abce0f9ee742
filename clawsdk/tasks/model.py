"""The Task: instruction, initial workspace, hidden verifier files, reference solution, verifier."""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import math
import re
import weakref
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

TASK_SCHEMA_VERSION = 1
#: the name of a server in a task's `mcp_servers` (AgentSkills' skill names)
MCP_SERVER_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
#: the most bytes one file or folder name may have (Linux, macOS)
MAX_NAME_BYTES = 255
#: an id names the task's folder when tasks are written (convert, synth): one name
MAX_ID_BYTES = MAX_NAME_BYTES


def check_task_id(task_id: str) -> str:
    """`task_id` if it can name one folder, else ValueError saying what to change.

    Task files come from elsewhere (downloaded ClawGym or PinchBench sets), and writers put a task
    at PARENT/ID: an id of "../x" or "/etc/x" would write outside PARENT.
    """
    if task_id in (".", "..") or any(c in task_id for c in "/\\"):
        raise ValueError(f"{task_id!r} cannot be a task id: an id names the task's folder, so it has no "
                         "'/' or '\\' and is not '.' or '..'")
    if any(ord(c) < 32 or ord(c) == 127 for c in task_id):
        raise ValueError(f"{task_id!r} cannot be a task id: it holds a control character")
    if len(task_id.encode("utf-8")) > MAX_ID_BYTES:
        raise ValueError(f"a task id is at most {MAX_ID_BYTES} bytes (it names a folder); this one is "
                         f"{len(task_id.encode('utf-8'))}: {task_id[:40]!r}...")
    return task_id


def first_where(value: Any, bad: Callable[[Any], bool], where: str = "") -> str | None:
    """The path (`a.b[0]`) of the first value or key in `value`, walking models, dicts and lists, for which
    `bad` is true; "" for `value` itself, None when there is none."""
    if bad(value):
        return where
    if isinstance(value, BaseModel):
        value = dict(value)  # its fields and extras
    if isinstance(value, dict):
        for k, v in value.items():
            here = f"{where}.{k}" if where else str(k)
            if bad(k):
                return here
            if (found := first_where(v, bad, here)) is not None:
                return found
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            if (found := first_where(v, bad, f"{where}[{i}]")) is not None:
                return found
    return None


def not_utf8(value: Any) -> bool:
    """A text that cannot be written as UTF-8: one holding a lone surrogate, as a file name that is not
    UTF-8 is read (`bad\\xff.txt` becomes 'bad\\udcff.txt') and as JSON's "\\udcff" is parsed."""
    if not isinstance(value, str):
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def unstorable(value: Any) -> str | None:
    """Why `value` (one value, not what it holds) cannot be part of a task the store writes as JSON text, or
    None: a text that is not UTF-8, binary data (YAML's `!!binary`), a set (YAML's `!!set`: JSON has none, and
    its order, so its hash, changes from run to run)."""
    if isinstance(value, str):
        return "is not UTF-8 text (it holds a lone surrogate)" if not_utf8(value) else None
    if isinstance(value, (bytes, bytearray, memoryview)):
        return ("is binary data (as YAML's !!binary gives), which a task cannot hold: write it as text "
                "(base64 in a string, or a file in workspace/ or hidden/)")
    if isinstance(value, (set, frozenset)):
        return "is a set (as YAML's !!set gives), which a task cannot hold: write a list"
    return None


def first_unstorable(value: Any, where: str = "") -> tuple[str, str] | None:
    """(path, why) of the first value or key in `value` that `unstorable` refuses; None when there is none."""
    reasons: list[str] = []

    def bad(v: Any) -> bool:
        reason = unstorable(v)
        if reason is not None:
            reasons.append(reason)
        return reason is not None

    found = first_where(value, bad, where)
    return None if found is None else (found, reasons[-1])


def not_finite(value: Any) -> bool:
    return isinstance(value, float) and not math.isfinite(value)


#: The six ClawGym-Bench categories.
CATEGORIES = (
    "productivity & collaboration",
    "systems & automation",
    "analysis & reasoning",
    "content & domain",
    "planning & knowledge",
    "software development",
)


class File(BaseModel):
    """One file of a workspace or of the hidden verifier set; text or base64 bytes."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    text: str | None = None
    b64: str | None = None
    executable: bool = False

    @model_validator(mode="after")
    def _one_content(self) -> File:
        if (self.text is None) == (self.b64 is None):
            raise ValueError(f"file {self.path!r}: give exactly one of 'text' or 'b64'")
        if self.b64 is not None:
            try:
                base64.b64decode(self.b64, validate=True)
            except ValueError:
                raise ValueError(f"file {self.path!r}: 'b64' is not valid base64") from None
        return self

    @field_validator("path")
    @classmethod
    def _relative(cls, path: str) -> str:
        from clawsdk.tasks.paths import normalize_relative

        norm = normalize_relative(path)
        if norm == ".":
            raise ValueError(f"file {path!r} names the folder itself, not a file in it")
        # the hash, the store and every sandbox write the name as UTF-8: one that is not ended the whole run
        if not_utf8(norm):
            raise ValueError(f"file {path!r}: the file name is not UTF-8; rename it")
        long = next((p for p in norm.split("/") if len(p.encode("utf-8")) > MAX_NAME_BYTES), None)
        if long is not None:  # no file system holds it: every rollout was a sandbox_error
            raise ValueError(f"file {path[:60]!r}...: a file or folder name is at most {MAX_NAME_BYTES} bytes; "
                             f"{long[:40]!r}... is {len(long.encode('utf-8'))}")
        return norm

    @field_validator("text")
    @classmethod
    def _utf8(cls, text: str | None) -> str | None:
        if not_utf8(text):
            raise ValueError("the text is not UTF-8 (it holds a lone surrogate, such as JSON's \"\\udcff\"); "
                             "give bytes that are not text as 'b64'")
        return text

    @classmethod
    def from_bytes(cls, path: str, data: bytes, executable: bool = False) -> File:
        try:
            return cls(path=path, text=data.decode("utf-8"), executable=executable)
        except UnicodeDecodeError:
            return cls(path=path, b64=base64.b64encode(data).decode("ascii"), executable=executable)

    @property
    def data(self) -> bytes:
        if self.text is not None:
            return self.text.encode("utf-8")
        return base64.b64decode(self.b64 or "")


class ToolCall(BaseModel):
    """A call of one tool with its arguments; the unit of a reference solution."""

    model_config = ConfigDict(extra="forbid")

    tool: str
    args: dict[str, Any] = Field(default_factory=dict)


def _no_bool(value: Any) -> Any:
    """YAML reads yes/no/on/off/true/false as booleans, and pydantic took True for 1: `timeout_s: yes` gave
    every rollout one second, each ending charged to the agent as an agent_timeout."""
    if isinstance(value, bool):
        raise ValueError(f"is {str(value).lower()} where a number belongs (YAML reads yes/no/on/off as true/false)")
    return value


#: A number (or a whole number) in a task's or a verifier's settings: true/false are refused, not read as 1/0.
Number = Annotated[float, BeforeValidator(_no_bool)]
Count = Annotated[int, BeforeValidator(_no_bool)]


#: the address space (MiB) of the process the tools behind the boundary run in, unless a task says
DEFAULT_TOOL_MEMORY_MB = 1024
#: the most characters of one tool's result the agent reads and the store records, unless a task says
DEFAULT_TOOL_OUTPUT_CHARS = 1024 * 1024


class Limits(BaseModel):
    # inf and nan are refused: the store keeps a task as JSON, which has neither (a stored null made
    # `data select` fail for the whole store)
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    timeout_s: Number = Field(600.0, gt=0, description="wall clock for the agent's whole run")
    tool_timeout_s: Number = Field(60.0, gt=0, description="one tool call")
    verifier_timeout_s: Number = Field(120.0, gt=0, description="the whole verification")
    max_tool_calls: Count = Field(200, gt=0)
    # What the boundary enforces on the tools that run behind it (clawsdk.mcp.toolhost); left out of dumps
    # (and so of the hash) at their defaults, so tasks written before them keep their hash.
    tool_memory_mb: Count = Field(DEFAULT_TOOL_MEMORY_MB, ge=64, exclude_if=lambda v: v == DEFAULT_TOOL_MEMORY_MB,
                                  description="address space of the process a task's tools run in")
    tool_output_chars: Count = Field(DEFAULT_TOOL_OUTPUT_CHARS, ge=1024,
                                     exclude_if=lambda v: v == DEFAULT_TOOL_OUTPUT_CHARS,
                                     description="the most characters one tool result holds; past it, cut")


class VerifierSpec(BaseModel):
    """Which verifier scores the task and its configuration; validated by that verifier plugin."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    type: str = "checks"
    checks: list[dict[str, Any]] = Field(default_factory=list)
    pass_threshold: Number = Field(1.0, ge=0, le=1)

    @model_validator(mode="after")
    def _finite(self) -> VerifierSpec:
        """No inf or nan anywhere in the spec (a weight, a timeout, an expected value): the store keeps it as
        JSON, which has neither, and an inf weight makes every score nan."""
        where = first_where(self, not_finite)
        if where is not None:
            raise ValueError(f"{where} is not a finite number; inf and nan are refused")
        return self


class ToolPolicy(BaseModel):
    """Which tools the agent gets, like OpenClaw's tools.profile / allow / deny (deny wins).

    Entries are tool names, `group:NAME` (fs, runtime, web, memory, ...), `server:NAME`, or
    `*` wildcards; matching ignores case. See clawsdk.tasks.policy.
    """

    model_config = ConfigDict(extra="forbid")

    profile: str | None = Field(None, description="minimal | coding | messaging | full")
    allow: list[str] = Field(default_factory=list)
    deny: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _known_names(self) -> ToolPolicy:
        from clawsdk.tasks.policy import check_policy

        check_policy(self)
        return self


class McpServer(BaseModel):
    """A stdio MCP server a task's agent gets, started inside the sandbox (behind its boundary) for each
    rollout: `command` is its argv, `{python}` standing for the runner's interpreter with clawsdk's packages
    importable (for servers written in Python); `env` is added to the sandbox's environment."""

    model_config = ConfigDict(extra="forbid")

    command: list[str] = Field(min_length=1)
    env: dict[str, str] = Field(default_factory=dict)


NETWORK_MODES = ("none", "loopback", "allowlist")


class PhaseNetwork(BaseModel):
    """What one phase (the agent's turn, the verifier's) may reach: `none` (nothing outside the sandbox),
    `loopback` (the sandbox's own loopback), `allowlist` (those `hosts` too). A backend that cannot enforce a
    policy refuses the task before it runs, never opens the network."""

    model_config = ConfigDict(extra="forbid")

    mode: str = "none"
    hosts: list[str] = Field(default_factory=list, exclude_if=lambda v: not v)

    @model_validator(mode="after")
    def _known(self) -> PhaseNetwork:
        if self.mode not in NETWORK_MODES:
            raise ValueError(f"mode {self.mode!r}: one of {', '.join(NETWORK_MODES)}")
        if self.hosts and self.mode != "allowlist":
            raise ValueError("hosts: only an allowlist has hosts")
        return self


class NetworkPolicy(BaseModel):
    """Per-phase network policy (Harbor's [agent] / [verifier] network_mode); both default to none."""

    model_config = ConfigDict(extra="forbid")

    agent: PhaseNetwork = Field(default_factory=PhaseNetwork)
    verifier: PhaseNetwork = Field(default_factory=PhaseNetwork)

    def modes(self) -> set[str]:
        return {self.agent.mode, self.verifier.mode}


class Environment(BaseModel):
    """Where a task expects to run, as Harbor tasks say: an image of its own (`dockerfile`, built by the docker
    sandbox from its build `context`), the folder its files name as the workspace (`workdir`, Harbor's /app),
    where its hidden files appear once the agent is done (`tests_dir`, Harbor's /tests), a folder the
    verifier writes in (`logs_dir`, Harbor's /logs), emptied after the agent's turn, and its resources."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    dockerfile: str | None = Field(None, exclude_if=lambda v: v is None)
    context: list[File] = Field(default_factory=list, exclude_if=lambda v: not v)
    workdir: str | None = Field(None, exclude_if=lambda v: v is None)
    tests_dir: str | None = Field(None, exclude_if=lambda v: v is None)
    logs_dir: str | None = Field(None, exclude_if=lambda v: v is None)
    # resources (Harbor's [environment]); the isolating sandboxes apply them in place of their own options
    cpus: Number | None = Field(None, gt=0, exclude_if=lambda v: v is None)
    memory_mb: Count | None = Field(None, ge=64, exclude_if=lambda v: v is None)
    storage_mb: Count | None = Field(None, ge=16, exclude_if=lambda v: v is None)

    @field_validator("workdir", "tests_dir", "logs_dir")
    @classmethod
    def _absolute(cls, path: str | None) -> str | None:
        if path is None:
            return None
        parts = [p for p in path.split("/") if p not in ("", ".")]
        if not path.startswith("/") or not parts or ".." in parts or any(c in path for c in "\x00\n"):
            raise ValueError(f"{path!r}: an absolute folder below '/', without '..'")
        return "/" + "/".join(parts)


class Task(BaseModel):
    """A workspace task <p, s0, A, F, V>; versioned, with a content hash."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = TASK_SCHEMA_VERSION
    id: str = Field(min_length=1)
    instruction: str = Field(min_length=1)
    category: str | None = None
    difficulty: str | None = None
    tags: list[str] = Field(default_factory=list)
    tools: list[str] = Field(default_factory=lambda: ["core"])
    workspace: list[File] = Field(default_factory=list)
    hidden: list[File] = Field(default_factory=list)
    solution: list[ToolCall] | None = None
    verifier: VerifierSpec = Field(default_factory=VerifierSpec)
    limits: Limits = Field(default_factory=Limits)
    # left out of dumps (and so of the hash) when unset, so tasks without them keep their hash
    tool_policy: ToolPolicy | None = Field(None, exclude_if=lambda v: v is None)
    tool_config: dict[str, dict[str, Any]] = Field(default_factory=dict, exclude_if=lambda v: not v,
                                                   description="options per tool server, e.g. web: {pages: ...}")
    mcp_servers: dict[str, McpServer] = Field(default_factory=dict, exclude_if=lambda v: not v,
                                             description="stdio MCP servers started inside the sandbox, by name")
    network: NetworkPolicy | None = Field(None, exclude_if=lambda v: v is None,
                                          description="per-phase network policy; unset: none in both phases")
    environment: Environment | None = Field(None, exclude_if=lambda v: v is None,
                                            description="an image of its own and the paths it runs at (Harbor)")
    provenance: dict[str, Any] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("id")
    @classmethod
    def _folder_name(cls, task_id: str) -> str:
        return check_task_id(task_id)

    @field_validator("category", "difficulty", "tags", "tools", "solution", "verifier", "tool_policy", "tool_config",
                     "mcp_servers", "network", "provenance", "metadata")
    @classmethod
    def _utf8(cls, value: Any) -> Any:
        """Every text is UTF-8 and every value one JSON can write (files check their own): a lone surrogate,
        bytes or a set ended the whole run, at the task's hash or at the store's write of the task."""
        found = first_unstorable(value)
        if found is not None:
            where, why = found
            raise ValueError(f"{where + ' ' if where else ''}{why}")
        return value

    @model_validator(mode="after")
    def _defaults_unset(self) -> Task:
        """A policy or environment that says only the defaults is unset, so the task keeps the hash it has
        without it."""
        if self.network is not None and self.network == NetworkPolicy():
            self.network = None
        if self.environment is not None and self.environment == Environment():
            self.environment = None
        return self

    @model_validator(mode="after")
    def _server_names(self) -> Task:
        for name in self.mcp_servers:
            if not MCP_SERVER_NAME.match(name):
                raise ValueError(f"mcp_servers.{name}: a server name is lower-case letters, digits and hyphens "
                                 "(at most 64), e.g. 'notes'")
            if name in self.tools:
                raise ValueError(f"mcp_servers.{name}: {name!r} is already one of the task's tools; name it apart")
        return self

    @field_validator("workspace", "hidden")
    @classmethod
    def _sorted_unique(cls, files: list[File]) -> list[File]:
        files = sorted(files, key=lambda f: f.path)
        for a, b in itertools.pairwise(files):
            if a.path == b.path:
                raise ValueError(f"file {a.path!r} is given twice")
        paths = {f.path for f in files}
        for f in files:
            parts = f.path.split("/")
            for i in range(1, len(parts)):
                if (folder := "/".join(parts[:i])) in paths:
                    raise ValueError(f"{folder!r} is given as a file and as the folder of {f.path!r}")
        return files

    @field_validator("schema_version")
    @classmethod
    def _known_version(cls, v: int) -> int:
        if v > TASK_SCHEMA_VERSION:
            raise ValueError(
                f"task schema_version {v} is newer than this clawsdk understands "
                f"({TASK_SCHEMA_VERSION}); upgrade clawsdk"
            )
        return v

    @property
    def hash(self) -> str:
        """sha256 over what defines the task's behaviour (not its id, provenance, metadata or an inferred
        category).

        Computed once per content: callers (the store, splits, dedup, the runner) ask for it many
        times, and a dump of a task with large files costs milliseconds. The cache lives outside
        the model (equality, pickling and copies stay untouched) and is keyed on the identity of
        the field values, so assigning a field or a `model_copy(update=...)` gives a fresh hash;
        changing a nested value in place (`task.limits.timeout_s = 1`) is not noticed: assign or
        copy instead.
        """
        # an inferred category is the loader's guess, not the task's content: it leaves the hash as it was
        inferred = category_inferred(self)
        values = (*(self.__dict__[name] for name in _HASHED), inferred)
        cached = _hash_cache.get(id(self))
        if cached is not None and len(cached[1]) == len(values) and all(
                a is b for a, b in zip(cached[1], values, strict=True)):
            return cached[2]
        body = self.model_dump(mode="json", exclude={"id", "provenance", "metadata", "schema_version"})
        if inferred:
            body["category"] = None
        canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        digest = hashlib.sha256(canonical.encode("utf-8")).hexdigest()
        key = id(self)
        # the weak reference's callback drops the entry when the task goes, before its id can be
        # reused; holding the values themselves (not their ids) keeps a replaced value's id unique

        def forget(_ref: object) -> None:
            _hash_cache.pop(key, None)

        _hash_cache[key] = (weakref.ref(self, forget), values, digest)
        return digest


def category_inferred(task: Task) -> bool:
    """Whether the task's category was inferred by a loader (clawsdk.tasks.categories), not given by its data."""
    prov = task.provenance
    return bool(task.category) and isinstance(prov, dict) and bool(prov.get("category_inferred"))


def category_label(task: Task) -> str:
    """The category as every listing and report shows it: an inferred one says so."""
    if not task.category:
        return ""
    return f"{task.category} (inferred)" if category_inferred(task) else task.category


#: id(task) -> (weak reference, the field values hashed, their hash); see Task.hash.
_hash_cache: dict[int, tuple[weakref.ref, tuple, str]] = {}
_HASHED = tuple(name for name in Task.model_fields if name not in {"id", "provenance", "metadata", "schema_version"})
