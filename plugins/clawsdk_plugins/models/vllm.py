"""`vllm:PATH`: an in-process vLLM engine (optional extra, GPUs), batched by the shared engine."""

from __future__ import annotations

from typing import Any

from clawsdk_plugins.models.local_engine import Batch, LocalChatModel, need, now_past


class VLLMModel(LocalChatModel):
    """An in-process vLLM engine (GPU). The batch is one `LLM.generate` call; a row past its
    deadline is reported as finish_reason "timeout" when the batch returns (vLLM cannot stop one
    row mid-call), so keep max_tokens bounded."""

    backend = "vllm"

    def __init__(self, name: str | None = None, *, gpu_memory_utilization: float = 0.85, engine: dict | None = None,
                 **options: Any):
        if not name:
            raise ValueError("the vllm backend needs a checkpoint: --model vllm:PATH")
        options.setdefault("max_batch", 64)
        super().__init__(**options)
        self.path = name
        self.name = f"vllm:{name}"
        self.engine_args = {"gpu_memory_utilization": gpu_memory_utilization, **(engine or {})}
        self.llm: Any = None

    def _load(self) -> None:
        vllm = need("vllm", "vllm")
        self.llm = vllm.LLM(model=self.path, **self.engine_args)
        self.tokenizer = self.llm.get_tokenizer()
        if self.context_window is None:
            self.context_window = int(self.llm.llm_engine.model_config.max_model_len)

    def _generate(self, batch: Batch) -> None:
        requests = batch.requests
        from vllm import SamplingParams

        prompts = [{"prompt_token_ids": r.prompt_ids} for r in requests]
        sampling = [SamplingParams(max_tokens=r.max_new_tokens, temperature=r.temperature, top_p=r.top_p or 1.0,
                                   seed=r.seed, stop=r.stop or None, logprobs=0) for r in requests]
        outputs = self.llm.generate(prompts, sampling, use_tqdm=False)
        for r, out in zip(requests, outputs, strict=True):
            c = out.outputs[0]
            r.token_ids = list(c.token_ids)
            r.logprobs = [next(iter(d.values())).logprob if d else 0.0 for d in (c.logprobs or [])]
            r.finish_reason = "timeout" if now_past(r) else ("length" if c.finish_reason == "length" else "stop")
