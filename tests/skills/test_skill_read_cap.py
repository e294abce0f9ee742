"""The skill packs read workspace files through the cap the core file tools keep (MAX_READ_BYTES, 16 MiB).

They run in the runner's process, which every rollout shares, and read with an uncapped `sandbox.read`: a
1 GiB file the agent wrote (what `file_mb` allows) went whole into the runner's memory, and a DOCX of a
few KiB could unpack gigabytes there. Now a file over the cap is a tool error naming it, its size and the limit.
"""

from __future__ import annotations

import io
import os
import resource
import zipfile

import anyio
import pytest

import clawsdk_skills
from clawsdk.sandbox.base import MAX_READ_BYTES
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


def test_a_sparse_gigabyte_is_a_tool_error_without_reaching_the_runners_memory():
    async def main():
        async with connected(clawsdk_skills.factory("spreadsheets"), task_with({"a.csv": "x\n1\n"})) as (c, sb):
            sparse(sb, "big.csv", GIB)
            before = peak_mib()
            r = await c.call_tool("sheet_read", {"path": "big.csv"})
            grew = peak_mib() - before
            assert r.is_error and too_big("big.csv", GIB) in text(r), text(r)
            assert grew < 256, f"the runner's peak grew by {grew:.0f} MiB reading a file it refused"
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


def test_an_archive_that_unpacks_past_the_cap_is_refused_before_it_is_unpacked():
    """A DOCX or XLSX under the cap whose parts deflate a thousandfold: refused by the sizes its entries give."""
    from clawsdk_skills.documents.server import markdown_to_docx

    big = MAX_READ_BYTES * 4  # 64 MiB of spaces: about 64 KiB deflated
    with zipfile.ZipFile(io.BytesIO(markdown_to_docx("# Title\n\nbody\n"))) as z:
        parts = {i.filename: z.read(i) for i in z.infolist()}
    doc = parts["word/document.xml"]
    bomb = zipped(parts | {"word/document.xml": doc.replace(b"<w:body>", b"<w:body>" + b" " * big, 1)})
    assert len(bomb) < 2**20

    async def main():
        async with connected(clawsdk_skills.factory("documents"), task_with()) as (c, sb):
            (sb.workspace / "bomb.docx").write_bytes(bomb)
            (sb.workspace / "ok.docx").write_bytes(markdown_to_docx("# Title\n\nbody\n"))
            r = await c.call_tool("doc_read", {"path": "bomb.docx"})
            assert r.is_error and "bomb.docx: its part word/document.xml unpacks to 64.0 MiB, over the " \
                                  f"{MIB} MiB read of one file" in text(r), text(r)
            r = await c.call_tool("doc_read", {"path": "ok.docx"})
            assert not r.is_error and "# Title" in text(r), text(r)

        pytest.importorskip("openpyxl")
        async with connected(clawsdk_skills.factory("spreadsheets"), task_with()) as (c, sb):
            await c.call_tool("sheet_write", {"path": "ok.xlsx", "rows": [[1, 2]], "header": ["a", "b"]})
            with zipfile.ZipFile(sb.workspace / "ok.xlsx") as z:
                parts = {i.filename: z.read(i) for i in z.infolist()}
            many = {f"xl/media/pad{i}.bin": b"\0" * (MAX_READ_BYTES - 1) for i in range(5)}  # each under the cap
            (sb.workspace / "wide.xlsx").write_bytes(zipped(parts | many))
            r = await c.call_tool("sheet_read", {"path": "wide.xlsx"})
            assert r.is_error and "wide.xlsx: its parts unpack to 80.0 MiB together" in text(r), text(r)
            r = await c.call_tool("sheet_read", {"path": "ok.xlsx"})
            assert not r.is_error and r.structured_content["rows"] == [[1, 2]], text(r)

    anyio.run(main)
