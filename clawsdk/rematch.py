"""Regular expressions matched in a process of their own (`python -I rematch.py`, arguments pickled on stdin).

Python's re cannot be interrupted, and the tool servers and verifiers run in the runner's process: a
pattern that backtracks without end, such as (a+)+$ against a line of a's, held the event loop of every
rollout of the run for as long as it took (grep's pattern is the agent's; a regex check's text is). In a
process of its own, the match gets a deadline and is killed at it. The file runs as a script with the
standard library only, so it starts in a few tens of milliseconds.
"""

from __future__ import annotations

import os
import pickle
import re
import subprocess
import sys


def match_lines(pattern: str, flags: int, files: list[tuple[str, bytes]], limit: int) -> list[str]:
    """`path:line:text` for each matching line of each text file, up to `limit` lines."""
    rx = re.compile(pattern, flags)
    out: list[str] = []
    for path, data in files:
        if b"\x00" in data[:8192]:  # binary
            continue
        for n, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            if rx.search(line):
                out.append(f"{path}:{n}:{line[:500]}")
                if len(out) >= limit:
                    return out
    return out


def count_matches(pattern: str, flags: int, text: str) -> int:
    """How many times the pattern matches in the text (re.finditer)."""
    return sum(1 for _ in re.compile(pattern, flags).finditer(text))


FUNCTIONS = {"match_lines": match_lines, "count_matches": count_matches}


async def in_process(function: str, *args):
    """FUNCTIONS[function](*args) in a child process, killed if the caller is cancelled (its deadline passes)."""
    import anyio

    proc = await anyio.open_process([sys.executable, "-I", os.path.abspath(__file__)], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = bytearray(), bytearray()

        async def drain(stream, buf: bytearray) -> None:
            async for chunk in stream:
                buf += chunk

        async with anyio.create_task_group() as tg:
            tg.start_soon(drain, proc.stdout, out)
            tg.start_soon(drain, proc.stderr, err)
            await proc.stdin.send(pickle.dumps((function, args), protocol=pickle.HIGHEST_PROTOCOL))
            await proc.stdin.aclose()
            await proc.wait()
        if proc.returncode != 0:
            raise RuntimeError(f"the matcher exited with {proc.returncode}: "
                               f"{err.decode('utf-8', 'replace').strip()[-300:]}")
        return pickle.loads(bytes(out))
    finally:
        if proc.returncode is None:
            proc.kill()
            with anyio.CancelScope(shield=True):
                await proc.wait()



async def search_lines(rx, texts, limit: int, *, timeout_s: float, batch_bytes: int) -> list[str]:
    """`path:line:text` for the lines of `texts` ((path, bytes), an async iterable) that `rx` matches, up to
    `limit`, matched `batch_bytes` at a time in a child process (`in_process`). TimeoutError, with a message for
    the agent, when the pattern is still matching after `timeout_s` (grep and doc_search share this)."""
    import anyio

    out: list[str] = []
    batch: list[tuple[str, bytes]] = []

    async def match() -> None:
        out.extend(await in_process("match_lines", rx.pattern, rx.flags, batch, limit - len(out)))
        batch.clear()

    with anyio.move_on_after(timeout_s) as scope:
        size = 0
        async for item in texts:
            batch.append(item)
            size += len(item[1])
            if size >= batch_bytes:
                await match()
                size = 0
                if len(out) >= limit:
                    break
        if batch and len(out) < limit:
            await match()
    if scope.cancelled_caught:
        raise TimeoutError(f"the pattern was still matching after {timeout_s:g} s and was stopped (a nested "
                           "repetition such as (a+)+ can backtrack without end); simplify it or narrow the path")
    return out


if __name__ == "__main__":
    name, arguments = pickle.load(sys.stdin.buffer)
    sys.stdout.buffer.write(pickle.dumps(FUNCTIONS[name](*arguments)))
