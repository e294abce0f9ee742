"""W1 in Inspect AI: N samples x 10 tool calls (write then read a small file), through Inspect's own tool
execution and transcript, logged and scored; for `benchmarks/suite.py --inspect-python PY`.

It runs in an environment that has `inspect-ai` (an optional extra of the benchmark only, never of clawsdk):

    python -m venv /tmp/inspect && /tmp/inspect/bin/pip install inspect-ai
    python benchmarks/suite.py --inspect-python /tmp/inspect/bin/python

Prints one JSON line: wall and CPU seconds (this process and its children) and CPU per call.
"""

from __future__ import annotations

import json
import resource
import sys
import tempfile
import time
from pathlib import Path

CALLS = 10


def calls(i: int) -> list[tuple[str, dict]]:
    """The same calls as benchmarks/w1.py's w1_calls (kept here: this environment has no clawsdk)."""
    out = []
    for j in range(CALLS // 2):
        out.append(("write", {"path": f"notes/f{j}.txt", "content": f"task {i} line {j}\n" * 4}))
        out.append(("read", {"path": f"notes/f{j}.txt"}))
    return out


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime + c.ru_utime + c.ru_stime


def main(n: int) -> None:
    from inspect_ai import Task, eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ChatMessageAssistant, execute_tools
    from inspect_ai.scorer import Score, accuracy, scorer
    from inspect_ai.solver import solver
    from inspect_ai.tool import ToolCall, tool

    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)

        @tool
        def write():
            async def execute(path: str, content: str) -> str:
                """Create or overwrite a file.

                Args:
                    path: the file
                    content: what to write
                """
                p = base / path
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_text(content)
                return f"wrote {len(content)} bytes to {path}"

            return execute

        @tool
        def read():
            async def execute(path: str) -> str:
                """Read a file.

                Args:
                    path: the file
                """
                return (base / path).read_text()

            return execute

        @solver
        def w1():
            async def solve(state, generate):
                i = int(state.sample_id)
                state.tools = [write(), read()]
                for k, (name, args) in enumerate(calls(i)):
                    args = dict(args, path=f"t{i}/{args['path']}")
                    state.messages.append(ChatMessageAssistant(
                        content="", tool_calls=[ToolCall(id=f"c{k}", function=name, arguments=args)]))
                    result = await execute_tools(state.messages, state.tools)
                    state.messages.extend(result.messages)
                return state

            return solve

        @scorer(metrics=[accuracy()])
        def wrote():
            async def score(state, target):
                i = int(state.sample_id)
                text = (base / f"t{i}" / "notes" / "f4.txt").read_text()
                return Score(value=1.0 if f"task {i} line 4" in text else 0.0)

            return score

        task = Task(dataset=[Sample(id=i, input=f"Write and read back five notes ({i}).") for i in range(n)],
                    solver=w1(), scorer=wrote())
        cpu0, t0 = cpu_s(), time.perf_counter()
        [log] = eval(task, model="mockllm/model", max_samples=8, log_dir=str(base / "logs"), display="none")
        wall, cpu = time.perf_counter() - t0, cpu_s() - cpu0
        passed = sum(1 for s in log.samples or [] if s.scores and next(iter(s.scores.values())).value == 1.0)
        if log.status != "success" or passed != n:
            raise SystemExit(f"inspect W1: status {log.status}, {passed} of {n} passed")
    print(json.dumps({"wall_s": wall, "cpu_s": cpu, "per_call_us": cpu / (n * CALLS) * 1e6}))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
