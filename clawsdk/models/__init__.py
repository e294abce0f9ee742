"""The model contract: a chat model with tool calling."""

from clawsdk.models.base import ChatResponse, Model

__all__ = ["ChatResponse", "Model"]
