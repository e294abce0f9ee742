"""The `trl-grpo` trainer: TRL GRPOTrainer whose completions are whole clawsdk rollouts in parallel
sandboxes, rewarded by the task's verifier.

torch, transformers, trl, peft (and vLLM on a GPU) are imported only when it trains.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any

from clawsdk.train import TrainResult
from clawsdk_plugins.trainers.common import (
    _dataset_ref,
    _device,
    _load_model,
    _lora_config,
    _record_checkpoint,
    _save,
    _stage_out,
    checkpointing_arg,
    plan_step,
    resolve_weights,
    state_bytes,
)

log = logging.getLogger(__name__)


def _policy_model(trainer: Any, **options: Any) -> Any:
    """A clawsdk Model that generates with the trainer's current weights: its vLLM engine on a GPU,
    else the model being trained (transformers generate)."""
    from clawsdk_plugins.models.transformers import TransformersModel
    from clawsdk_plugins.models.vllm import VLLMModel

    if getattr(trainer, "use_vllm", False):

        class VLLMPolicy(VLLMModel):
            def _load(self) -> None:
                gen = trainer.vllm_generation
                if getattr(gen, "llm", None) is None:
                    raise ValueError("trl-grpo drives vLLM in colocate mode only (vllm_mode=colocate)")
                self.llm = gen.llm
                self.tokenizer = self.llm.get_tokenizer()
                self.context_window = self.context_window or int(
                    self.llm.llm_engine.model_config.max_model_len
                )

        return VLLMPolicy("policy", **options)

    class TrainedPolicy(TransformersModel):
        def _load(self) -> None:
            self.hf_model = trainer.accelerator.unwrap_model(trainer.model)
            self.tokenizer = trainer.processing_class
            self._setup_tokens()

    model = TrainedPolicy("policy", device=str(trainer.accelerator.device), **options)
    model.name = "policy"
    return model


def _spread(rewards: list) -> bool:
    """Whether a group's scored rewards differ (unscored rollouts, None, take no part, as in TRL)."""
    scored = [r for r in rewards if r is not None]
    return len(scored) > 1 and max(scored) - min(scored) > 1e-9


class TrlGrpoTrainer:
    """GRPO where each completion is a whole clawsdk rollout: the tool-loop agent, driven by the policy
    being trained, works the task in a fresh sandbox through the task's MCP tools, and the verifier's
    score is the reward. Each task gets G rollouts (a group); tool results are masked out of the loss.

    Options: model, num_generations (G), tasks_per_step, max_steps, lr, beta, temperature, sandbox (auto:
    bwrap where it works, as for `clawsdk run`: the policy's commands run in it), concurrency, max_turns,
    max_tokens (per model turn), turn_timeout_s, use_vllm (auto: on a GPU with vllm installed), lora
    (+ lora_r, lora_alpha), seed, threads, agent (extra tool-loop options), checkpointing
    (auto: on when a step's activations would not fit in half the free memory).
    """

    name = "trl-grpo"

    def __init__(
        self,
        model: str = "embedded",
        *,
        num_generations: int = 4,
        tasks_per_step: int = 1,
        max_steps: int = 10,
        lr: float = 1e-6,
        beta: float = 0.0,
        temperature: float = 1.0,
        sandbox: str = "auto",
        concurrency: int = 8,
        max_turns: int = 6,
        max_tokens: int = 256,
        turn_timeout_s: float = 120.0,
        use_vllm: bool | str = "auto",
        lora: bool = False,
        lora_r: int = 16,
        lora_alpha: int | None = None,
        seed: int = 0,
        threads: int | None = None,
        agent: dict | None = None,
        logging_steps: int = 1,
        checkpointing: bool | str = "auto",
    ):
        if num_generations < 2:
            raise ValueError("num_generations must be at least 2: GRPO compares rollouts within a group")
        self.model = model
        self.opts: dict[str, Any] = dict(
            num_generations=num_generations,
            tasks_per_step=tasks_per_step,
            max_steps=max_steps,
            lr=lr,
            beta=beta,
            temperature=temperature,
            sandbox=sandbox,
            concurrency=concurrency,
            max_turns=max_turns,
            max_tokens=max_tokens,
            turn_timeout_s=turn_timeout_s,
            use_vllm=use_vllm,
            lora=lora,
            lora_r=lora_r,
            lora_alpha=lora_alpha,
            seed=seed,
            threads=threads,
            agent=agent or {},
            logging_steps=logging_steps,
            checkpointing=checkpointing,
        )
        self.runs: list[str] = []
        self.episodes: list[dict[str, Any]] = []

    def _use_vllm(self) -> bool:
        flag = self.opts["use_vllm"]
        if flag != "auto":
            return bool(flag)
        import importlib.util

        return _device() == "cuda" and importlib.util.find_spec("vllm") is not None

    def rollout_func(self, db: str | os.PathLike | None, run_prefix: str):
        """The GRPOTrainer rollout_func: one clawsdk run per generation round, G samples per task."""
        from clawsdk.data.tokenize import assemble_episode
        from clawsdk.runtime.runner import rollout_id, run_sync
        from clawsdk.store.store import Store
        from clawsdk_plugins.agents.toolloop import ToolLoopAgent

        o = self.opts
        policy_holder: dict[str, Any] = {}
        tasks_cache: dict[str, Any] = {}

        def rollout(prompts: list, trainer: Any) -> dict[str, list]:
            inputs = trainer._clawsdk_inputs
            if len(inputs) != len(prompts):
                raise RuntimeError(
                    "trl-grpo: the prompts do not line up with the batch (TRL changed its API?)"
                )
            if "policy" not in policy_holder:
                policy_holder["policy"] = _policy_model(
                    trainer, timeout_s=o["turn_timeout_s"], max_batch=max(8, len(prompts))
                )
            policy = policy_holder["policy"]
            # the weights moved since the last step: prompt caches kept with the old ones are stale
            getattr(policy, "prefixes", {}).clear()
            slots: list[tuple[str, int]] = []
            seen: dict[str, int] = {}
            for x in inputs:
                h = x["task_hash"]
                slots.append((h, seen.get(h, 0)))
                seen[h] = seen.get(h, 0) + 1
            with Store(db) as store:
                for h in seen:
                    if h not in tasks_cache:
                        task = store.task(h)
                        if task is None:
                            raise LookupError(
                                f"task {h[:12]} of the prompt set is not in {store.path}; "
                                f"export the prompt set from this store"
                            )
                        tasks_cache[h] = task
            tasks = [tasks_cache[h] for h in seen]
            ids = [t.id for t in tasks]
            if len(set(ids)) != len(ids):
                raise ValueError(
                    "two different tasks with the same id in one GRPO batch; give tasks unique ids"
                )
            run_id = f"{run_prefix}-g{len(self.runs):05d}"
            agent = ToolLoopAgent(
                model=policy,
                max_turns=o["max_turns"],
                max_tokens=o["max_tokens"],
                temperature=o["temperature"],
                turn_timeout_s=o["turn_timeout_s"],
                max_context_chars=10**9,
                **o["agent"],
            )  # no elision: prompts must extend
            run_sync(
                tasks,
                agent=agent,
                samples=max(seen.values()),
                run_id=run_id,
                db=db,
                sandbox=o["sandbox"],
                concurrency=o["concurrency"],
                retries=1,
            )
            # and nothing kept from them stays in memory through the optimizer step (up to PREFIX_BYTES on the GPU)
            getattr(policy, "prefixes", {}).clear()
            self.runs.append(run_id)
            eos = trainer.processing_class.eos_token_id
            out: dict[str, list] = {
                "prompt_ids": [],
                "completion_ids": [],
                "logprobs": [],
                "env_mask": [],
                "clawsdk_reward": [],
                "clawsdk_rollout": [],
            }
            with Store(db) as store:
                for h, k in slots:
                    rid = rollout_id(run_id, tasks_cache[h].id, k)
                    row = store.rollout(rid)
                    responses = [e.payload() for e in store.events(rid) if e.kind == "model_response"]
                    ep = assemble_episode(responses, eos)
                    if ep is None or not ep.completion_ids:
                        out["prompt_ids"].append([eos])
                        out["completion_ids"].append([eos])
                        out["logprobs"].append([0.0])
                        out["env_mask"].append([0])
                    else:
                        out["prompt_ids"].append(ep.prompt_ids)
                        out["completion_ids"].append(ep.completion_ids)
                        out["logprobs"].append(ep.logprobs)
                        out["env_mask"].append(ep.env_mask)
                    scored = row is not None and row["scored"]
                    out["clawsdk_reward"].append(
                        float(row["reward"]) if scored and row is not None and row["reward"] is not None else None
                    )
                    out["clawsdk_rollout"].append(rid)
                    self.episodes.append(
                        {
                            "run_id": run_id,
                            "rollout_id": rid,
                            "reward": out["clawsdk_reward"][-1],
                            "turns": ep.turns if ep else 0,
                            "cut_turns": ep.cut_turns if ep else 0,
                        }
                    )
            return out

        return rollout

    def train(
        self,
        prompts: str,
        out: str | os.PathLike,
        *,
        db: str | os.PathLike | None = None,
        checkpoint_id: str | None = None,
        run_prefix: str | None = None,
    ) -> TrainResult:
        import datasets
        from trl import GRPOConfig, GRPOTrainer

        from clawsdk.data.export import load_rows
        from clawsdk.sandbox.capabilities import choose_sandbox
        from clawsdk.store.store import Store, default_db_path

        o = self.opts
        o["sandbox"] = choose_sandbox(o["sandbox"])  # the checkpoint card records the one that ran
        out = Path(out)
        db = Path(db) if db is not None else default_db_path()
        started = time.perf_counter()
        with Store(db) as store:
            dataset_id, folder = _dataset_ref(store, prompts)
        rows = load_rows(folder)
        if not rows or "task_hash" not in rows[0] or "prompt" not in rows[0]:
            raise ValueError(
                f"{folder} is not an RL prompt set (rows with 'prompt' and 'task_hash'); "
                f"export one with `clawsdk data export --kind rl`"
            )
        ds = datasets.Dataset.from_list([{"prompt": r["prompt"], "task_hash": r["task_hash"]} for r in rows])
        base = resolve_weights(self.model)
        stage = _stage_out(out, base)  # refuses a used -o or the base's folder before training
        model, tok = _load_model(base, o["threads"], lora=o["lora"])
        cuda = _device() == "cuda"
        use_vllm = self._use_vllm()
        g = o["num_generations"]
        # a group's longest sequence: the prompt (about 3 characters a token) and every turn's completion
        longest = max(len(json.dumps(r["prompt"])) // 3 for r in rows) + o["max_tokens"] * o["max_turns"]
        # TRL lines a step's rows up with its groups: the batch stays whole, checkpointing saves the memory
        _, checkpointing, why = plan_step(o["checkpointing"], model.config, g * o["tasks_per_step"], longest,
                                          split=False, reserved=state_bytes(model, o["lora"]))
        log.info("trl-grpo: activation checkpointing %s (%s)", "on" if checkpointing else "off", why)
        args = GRPOConfig(
            output_dir=str(stage / "trainer"),
            per_device_train_batch_size=g * o["tasks_per_step"],
            num_generations=g,
            max_steps=o["max_steps"],
            learning_rate=o["lr"],
            beta=o["beta"],
            temperature=o["temperature"],
            logging_steps=o["logging_steps"],
            save_strategy="no",
            report_to=[],
            seed=o["seed"],
            use_cpu=not cuda,
            bf16=cuda,
            use_vllm=use_vllm,
            vllm_mode="colocate",
            dataloader_num_workers=0,
            disable_tqdm=True,
            max_completion_length=o["max_tokens"] * o["max_turns"],
            **checkpointing_arg(GRPOConfig, checkpointing),
        )
        prefix = run_prefix or f"grpo-{time.strftime('%Y%m%d-%H%M%S')}"

        class ClawsdkGRPOTrainer(GRPOTrainer):
            # TRL hands rollout_func only the prompts; the batch rows carry the task references
            def _generate_and_score_completions(self, inputs):
                self._clawsdk_inputs = inputs
                return super()._generate_and_score_completions(inputs)

        groups: list[list] = []  # each group's rewards, as TRL groups them: G rows in a row

        def clawsdk_verifier(prompts: list, completions: list, clawsdk_reward: list, **_: Any) -> list:
            groups.extend(clawsdk_reward[i:i + g] for i in range(0, len(clawsdk_reward), g))
            return list(clawsdk_reward)

        os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
        peft_config = _lora_config(o["lora_r"], o["lora_alpha"], 0.0) if o["lora"] else None
        trainer = ClawsdkGRPOTrainer(
            model=model,
            reward_funcs=[clawsdk_verifier],
            args=args,
            train_dataset=ds,
            processing_class=tok,
            peft_config=peft_config,
            rollout_func=self.rollout_func(db, prefix),
        )
        t0 = time.perf_counter()
        trainer.train()
        train_s = time.perf_counter() - t0
        weights = _save(trainer, tok, stage, o["lora"])
        history = trainer.state.log_history
        rewards = [h["reward"] for h in history if "reward" in h]
        equal = sum(1 for group in groups if not _spread(group))
        if groups and equal == len(groups):
            log.warning("trl-grpo: %d of %d groups had equal rewards: no advantage, no gradient, the "
                        "policy did not move (try a larger -G, tasks the model passes sometimes, a higher "
                        "temperature)", equal, len(groups))
        metrics = {
            "steps": trainer.state.global_step,
            "rollouts": len(self.episodes),
            # a group whose scored rollouts all got the same reward has no advantage, so no gradient
            "groups": len(groups),
            "groups_equal_reward": equal,
            "mean_reward_first": rewards[0] if rewards else None,
            "mean_reward_last": rewards[-1] if rewards else None,
            # one step's mean is one group's (a few rollouts of one task): read halves, not the ends
            "mean_reward": round(sum(rewards) / len(rewards), 4) if rewards else None,
            "mean_reward_halves": [round(sum(h) / len(h), 4) for h in (rewards[:len(rewards) // 2],
                                                                      rewards[len(rewards) // 2:]) if h],
            "cut_turns": sum(e["cut_turns"] for e in self.episodes),
            "train_s": round(train_s, 2),
            "wall_s": round(time.perf_counter() - started, 2),
            "device": _device(),
            "vllm": use_vllm,
            "checkpointing": checkpointing,
            "memory_plan": why,
            "weights_sha256": weights,
        }
        cid = _record_checkpoint(db, self.name, self.model, o, base, out, dataset_id, metrics, checkpoint_id,
                                 runs=self.runs, stage=stage)
        return TrainResult(
            checkpoint_id=cid, path=out, dataset_id=dataset_id, metrics=metrics, runs=self.runs
        )


__all__ = ["TrlGrpoTrainer"]
