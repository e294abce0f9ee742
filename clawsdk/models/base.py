"""What every model backend implements.

Messages and tools are OpenAI-shaped dicts (role/content/tool_calls; {"type": "function", ...}),
the lingua franca of vLLM, llama.cpp servers and hosted APIs. Backends whose chat template has
no tool section render tools and parse calls with clawsdk's one tool-call format.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any

from clawsdk.plugins import Contract


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


class ModelPlugin(Contract):
    """The model kind: a factory ``(**options) -> Model`` (`--model BACKEND:NAME`, `--model-opt`),
    registered with `register_models`. It may carry this method; left out, it means what its default does."""

    kind = "models"

    def weights(self, name: str) -> str | None:
        """The local checkpoint folder of model `name` (`clawsdk train`, `--tokenizer`): the embedded
        backend's dequantized copy, a transformers path. Left out: None, the backend keeps no weights here."""
        located = self.call("weights", name)
        return None if located is None else str(located)

