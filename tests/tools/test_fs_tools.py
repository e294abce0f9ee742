"""The fs tools through a real in-process MCP client: read/write/edit/apply_patch, truncation notes, confinement."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest
from clawsdk_tools.core import core_server

from tests.tools.conftest import connected, task_with, text


def test_read_pages_long_files_and_says_so():
    async def main():
        body = "".join(f"line {i}\n" for i in range(1, 3001))
        async with connected(core_server, task_with({"big.txt": body})) as (c, _):
            r = await c.call_tool("read", {"path": "big.txt"})
            assert "line 2000\n" in text(r) and "line 2001" not in text(r)
            assert "[1000 more lines; read with offset=2001]" in text(r)
            r = await c.call_tool("read", {"path": "big.txt", "offset": 2999})
            assert text(r) == "line 2999\nline 3000\n"

    anyio.run(main)


def test_exec_cuts_long_output_with_a_note_and_structured_result():
    async def main():
        async with connected(core_server, task_with()) as (c, _):
            r = await c.call_tool("exec", {"command": "python3 -c \"print('x' * 100000)\"; echo oops >&2; exit 3"})
            s = r.structured_content
            assert s["exit_code"] == 3 and s["truncated"] is True and s["stderr"] == "oops\n"
            assert "[output cut: showing 30000 of 100001 characters" in s["stdout"]

    anyio.run(main)


PATCH = """*** Begin Patch
*** Update File: src/app.py
@@ def main():
     print("hello")
-    return 1
+    return 0
*** Add File: docs/notes.md
+# Notes
+first
*** Update File: old_name.txt
*** Move to: new_name.txt
-old
+renamed
*** Delete File: junk.txt
*** End Patch
"""


def test_apply_patch_adds_updates_moves_and_deletes():
    async def main():
        files = {"src/app.py": 'def main():\n    print("hello")\n    return 1\n', "old_name.txt": "old\n",
                 "junk.txt": "junk\n"}
        async with connected(core_server, task_with(files)) as (c, sb):
            r = await c.call_tool("apply_patch", {"input": PATCH})
            assert not r.is_error, text(r)
            ws = Path(sb.workspace)
            assert (ws / "src/app.py").read_text() == 'def main():\n    print("hello")\n    return 0\n'
            assert (ws / "docs/notes.md").read_text() == "# Notes\nfirst\n"
            assert (ws / "new_name.txt").read_text() == "renamed\n"
            assert not (ws / "old_name.txt").exists() and not (ws / "junk.txt").exists()

    anyio.run(main)


def test_apply_patch_that_does_not_match_changes_nothing():
    async def main():
        files = {"a.txt": "one\ntwo\n", "b.txt": "three\n"}
        bad = ("*** Begin Patch\n*** Update File: a.txt\n-one\n+ONE\n*** Update File: b.txt\n-not there\n+x\n"
               "*** End Patch")
        async with connected(core_server, task_with(files)) as (c, sb):
            r = await c.call_tool("apply_patch", {"input": bad})
            assert r.is_error and "b.txt: hunk 1" in text(r) and "not there" in text(r)
            assert (Path(sb.workspace) / "a.txt").read_text() == "one\ntwo\n"
            r = await c.call_tool("apply_patch", {"input": "no patch markers"})
            assert r.is_error and "*** Begin Patch" in text(r)

    anyio.run(main)


@pytest.mark.parametrize("tool,args", [
    ("read", {"path": "{p}"}), ("write", {"path": "{p}", "content": "pwned"}),
    ("edit", {"path": "{p}", "old_text": "secret", "new_text": "pwned"}),
    ("ls", {"path": "{p}"}), ("grep", {"pattern": "secret", "path": "{p}"}),
    ("apply_patch", {"input": "*** Begin Patch\n*** Add File: {p}\n+pwned\n*** End Patch"}),
])
def test_file_tools_refuse_paths_out_of_the_workspace(tmp_path, tool, args):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret\n")

    async def main():
        async with connected(core_server, task_with({"ok.txt": "fine\n"})) as (c, sb):
            os.symlink(outside, Path(sb.workspace) / "link")
            for bad in ("../secret.txt", str(outside / "secret.txt"), "link/secret.txt", "ok\x00.txt",
                        os.path.relpath(outside / "secret.txt", sb.workspace)):
                filled = {k: v.replace("{p}", bad) if isinstance(v, str) else v for k, v in args.items()}
                r = await c.call_tool(tool, filled)
                assert r.is_error, (tool, bad, text(r))
                assert "secret" not in text(r).replace("secret.txt", "")
            assert (outside / "secret.txt").read_text() == "secret\n"
            assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
            assert not (Path(sb.workspace).parent / "secret.txt").exists()

    anyio.run(main)


def test_text_tools_list_no_output_schema_and_dict_tools_keep_theirs():
    """A client validates every result against a tool's output schema: text tools declare none
    (their text is the result), tools that return structure keep theirs and still deliver it."""
    async def main():
        async with connected(core_server, task_with({"a.txt": "hi\n"})) as (c, _):
            tools = {t.name: t for t in (await c.list_tools()).tools}
            assert tools["read"].output_schema is None and tools["write"].output_schema is None
            assert tools["exec"].output_schema is not None
            r = await c.call_tool("read", {"path": "a.txt"})
            assert text(r) == "hi\n" and not r.is_error
            r = await c.call_tool("exec", {"command": "echo ok"})
            assert r.structured_content["stdout"] == "ok\n"

    anyio.run(main)
