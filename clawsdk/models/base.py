"""What every model backend implements.

Messages and tools are OpenAI-shaped dicts (role/content/tool_calls; {"type": "function", ...}),
the lingua franca of vLLM, llama.cpp servers and hosted APIs. Backends whose chat template has
no tool section render tools and parse calls with clawsdk's one tool-call format.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ChatResponse:
    #: the assistant message: {"role": "assistant", "content": str | None, "tool_calls": [...]}
    message: dict[str, Any]
    #: {"prompt_tokens": int, "completion_tokens": int}
    usage: dict[str, int] = field(default_factory=dict)
    finish_reason: str | None = None
    #: where the backend gives them (RL needs them)
    prompt_token_ids: list[int] | None = None
    completion_token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    raw: Any = None


class Model(abc.ABC):
    """A chat model with tool calling. Raise clawsdk.errors.ModelError for backend failures."""

    #: the model id recorded on rollouts, e.g. "openai:gpt-4o-mini" or "embedded:smollm2-135m"
    name: str = "model"

    @abc.abstractmethod
    async def chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                   **params: Any) -> ChatResponse:
        """One completion. params: max_tokens, temperature, timeout_s, stop, seed."""

    async def aclose(self) -> None:
        """Release connections or weights."""
