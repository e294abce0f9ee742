"""`llamacpp:GGUF`: a GGUF file through llama-cpp-python (optional extra); `--model llamacpp`
uses the embedded model's GGUF."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from clawsdk.errors import ModelError
from clawsdk_plugins.models.embedded import EMBEDDED_NAME, embedded_gguf
from clawsdk_plugins.models.local_engine import Batch, LocalChatModel, need, now_past


class LlamaCppModel(LocalChatModel):
    """A GGUF file through llama-cpp-python, one request at a time, token by token (so the
    wall-clock limit stops it mid-generation). `--model llamacpp` uses the embedded GGUF."""

    backend = "llamacpp"

    def __init__(self, name: str | None = None, *, n_ctx: int = 8192, threads: int | None = None,
                 n_gpu_layers: int = 0, **options: Any):
        options["max_batch"] = 1
        super().__init__(**options)
        self.path = name
        self.name = f"llamacpp:{name or EMBEDDED_NAME}"
        self.n_ctx = n_ctx
        self.threads = threads
        self.n_gpu_layers = n_gpu_layers
        self.llm: Any = None

    def _load(self) -> None:
        llama_cpp = need("llama_cpp", "llamacpp")
        path = self.path or str(embedded_gguf())
        if not Path(path).is_file():
            raise ModelError(f"no GGUF file at {path}; give --model llamacpp:/path/to/model.gguf")
        self.llm = llama_cpp.Llama(model_path=path, n_ctx=self.n_ctx, n_threads=self.threads,
                                   n_gpu_layers=self.n_gpu_layers, logits_all=False, verbose=False)
        self.tokenizer = _LlamaTokenizer(self.llm)
        self.context_window = self.context_window or self.n_ctx

    def _generate(self, batch: Batch) -> None:
        requests = batch.requests
        import numpy as np

        llm = self.llm
        for r in requests:
            llm.reset()
            eos = llm.token_eos()
            gen = llm.generate(r.prompt_ids, temp=r.temperature, top_p=r.top_p or 1.0, reset=True)
            for token in gen:
                r.token_ids.append(int(token))
                try:  # the logits that chose this token (llama-cpp-python keeps the last row)
                    logits = np.asarray(llm.scores[llm.n_tokens - 1], dtype=np.float64)
                    m = logits.max()
                    r.logprobs.append(float(logits[token] - m - np.log(np.exp(logits - m).sum())))
                except (IndexError, ValueError, AttributeError):
                    pass
                if token == eos:
                    r.finish_reason = "stop"
                elif len(r.token_ids) >= r.max_new_tokens:
                    r.finish_reason = "length"
                elif r.cancelled:
                    r.finish_reason = "cancelled"
                elif now_past(r):
                    r.finish_reason = "timeout"
                elif r.stop and any(s in self.tokenizer.decode(r.token_ids[-24:]) for s in r.stop):
                    r.finish_reason = "stop"
                if r.finish_reason:
                    break
            if len(r.logprobs) != len(r.token_ids):
                r.logprobs = []
            r.finish_reason = r.finish_reason or "length"
            batch.answer(r)


class _LlamaTokenizer:
    """The slice of a HF tokenizer that LocalChatModel uses, over llama.cpp's own tokenizer and template."""

    def __init__(self, llm: Any):
        self.llm = llm
        self.chat_template = (llm.metadata or {}).get("tokenizer.chat_template")

    def apply_chat_template(self, messages: list[dict], add_generation_prompt: bool = True, tokenize: bool = False,
                            tools: Any = None) -> str:
        import jinja2

        env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
        return env.from_string(self.chat_template or "").render(messages=messages, tools=tools,
                                                                 add_generation_prompt=add_generation_prompt,
                                                                 bos_token="", eos_token="")

    def __call__(self, text: str, add_special_tokens: bool = False) -> dict:
        return {"input_ids": self.llm.tokenize(text.encode("utf-8"), add_bos=add_special_tokens, special=True)}

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return self.llm.detokenize(ids, special=not skip_special_tokens).decode("utf-8", "replace")
