"""In-process model backends: `transformers`, `embedded`, and the optional `vllm` and `llamacpp`.

One module per backend (transformers, embedded, vllm, llamacpp in this folder)
over the batching engine they share (local_engine). This module registers them and keeps
the names that older code imports from here.
"""

from __future__ import annotations

from clawsdk.hookspecs import hookimpl
from clawsdk_plugins.models.embedded import EMBEDDED_NAME, EmbeddedModel, dequantized_copy, embedded_gguf
from clawsdk_plugins.models.llamacpp import LlamaCppModel
from clawsdk_plugins.models.local_engine import LocalChatModel, cache_dir
from clawsdk_plugins.models.transformers import TransformersModel
from clawsdk_plugins.models.vllm import VLLMModel

__all__ = ["EMBEDDED_NAME", "EmbeddedModel", "LlamaCppModel", "LocalChatModel", "TransformersModel", "VLLMModel",
           "cache_dir", "dequantized_copy", "embedded_gguf", "register_models"]


@hookimpl
def register_models(register):
    register("transformers", TransformersModel)
    register("embedded", EmbeddedModel)
    register("vllm", VLLMModel)
    register("llamacpp", LlamaCppModel)
