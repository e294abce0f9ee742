"""Embedded-model generation speed: 1 rollout, N concurrent rollouts (batched), the same N one
after another, and the N batched with the prompt-prefix cache off (the baselines, measured in the same run).

    .venv/bin/python benchmarks/embedded_model.py [--tokens 64] [--concurrency 8] [--threads 2]

Each "rollout" is the first model turn of the tool-loop agent on one example task: the real
system prompt with the core tools, and the task's instruction. Prints tokens/s and ratios.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parents[1]


def prompts(n: int) -> list[list[dict]]:
    from clawsdk.tasks.native import load_task
    from clawsdk.models.prompt import SYSTEM_PROMPT

    tasks = [load_task(p) for p in sorted((ROOT / "examples" / "tasks").iterdir()) if (p / "task.yaml").exists()]
    return [[{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": tasks[i % len(tasks)].instruction}]
            for i in range(n)]


def core_tools() -> list[dict]:
    from clawsdk.sandbox.base import SandboxConfig
    from clawsdk_tools.core import core_server

    async def listed():
        from mcp import Client

        from clawsdk_plugins.sandbox_local import LocalSandbox

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
    args = ap.parse_args()

    from clawsdk_plugins.models_embedded import EmbeddedModel

    model = EmbeddedModel(max_batch=args.concurrency, threads=args.threads)
    t0 = time.perf_counter()
    model.load()
    load_s = time.perf_counter() - t0
    tools = core_tools() if args.prompt == "task" else None
    batch = prompts(args.concurrency)
    if args.prompt == "short":
        batch = [m[1:] for m in batch]
    sizes: list[int] = []
    generate = model._generate
    model._generate = lambda reqs: (sizes.append(len(reqs)), generate(reqs))[1]
    prompt_tokens = [len(model.render(m, tools)) for m in batch]

    async def run_all():
        # warm-up on another instruction: the system prompt is then kept, as in any run after its first call
        await timed(model, [[batch[0][0], {"role": "user", "content": "Warm up."}]], tools, 4, False)
        single = await timed(model, batch[:1], tools, args.tokens, False)
        apart = await timed(model, batch, tools, args.tokens, False)
        sizes.clear()
        together = await timed(model, batch, tools, args.tokens, True)
        kept, model.PREFIX_MIN_TOKENS = model.PREFIX_MIN_TOKENS, 10**9  # every prompt encoded whole
        model.prefixes.clear()
        uncached = await timed(model, batch, tools, args.tokens, True)
        model.PREFIX_MIN_TOKENS = kept
        return single, together, apart, uncached

    (s_t, s_n), (c_t, c_n), (q_t, q_n), (u_t, u_n) = anyio.run(run_all)
    print(f"model: {model.name}   load: {load_s:.2f} s   torch threads: {__import__('torch').get_num_threads()}")
    print(f"prompt tokens: {min(prompt_tokens)}-{max(prompt_tokens)}   max new tokens: {args.tokens}")
    print(f"{'case':<34}{'tokens':>8}{'seconds':>10}{'tokens/s':>10}")
    rows = [("1 rollout", s_n, s_t), (f"{args.concurrency} concurrent rollouts (batched)", c_n, c_t),
            (f"{args.concurrency} rollouts one after another", q_n, q_t),
            (f"{args.concurrency} batched, prefix cache off", u_n, u_t)]
    for label, n, t in rows:
        print(f"{label:<34}{n:>8}{t:>10.2f}{n / t:>10.1f}")
    print(f"batch sizes of the concurrent case: {sizes}")
    print(f"batched vs one after another: {(c_n / c_t) / (q_n / q_t):.2f}x tokens/s; "
          f"vs 1 rollout: {(c_n / c_t) / (s_n / s_t):.2f}x; prefix cache on vs off: {u_t / c_t:.2f}x faster")


if __name__ == "__main__":
    sys.exit(main())
