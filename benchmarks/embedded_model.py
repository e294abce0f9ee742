"""Embedded-model generation speed, against baselines measured in the same run.

    .venv/bin/python benchmarks/embedded_model.py [--tokens 64] [--concurrency 8] [--threads 2]
        [--model transformers:PATH]

Each "rollout" is the tool-loop agent's first model turn on one example task (the real system
prompt with the core tools, and the task's instruction), then its second turn: the first answer and
a tool result of about 250 tokens appended. Cases: 1 rollout; N one after another; N concurrent
(batched); the same with nothing kept between generations (every prompt encoded whole); and the
first turn with the decoding cache grown by concatenation (transformers' DynamicLayer, what the
backend did before). With `--cases conversations`: N conversations of 3 turns with a 0.2 s tool call
between turns, whose answers are capped at 1/4 to all of --tokens ("spread") or at 1/8 of it but for
one conversation in 8 that runs to the cap ("one long", as when one rollout loops), once as the
backend runs them (a turn joins the batch that is decoding, and is answered when its row ends) and
once with each batch run to its end before the next starts (what the backend did before). Prints
tokens/s and ratios.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parents[1]


def prompts(n: int) -> list[list[dict]]:
    from clawsdk.models.prompt import SYSTEM_PROMPT
    from clawsdk.tasks.native import load_task

    tasks = [load_task(p) for p in sorted((ROOT / "examples" / "tasks").iterdir()) if (p / "task.yaml").exists()]
    return [[{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": tasks[i % len(tasks)].instruction}]
            for i in range(n)]


def core_tools() -> list[dict]:
    from clawsdk_tools.core import core_server

    from clawsdk.sandbox.base import SandboxConfig

    async def listed():
        from clawsdk_plugins.sandboxes.local import LocalSandbox
        from mcp import Client

        sandbox = LocalSandbox(SandboxConfig())
        async with Client(core_server(sandbox)) as client:
            tools = (await client.list_tools()).tools
        return [{"type": "function", "function": {"name": t.name, "description": t.description or "",
                                                  "parameters": dict(t.input_schema or {})}} for t in tools]

    return anyio.run(listed)


async def timed(model, batch: list[list[dict]], tools: list[dict], tokens: int, concurrent: bool) -> tuple[float, int]:
    results = []

    async def one(messages):
        r = await model.chat(messages, tools, max_tokens=tokens, temperature=0.0, timeout_s=600)
        results.append(r.usage["completion_tokens"])

    started = time.perf_counter()
    if concurrent:
        async with anyio.create_task_group() as tg:
            for m in batch:
                tg.start_soon(one, m)
    else:
        for m in batch:
            await one(m)
    return time.perf_counter() - started, sum(results)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, default=64, help="completion tokens per request (max)")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: half the cores)")
    ap.add_argument("--prompt", choices=["task", "short"], default="task",
                    help="task: the tool-loop's first turn with all core tools (prefill-heavy); "
                         "short: the instruction alone (generation-heavy)")
    ap.add_argument("--cases", default="turns,conversations",
                    help="turns: one turn and its baselines; conversations: joining a running batch, and not")
    ap.add_argument("--model", default="embedded",
                    help="embedded (SmolLM2-135M on the CPU), or transformers:PATH (a local checkpoint, on CUDA when "
                         "there is one)")
    args = ap.parse_args()
    cases = set(args.cases.split(","))

    if args.model == "embedded":
        from clawsdk_plugins.models.embedded import EmbeddedModel

        model = EmbeddedModel(max_batch=args.concurrency, threads=args.threads)
    elif args.model.startswith("transformers:"):
        from clawsdk_plugins.models.transformers import TransformersModel

        model = TransformersModel(args.model.split(":", 1)[1], max_batch=args.concurrency, threads=args.threads)
    else:
        ap.error(f"--model {args.model!r}: use embedded or transformers:PATH")
    t0 = time.perf_counter()
    model.load()
    load_s = time.perf_counter() - t0
    tools = core_tools() if args.prompt == "task" else None
    batch = prompts(args.concurrency)
    if args.prompt == "short":
        batch = [m[1:] for m in batch]
    sizes: list = []  # every batch served; its rows are known once it has served them
    generate = model._generate
    model._generate = lambda batch: (sizes.append(batch), generate(batch))[1]
    prompt_tokens = [len(model.render(m, tools)) for m in batch]

    from clawsdk_plugins.models import local_engine
    from clawsdk_plugins.models import transformers as models_transformers
    from transformers.cache_utils import DynamicLayer

    listing = "\n".join(f"-rw-r--r-- 1 agent agent {100 + 37 * i:>6} notes/file_{i:03d}.md" for i in range(20))

    def second_turns(first: list) -> list[list[dict]]:
        return [m + [r.message, {"role": "tool", "tool_call_id": "call_1", "content": listing}]
                for m, r in zip(batch, first, strict=True)]

    async def answers(msgs: list[list[dict]]) -> list:
        out: dict = {}

        async def one(i):
            out[i] = await model.chat(msgs[i], tools, max_tokens=args.tokens, temperature=0.0, timeout_s=600)

        async with anyio.create_task_group() as tg:
            for i in range(len(msgs)):
                tg.start_soon(one, i)
        return [out[i] for i in range(len(msgs))]

    def spread(i: int, turn: int) -> int:
        return max(1, args.tokens * (1 + (i + turn) % 4) // 4)

    def one_long(i: int, turn: int) -> int:
        return args.tokens if (i + turn) % 8 == 0 else max(1, args.tokens // 8)

    async def conversations(cap) -> tuple[float, int]:
        total = []

        async def talk(i):
            msgs = list(batch[i])
            for turn in range(3):
                r = await model.chat(msgs, tools, max_tokens=cap(i, turn), temperature=0.0, timeout_s=600)
                total.append(r.usage["completion_tokens"])
                await anyio.sleep(0.2)  # the tool call
                msgs += [r.message, {"role": "tool", "tool_call_id": f"call_{turn}", "content": listing}]

        started = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for i in range(len(batch)):
                tg.start_soon(talk, i)
        return time.perf_counter() - started, sum(total)

    async def warm_up():
        # on another instruction, from nothing kept: the system prompt is then kept, as in any run after its
        # first call, and nothing else
        model.prefixes.clear()
        await timed(model, [[batch[0][0], {"role": "user", "content": "Warm up."}]], tools, 4, False)

    async def turns(rows: dict) -> None:
        await warm_up()
        rows["1 rollout"] = await timed(model, batch[:1], tools, args.tokens, False)
        await warm_up()
        rows["one after another"] = await timed(model, batch, tools, args.tokens, False)
        await warm_up()
        sizes.clear()
        started = time.perf_counter()
        first = await answers(batch)
        rows["batched"] = (time.perf_counter() - started, sum(r.usage["completion_tokens"] for r in first))
        rows["batched, 2nd turn"] = await timed(model, second_turns(first), tools, args.tokens, True)
        kept, model.PREFIX_MIN_TOKENS = model.PREFIX_MIN_TOKENS, 10**9  # every prompt encoded whole
        model.prefixes.clear()
        rows["batched, nothing kept"] = await timed(model, batch, tools, args.tokens, True)
        rows["batched, 2nd turn, nothing kept"] = await timed(model, second_turns(first), tools, args.tokens, True)
        model.PREFIX_MIN_TOKENS = kept
        await warm_up()
        models_transformers._GROWING[:] = [DynamicLayer]  # decoding concatenates, as transformers does
        try:
            rows["batched, concatenating cache"] = await timed(model, batch, tools, args.tokens, True)
        finally:
            models_transformers._GROWING.clear()

    async def talks(rows: dict) -> None:
        for name, cap in (("spread", spread), ("one long", one_long)):
            await warm_up()
            rows[f"conversations, {name}, joining"] = await conversations(cap)
            await warm_up()
            join, local_engine.Batch.join = local_engine.Batch.join, lambda self, n: []
            try:
                rows[f"conversations, {name}, batch to its end"] = await conversations(cap)
            finally:
                local_engine.Batch.join = join

    class Rows(dict):
        """Each case printed as it is measured: a run cut short still says what it measured."""

        def __setitem__(self, label, value):
            super().__setitem__(label, value)
            t, n = value
            print(f"{label:<48}{n:>8}{t:>10.2f}{n / t:>10.1f}", flush=True)

    async def run_all():
        rows = Rows()
        if "turns" in cases:
            await turns(rows)
        if "conversations" in cases:
            await talks(rows)
        return rows

    device = getattr(getattr(model, "hf_model", None), "device", "cpu")
    print(f"model: {model.name}   device: {device}   load: {load_s:.2f} s   "
          f"torch threads: {__import__('torch').get_num_threads()}")
    print(f"prompt tokens: {min(prompt_tokens)}-{max(prompt_tokens)}   max new tokens: {args.tokens}   "
          f"rollouts: {args.concurrency}")
    print(f"{'case':<48}{'tokens':>8}{'seconds':>10}{'tokens/s':>10}", flush=True)
    rows = anyio.run(run_all)
    print(f"batch sizes: {[len(b.everyone()) for b in sizes]}")

    def rate(label):
        t, n = rows[label]
        return n / t

    if "turns" in cases:
        print(f"batched vs one after another: {rate('batched') / rate('one after another'):.2f}x tokens/s; "
              f"vs 1 rollout: {rate('batched') / rate('1 rollout'):.2f}x")
        print(f"kept caches vs nothing kept: first turn {rows['batched, nothing kept'][0] / rows['batched'][0]:.2f}x "
              f"faster, second turn {rows['batched, 2nd turn, nothing kept'][0] / rows['batched, 2nd turn'][0]:.2f}x; "
              f"room kept ahead vs concatenating: "
              f"{rows['batched, concatenating cache'][0] / rows['batched'][0]:.2f}x faster")
    if "conversations" in cases:
        for name in ("spread", "one long"):
            ratio = rows[f"conversations, {name}, batch to its end"][0] / rows[f"conversations, {name}, joining"][0]
            print(f"conversations ({name}), turns joining the batch vs each batch to its end: {ratio:.2f}x faster")

if __name__ == "__main__":
    sys.exit(main())
