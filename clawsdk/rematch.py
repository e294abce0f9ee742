"""Regular expressions matched in a process of their own (`python -I rematch.py`, arguments pickled on stdin).

Python's re cannot be interrupted, and the verifiers run in the runner's process: a pattern that backtracks
without end, such as (a+)+$ against a line of a's, held the event loop of every rollout of the run for as long
as it took (a regex check's text is the agent's). In a process of its own, the match gets a deadline and is
killed at it. The file runs as a script with the standard library only, so it starts in a few tens of
milliseconds. (The tools that match the agent's patterns, grep and doc_search, run behind the sandbox's
boundary, killed at the task's tool time limit: clawsdk.mcp.toolhost.)
"""

from __future__ import annotations

import os
import pickle
import re
import subprocess
import sys


def count_matches(pattern: str, flags: int, text: str) -> int:
    """How many times the pattern matches in the text (re.finditer)."""
    return sum(1 for _ in re.compile(pattern, flags).finditer(text))


FUNCTIONS = {"count_matches": count_matches}
_SELF = os.path.abspath(__file__)  # the child runs this file


async def in_process(function: str, *args):
    """FUNCTIONS[function](*args) in a child process, killed if the caller is cancelled (its deadline passes)."""
    import anyio

    proc = await anyio.open_process([sys.executable, "-I", _SELF], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = bytearray(), bytearray()

        async def drain(stream, buf: bytearray) -> None:
            async for chunk in stream:
                buf += chunk

        async with anyio.create_task_group() as tg:
            tg.start_soon(drain, proc.stdout, out)
            tg.start_soon(drain, proc.stderr, err)
            assert proc.stdin is not None  # opened with stdin=PIPE
            await proc.stdin.send(pickle.dumps((function, args), protocol=pickle.HIGHEST_PROTOCOL))
            await proc.stdin.aclose()
            await proc.wait()
        if proc.returncode != 0:
            raise RuntimeError(f"the matcher exited with {proc.returncode}: "
                               f"{err.decode('utf-8', 'replace').strip()[-300:]}")
        return pickle.loads(bytes(out))  # noqa: S301 - our own child process, running this file
    finally:
        if proc.returncode is None:
            proc.kill()
            with anyio.CancelScope(shield=True):
                await proc.wait()


if __name__ == "__main__":
    name, arguments = pickle.load(sys.stdin.buffer)  # noqa: S301 - written by in_process() in the parent
    sys.stdout.buffer.write(pickle.dumps(FUNCTIONS[name](*arguments)))
