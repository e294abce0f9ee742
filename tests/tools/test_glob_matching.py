"""glob and grep's glob= cannot stall the runner: a glob is matched without backtracking, off the event loop.

A glob pattern used to become a regular expression (`*` -> `[^/]*`) matched by re in the runner's event loop.
`*a*a*a*a*a*a*a*a*a*a*a*a*b` against a file named with 250 a's backtracks O(n^k), and re never checks for
signals: every rollout of the process froze, SIGINT and SIGTERM did nothing, and the rollout stayed `running`
(re-run on resume, never scored). The checks through the tools run in a child python killed at a deadline,
the one way to fail rather than hang on that code; the matcher must give the very language the regex gave.
"""

from __future__ import annotations

import itertools
import random
import re

import anyio
import pytest
from clawsdk_plugins.sandboxes.local import LocalSandbox
from clawsdk_tools.core import core_server, glob_to_regex
from hypothesis import given, settings
from hypothesis import strategies as st

from clawsdk.sandbox.base import SandboxConfig
from tests.conftest import loop_ticks
from tests.tools.test_core_tools import TASK, text

AUDIT_PATTERN = "*a" * 12 + "b"  # the auditor's: O(250^12) steps for the regex
LONG_NAME = "a" * 250


def reference_regex(pattern: str) -> re.Pattern[str]:
    """The translation glob used before (tools/clawsdk_tools/files.py, glob_to_regex), verbatim: the
    semantics the matcher must keep. Only ever matched here against short strings."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def drive(fn):
    async def main():
        sb = LocalSandbox(SandboxConfig())
        await sb.start(TASK)
        try:
            with anyio.fail_after(60):
                from mcp import Client

                async with Client(core_server(sb, TASK)) as client:
                    return await fn(client, sb)
        finally:
            await sb.close()

    return anyio.run(main)


# ---- through the real tools (an in-process MCP client on the core server, as the runner calls them)


def in_a_child(check: str, timeout: float = 60) -> None:
    """Run `check` (a function of this module) in a python of its own, killed past `timeout`.

    On the old code, re held the GIL for the whole match: neither of pytest-timeout's methods (a signal
    handler, a timer thread) ever ran, and the test would hang the session instead of failing."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    code = f"from tests.tools.test_glob_matching import {check}; {check}()"
    try:
        done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True,
                              timeout=timeout, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    except subprocess.TimeoutExpired:
        pytest.fail(f"{check} was still running after {timeout:g} s: the glob held the event loop")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def check_glob_tool() -> None:
    async def body(client, sb):
        await client.call_tool("write", {"path": LONG_NAME, "content": "x\n"})
        await client.call_tool("write", {"path": f"deep/{LONG_NAME}/{LONG_NAME}", "content": "x\n"})
        async with loop_ticks() as ticks:
            started = anyio.current_time()
            miss = await client.call_tool("glob", {"pattern": AUDIT_PATTERN})
            hit = await client.call_tool("glob", {"pattern": "*a" * 12})
            deep = await client.call_tool("glob", {"pattern": "**/" + "*a" * 12 + "*"})
            took = anyio.current_time() - started
            await anyio.sleep(0.2)
        return miss, hit, deep, took, ticks

    miss, hit, deep, took, ticks = drive(body)
    assert not miss.is_error and text(miss) == "(no match)", text(miss)
    assert text(hit) == LONG_NAME
    assert text(deep).splitlines() == [LONG_NAME, f"deep/{LONG_NAME}/{LONG_NAME}"]
    assert took < 5, took
    assert len(ticks) >= 3, "the event loop did not run while glob matched"


def check_grep_glob_filter() -> None:
    async def body(client, sb):
        await client.call_tool("write", {"path": LONG_NAME, "content": "needle\n"})
        await client.call_tool("write", {"path": "ab", "content": "needle\n"})
        started = anyio.current_time()
        miss = await client.call_tool("grep", {"pattern": "needle", "glob": AUDIT_PATTERN})
        hit = await client.call_tool("grep", {"pattern": "needle", "glob": "*a*b"})
        long_hit = await client.call_tool("grep", {"pattern": "needle", "glob": "*a" * 12})
        return miss, hit, long_hit, anyio.current_time() - started

    miss, hit, long_hit, took = drive(body)
    assert not miss.is_error and text(miss) == "(no match)", text(miss)
    assert text(hit) == "ab:1:needle"
    assert text(long_hit) == f"{LONG_NAME}:1:needle"
    assert took < 10, took


@pytest.mark.timeout(120)
def test_glob_with_many_stars_against_a_long_name_answers_at_once_and_the_loop_stays_free():
    in_a_child("check_glob_tool")


@pytest.mark.timeout(120)
def test_grep_glob_filter_with_many_stars_answers_at_once():
    in_a_child("check_grep_glob_filter")


def test_a_glob_pattern_too_long_to_serve_is_a_tool_error():
    from clawsdk_tools.files import MAX_GLOB_CHARS

    async def body(client, sb):
        return (await client.call_tool("glob", {"pattern": "*" * (MAX_GLOB_CHARS + 1)}),
                await client.call_tool("grep", {"pattern": "x", "glob": "?" * (MAX_GLOB_CHARS + 1)}),
                await client.call_tool("glob", {"pattern": "*" * MAX_GLOB_CHARS}))

    too_long, grep_too_long, longest = drive(body)
    assert too_long.is_error and "at most" in text(too_long)
    assert grep_too_long.is_error and "at most" in text(grep_too_long)
    # 4096 stars are 2048 `**`: every file
    assert not longest.is_error and sorted(text(longest).splitlines()) == ["blob.bin", "notes.md", "src/app.py",
                                                                           "src/util.py"]


@pytest.mark.timeout(60)
def test_matching_past_its_deadline_is_a_tool_error_and_the_loop_runs_meanwhile(monkeypatch):
    """The costliest case the matcher has, a pattern whose automaton has a state for each window of the
    path (`**a` then 4093 `?`) over many distinct long names, is linear but not free: it runs in a worker
    thread, past GLOB_TIMEOUT_S it ends in a tool error, and the event loop is never held meanwhile."""
    import clawsdk_tools.files as files
    from mcp.server.mcpserver.exceptions import ToolError

    monkeypatch.setattr(files, "GLOB_TIMEOUT_S", 0.5)
    rnd = random.Random(0)
    names = ["".join(rnd.choice("ab") for _ in range(4000)) for _ in range(20)] * 200
    glob = files.compile_glob("**a" + "?" * 4093)

    async def main():
        async with loop_ticks(0.02) as ticks:
            started = anyio.current_time()
            with pytest.raises(ToolError, match=r"still matching names after 0.5 s"):
                await files.matching_paths(glob, names)
            took = anyio.current_time() - started
        return took, ticks

    took, ticks = anyio.run(main)
    assert took < 5, took
    assert len(ticks) >= 10, f"the event loop ran {len(ticks)} times in {took:.2f} s"


# ---- the semantics are the old regex's


def test_glob_semantics_cases():
    cases = {
        "**/*.py": (["a.py", "x/y/a.py", ".hidden.py", "x/.h/a.py"], ["a.pyc", "x/a.pyc", "a.py/x"]),
        "*.py": (["a.py", ".py"], ["x/a.py"]),
        "src/**": (["src/", "src/a", "src/a/b"], ["src", "srcx/a", "src/a\nb"]),
        "**": (["", "a", "a/b/c"], ["a\n"]),
        "**/": (["", "a/", "a/b/"], ["a"]),
        "a**b": (["ab", "a/x/b"], ["a\nb"]),
        "a/**/b": (["a/b", "a/x/b", "a/x/y/b"], ["ab", "a/xb", "a/x\n/b"]),
        "a*b": (["ab", "axxb", "a\nb"], ["a/b"]),
        "a?b": (["axb", "a.b", "a\nb"], ["ab", "a/b"]),
        "***": (["", "abc", "a/b"], []),
        "***/x": (["a/x", "/x", "a/b/x"], ["x", "ax"]),
        "[ab].txt": (["[ab].txt"], ["a.txt"]),
        "A.TXT": (["A.TXT"], ["a.txt"]),
        "": ([""], ["a"]),
        "x": (["x"], ["x\n", "xx", "X"]),
    }
    for pattern, (yes, no) in cases.items():
        matcher, rx = glob_to_regex(pattern), reference_regex(pattern)
        for path in yes:
            assert matcher.match(path) and rx.match(path), (pattern, path)
        for path in no:
            assert not matcher.match(path) and not rx.match(path), (pattern, path)


def _same(pattern: str, paths) -> None:
    matcher, rx = glob_to_regex(pattern), reference_regex(pattern)
    for path in paths:
        assert bool(matcher.match(path)) == bool(rx.match(path)), (pattern, path)


def test_glob_matches_as_the_old_regex_did_exhaustively_on_tiny_strings():
    """Every pattern of up to 4 characters over `ab*?/` against every path of up to 4 over `ab/\\n.`."""
    paths = ["".join(p) for n in range(5) for p in itertools.product("ab/\n.", repeat=n)]
    for n in range(5):
        for pattern in itertools.product("a*?/", repeat=n):
            _same("".join(pattern), paths)


def test_glob_matches_as_the_old_regex_did_on_random_patterns_and_paths():
    rnd = random.Random(20240611)
    for _ in range(4000):
        pattern = "".join(rnd.choice("ab/*?.\n[]\\") for _ in range(rnd.randint(0, 10)))
        _same(pattern, ["".join(rnd.choice("ab/.\n[\\") for _ in range(rnd.randint(0, 12))) for _ in range(20)])


@settings(max_examples=1500, deadline=None, derandomize=True)
@given(st.text("ab/*?.\n", max_size=10), st.lists(st.text("ab/.\n", max_size=12), max_size=10))
def test_glob_matches_as_the_old_regex_did_hypothesis(pattern, paths):
    _same(pattern, paths)


def test_a_matcher_keeps_matching_right_after_its_cache_is_dropped():
    """The lazily built automaton is dropped when it grows past a bound, mid-path too."""
    from clawsdk_tools.files import Glob

    rnd = random.Random(1)
    pattern = "**a" + "?" * 12 + "b"
    matcher, rx = Glob(pattern), reference_regex(pattern)
    matcher._MAX_STATES = 64
    for _ in range(300):
        path = "".join(rnd.choice("ab") for _ in range(rnd.randint(10, 60)))
        assert matcher.match(path) == bool(rx.match(path)), path
