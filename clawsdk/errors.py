"""Errors that carry the failure kind of a rollout, and the task-format error users see."""

from __future__ import annotations

import errno
from collections.abc import Sequence
from enum import Enum


class FailureKind(str, Enum):  # noqa: UP042 - StrEnum would change what str() and format() of a kind give
    """How a rollout ended. Only ``ok``, ``agent_error`` and ``agent_timeout`` are the agent's doing."""

    OK = "ok"
    AGENT_ERROR = "agent_error"
    AGENT_TIMEOUT = "agent_timeout"
    MODEL_ERROR = "model_error"
    SANDBOX_ERROR = "sandbox_error"
    VERIFIER_ERROR = "verifier_error"
    VERIFIER_TIMEOUT = "verifier_timeout"
    CANCELLED = "cancelled"

    @property
    def scored(self) -> bool:
        """Whether the verdict counts as the agent's score (infrastructure failures never do)."""
        return self in (FailureKind.OK, FailureKind.AGENT_ERROR, FailureKind.AGENT_TIMEOUT)

    @property
    def retryable(self) -> bool:
        return self in (FailureKind.MODEL_ERROR, FailureKind.SANDBOX_ERROR, FailureKind.VERIFIER_ERROR)


class ClawError(Exception):
    """Base of clawsdk's errors."""


class RolloutError(ClawError):
    """An error that decides a rollout's failure kind."""

    kind: FailureKind = FailureKind.AGENT_ERROR


class AgentError(RolloutError):
    kind = FailureKind.AGENT_ERROR


class AgentTimeout(RolloutError):
    """The agent ran out of its budget (turns, tokens, generation wall clock) before finishing."""

    kind = FailureKind.AGENT_TIMEOUT


class ModelError(RolloutError):
    """The model backend failed. `raw` is what it answered, when that was the problem (capped)."""

    kind = FailureKind.MODEL_ERROR

    def __init__(self, message: str, *, raw: str | None = None):
        super().__init__(message)
        self.raw = raw


class ContextOverflow(ModelError):
    """The conversation no longer fits the model's context window (`window` tokens; the prompt had
    `prompt_tokens`, where the backend says).

    Whose failure it is depends on who made the conversation long: once it holds the agent's own
    turns (an assistant or tool message), the agent filled its context (reading until it overflows)
    and it is scored as `agent_error`, never as an unscored backend failure. An opening prompt that
    does not fit is a setup problem (a window too small for the task): `model_error`.
    """

    SETUP_HINT = (" (the opening prompt: serve the model with a longer context window, e.g. vLLM's "
                  "--max-model-len, or lower max_tokens)")

    def __init__(self, message: str, messages: Sequence = (), *, window: int | None = None,
                 prompt_tokens: int | None = None):
        grown = any(isinstance(m, dict) and m.get("role") in ("assistant", "tool") for m in messages)
        if not grown and not message.endswith(self.SETUP_HINT):
            message += self.SETUP_HINT
        super().__init__(message)
        self.window, self.prompt_tokens = window, prompt_tokens
        self.kind = FailureKind.AGENT_ERROR if grown else FailureKind.MODEL_ERROR

    def __reduce__(self):  # the kind and the message's hint come from messages it no longer holds
        turns = [{"role": "assistant"}] if self.kind is FailureKind.AGENT_ERROR else []
        return type(self), (str(self), turns), dict(self.__dict__)


class SandboxError(RolloutError):
    kind = FailureKind.SANDBOX_ERROR


class VerifierError(RolloutError):
    kind = FailureKind.VERIFIER_ERROR


class VerifierTimeout(RolloutError):
    kind = FailureKind.VERIFIER_TIMEOUT


class RolloutCancelled(RolloutError):
    """Stopped from outside (the server shut down) before the agent finished: unscored, not retried."""

    kind = FailureKind.CANCELLED


class PathEscapeError(ClawError, ValueError):
    """A path that would leave the workspace."""


class FileTooLarge(OSError):
    """A file over what a tool or a verifier reads; the message names it, its size and the limit."""

    def __init__(self, path: str, size: int, limit: int):
        super().__init__(errno.EFBIG, f"{path} is {size / 2**20:.1f} MiB, over the {limit / 2**20:g} MiB "
                                      "read of one file", path)
        self.size, self.limit = size, limit

    def __str__(self) -> str:
        return self.strerror or ""


class TaskFormatError(ClawError):
    """A task that cannot be read: which file, which field, what is wrong."""

    def __init__(self, path: str, message: str, field: str | None = None, task_id: str | None = None):
        self.path = str(path)
        self.field = field
        self.task_id = task_id
        # one line whatever the parser said: it is printed as one `skipped task:` line and stored
        self.message = " ".join(str(message).split()) if "\n" in str(message) else str(message)
        where = self.path + (f": {field}" if field else "")
        super().__init__(f"{where}: {self.message}")


class StoreError(ClawError):
    """A store file that cannot be used: not SQLite, a folder, still being created."""


class PluginError(ClawError):
    """An unknown or broken plugin name."""
