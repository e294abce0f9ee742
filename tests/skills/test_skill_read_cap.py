"""The skill packs read workspace files through the cap the core file tools keep (MAX_READ_BYTES, 16 MiB).

That cap is the sandbox file API's contract (`Sandbox.read_capped`), the same in the runner and in the tool
host inside the sandbox: a file over it is a tool error naming it, its size and the limit, and nothing of it is
read. What a file under it unpacks to (a DOCX or XLSX of a few KiB can unpack to gigabytes) is no longer a cap of
the skill's: it is bounded by the tool host's memory limit (`limits.tool_memory_mb`), and the agent reads that
the tool ran out of memory.
"""

from __future__ import annotations

import io
import os
import resource
import zipfile

import anyio
import clawsdk_skills
import pytest

from clawsdk.sandbox.base import MAX_READ_BYTES
from tests.skills.boundary import behind_boundary, boundary_task, stopped_at_its_limit, timed
from tests.tools.conftest import connected, task_with, text

MIB = MAX_READ_BYTES // 2**20
GIB = 2**30


def sparse(sb, path: str, size: int) -> None:
    """A real file of `size` bytes in the sandbox's workspace that takes no room (a hole)."""
    with open(sb.workspace / path, "wb") as f:
        f.truncate(size)


def too_big(path: str, size: int) -> str:
    return f"{path} is {size / 2**20:.1f} MiB, over the {MIB} MiB read of one file"


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def test_a_sparse_gigabyte_is_a_tool_error_without_being_read():
    async def main():
        async with connected(clawsdk_skills.factory("spreadsheets"), task_with({"a.csv": "x\n1\n"})) as (c, sb):
            sparse(sb, "big.csv", GIB)
            before = peak_mib()
            r = await c.call_tool("sheet_read", {"path": "big.csv"})
            grew = peak_mib() - before
            assert r.is_error and too_big("big.csv", GIB) in text(r), text(r)
            assert grew < 256, f"the process's peak grew by {grew:.0f} MiB reading a file it refused"
            r = await c.call_tool("sheet_read", {"path": "a.csv"})  # the server still answers
            assert not r.is_error and r.structured_content["rows"] == [["1"]], text(r)

    anyio.run(main)


SIZE = MAX_READ_BYTES + 2**20  # just over the cap: cheap to read whole on the code before the cap

# (pack, file, tool, arguments): every skill tool that reads a workspace file
CALLS = [
    ("documents", "big.txt", "doc_read", {"path": "big.txt"}),
    ("documents", "big.md", "doc_outline", {"path": "big.md"}),
    ("spreadsheets", "big.csv", "sheet_read", {"path": "big.csv"}),
    ("spreadsheets", "big.csv", "sheet_list", {"path": "big.csv"}),
    ("spreadsheets", "big.csv", "sheet_query", {"path": "big.csv"}),
    ("spreadsheets", "big.csv", "sheet_update", {"path": "big.csv", "cell": "A1", "value": 1}),
    ("spreadsheets", "big.xlsx", "sheet_write", {"path": "big.xlsx", "rows": [[1]]}),
    ("data", "big.json", "data_get", {"path": "big.json"}),
    ("data", "big.yaml", "data_keys", {"path": "big.yaml"}),
    ("data", "big.json", "data_set", {"path": "big.json", "query": "a", "value": 1}),
    ("data", "big.json", "data_convert", {"src": "big.json", "dest": "out.yaml"}),
    ("calendar", "big.ics", "calendar_events", {"path": "big.ics"}),
    ("calendar", "big.ics", "calendar_add_event", {"path": "big.ics", "summary": "s", "start": "2024-05-07"}),
    ("calendar", "big.ics", "calendar_remove_event", {"path": "big.ics", "uid": "u"}),
    ("calendar", "big.ics", "calendar_free_slots", {"paths": ["big.ics"], "from_date": "2024-05-07",
                                                    "to_date": "2024-05-07", "duration_minutes": 30}),
    ("mail", "mail/inbox/big.eml", "mail_read", {"id": "inbox/big.eml"}),
    ("mail", "mail/inbox/big.eml", "mail_list", {"folder": "inbox"}),
    ("mail", "mail/inbox/big.eml", "mail_search", {"query": "x"}),
]


@pytest.mark.parametrize(("name", "path", "tool", "args"), CALLS, ids=[f"{c[0]}-{c[2]}" for c in CALLS])
def test_every_skill_tool_that_reads_a_file_refuses_one_over_the_cap(name, path, tool, args):
    async def main():
        files = {"mail/inbox/001.eml": "From: a@b.test\nSubject: hi\n\nhello\n"} if name == "mail" else {}
        async with connected(clawsdk_skills.factory(name), task_with(files)) as (c, sb):
            (sb.workspace / path).parent.mkdir(parents=True, exist_ok=True)
            sparse(sb, path, SIZE)
            r = await c.call_tool(tool, args)
            assert r.is_error and too_big(path, SIZE) in text(r), text(r)
            assert os.path.getsize(sb.workspace / path) == SIZE  # a write tool left it alone

    anyio.run(main)


def test_a_document_search_names_the_file_it_did_not_read():
    async def main():
        async with connected(clawsdk_skills.factory("documents"), task_with({"notes.md": "# budget\n"})) as (c, sb):
            sparse(sb, "big.txt", GIB)
            r = await c.call_tool("doc_search", {"pattern": "budget"})
            assert not r.is_error and "notes.md:1:# budget" in text(r), text(r)
            assert f"not searched: big.txt ({too_big('big.txt', GIB)})" in text(r), text(r)

    anyio.run(main)


def zipped(parts: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in parts.items():
            z.writestr(name, data)
    return buf.getvalue()


def bomb_docx(unpacked: int) -> bytes:
    """A DOCX whose word/document.xml unpacks to about `unpacked` bytes (spaces, deflated a thousandfold), built
    a piece at a time."""
    from clawsdk_skills.documents.server import markdown_to_docx

    with zipfile.ZipFile(io.BytesIO(markdown_to_docx("# Title\n\nbody\n"))) as z:
        parts = {i.filename: z.read(i) for i in z.infolist()}
    head, tail = parts.pop("word/document.xml").split(b"<w:body>", 1)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        for name, data in parts.items():
            z.writestr(name, data)
        with z.open("word/document.xml", "w", force_zip64=True) as f:
            f.write(head + b"<w:body>")
            chunk = b" " * (16 * 2**20)
            for _ in range(unpacked // len(chunk)):
                f.write(chunk)
            f.write(tail)
    return buf.getvalue()


def test_an_archive_that_unpacks_past_the_tools_memory_is_its_tool_error_and_the_next_call_works():
    """A 3 MB DOCX whose part unpacks to 640 MiB, under a 512 MiB tool memory limit: the call answers that the
    tool ran out of memory (within the tool time limit), and the same tool reads the next file."""
    from clawsdk_skills.documents.server import markdown_to_docx

    bomb = bomb_docx(640 * 2**20)
    assert len(bomb) < 4 * 2**20
    task = boundary_task(["documents"], {"bomb.docx": bomb, "ok.docx": markdown_to_docx("# Title\n\nbody\n")},
                         tool_memory_mb=512, tool_timeout_s=20)

    async def main():
        async with behind_boundary(task) as (session, _):
            r, took = await timed(session, "doc_read", {"path": "bomb.docx"})
            assert stopped_at_its_limit(r, took, task, "doc_read") == "memory"
            r = await session.call("doc_read", {"path": "ok.docx"})
            assert not r.is_error and r.text == "# Title\nbody", r.text

    anyio.run(main)
