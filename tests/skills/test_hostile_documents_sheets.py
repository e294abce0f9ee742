"""Hostile workspace files against the documents and spreadsheets skills.

Their tools run behind the sandbox's boundary (tests/skills/boundary.py): what a file costs is bounded by the
tool host's time and memory limits, not by caps of the skill's own. Those tests go through a real tool session
and check what the agent sees: the call ends within the tool time limit as a tool error saying why, the next
call works, and the runner's event loop stays free.

- a PDF whose pages all point at one large content stream: 8 KB made doc_read take 28 s (pages x stream);
- doc_search with (a+)+$: Python's re cannot be interrupted, so only the process can be stopped.

What stays is each tool's meaning, checked in-process: a PDF read is 100 pages at most and says how to read on;
an XLSX is read as its cells say, not as its declared <dimension> (1.5 KB claiming A1:XFD1048576 once made
sheet_read pad 16,384 x 1,048,576 cells); a sheet answer holds at most 1,000 columns and about 200,000
characters, whole rows, and says where to read on.
"""

from __future__ import annotations

import json
import zlib

import anyio
import clawsdk_skills
import pytest

from clawsdk.tasks.model import File
from tests.conftest import loop_ticks
from tests.skills.boundary import behind_boundary, boundary_task, stopped_at_its_limit, timed
from tests.skills.test_skill_read_cap import zipped
from tests.tools.conftest import connected, task_with, text

# a regression hangs in C code (pypdf, openpyxl, re) that no signal interrupts: the thread method fails it
pytestmark = pytest.mark.timeout(120, method="thread")


def with_files(files: dict[str, bytes]):
    task = task_with({"notes.md": "# Notes\nnothing here\n"})
    return task.model_copy(update={"workspace": [*task.workspace,
                                                 *(File.from_bytes(p, d) for p, d in files.items())]})


def shared_stream_pdf(npages: int, reps: int) -> bytes:
    """`npages` pages that all draw one content stream of `reps` lines (as /tmp/host-audit/mkpdf.py)."""
    content = b"BT /F1 12 Tf 72 712 Td " + b"(hello world) Tj 0 -1 Td " * reps + b"ET\n"
    comp = zlib.compress(content, 9)
    objs = {1: b"<< /Type /Catalog /Pages 2 0 R >>",
            2: b"<< /Type /Pages /Kids [" + b" ".join(b"%d 0 R" % (10 + i) for i in range(npages))
               + b"] /Count %d >>" % npages,
            3: b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(comp) + comp + b"\nendstream",
            4: b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"}
    for i in range(npages):
        objs[10 + i] = (b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 3 0 R "
                        b"/Resources << /Font << /F1 4 0 R >> >> >>")
    out, offs = bytearray(b"%PDF-1.4\n"), {}
    for n in sorted(objs):
        offs[n] = len(out)
        out += b"%d 0 obj\n" % n + objs[n] + b"\nendobj\n"
    xref, top = len(out), max(objs)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (top + 1)
    for n in range(1, top + 1):
        out += (b"%010d 00000 n \n" % offs[n]) if n in offs else b"0000000000 65535 f \n"
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (top + 1, xref)
    return bytes(out)


def test_a_pdf_read_is_100_pages_at_most_and_says_how_to_read_on():
    """The page cap is what a read is (like doc_read's `limit` lines), not a guard: it stays."""
    files = {"many.pdf": shared_stream_pdf(150, 1)}

    async def main():
        async with connected(clawsdk_skills.factory("documents"), with_files(files)) as (c, _sb):
            r = await c.call_tool("doc_read", {"path": "many.pdf", "limit": 1000})
            assert "--- page 100 ---" in text(r) and "--- page 101 ---" not in text(r)
            assert "read pages 1-100 of 150" in text(r) and "read on with page=101" in text(r), text(r)[-300:]
            r = await c.call_tool("doc_read", {"path": "many.pdf", "page": 101, "limit": 1000})
            assert text(r).startswith("--- page 101 ---") and "--- page 150 ---" in text(r)
            assert "PDF cut" not in text(r), text(r)[-300:]
            r = await c.call_tool("doc_outline", {"path": "many.pdf", "page": 149})
            assert [h["text"] for h in r.structured_content["headings"]] == ["page 149", "page 150"]
            assert r.structured_content["note"] is None
            r = await c.call_tool("doc_outline", {"path": "many.pdf"})
            assert len(r.structured_content["headings"]) == 100
            assert "read on with page=101" in r.structured_content["note"]
            # doc_search says which PDFs it searched only in part
            r = await c.call_tool("doc_search", {"pattern": "hello", "path": "many.pdf", "max_matches": 3})
            assert text(r).startswith("many.pdf:2:hello world\nmany.pdf:4:hello world"), text(r)
            assert "[stopped at 3 matches]" in text(r)
            assert "searched in part: many.pdf PDF cut: read pages 1-100 of 150" in text(r), text(r)

    anyio.run(main)


def test_a_pdf_of_pages_sharing_one_large_stream_is_stopped_at_the_tool_time_limit():
    """100 pages drawing one 520 KB content stream (a few KB of file): pypdf parses the stream once a page,
    minutes of work. The call ends at the tool time limit, says so, and the next call answers."""
    files = {"amp.pdf": shared_stream_pdf(100, 20_000), "small.pdf": shared_stream_pdf(2, 1)}
    assert len(files["amp.pdf"]) < 20_000
    task = boundary_task(["documents"], files, tool_timeout_s=3)

    async def main():
        async with behind_boundary(task) as (session, _):
            async with loop_ticks() as ticks:
                r, took = await timed(session, "doc_read", {"path": "amp.pdf", "limit": 5})
            assert stopped_at_its_limit(r, took, task, "doc_read") == "timeout"
            assert len(ticks) >= 10, f"the event loop ran {len(ticks)} times in {took:.1f} s: doc_read blocked it"
            r = await session.call("doc_read", {"path": "small.pdf"})
            assert not r.is_error and r.text == "--- page 1 ---\nhello world\n--- page 2 ---\nhello world", r.text

    anyio.run(main)


def sparse_xlsx(dimension: str, cells: list[tuple[str, str]]) -> bytes:
    """An XLSX of a few hundred bytes whose sheet declares `dimension` and holds only `cells` (ref, inline text)."""

    ns = "http://schemas.openxmlformats.org/"
    rows: dict[int, list[str]] = {}
    for ref, value in cells:
        n = int("".join(ch for ch in ref if ch.isdigit()))
        rows.setdefault(n, []).append(f'<c r="{ref}" t="inlineStr"><is><t>{value}</t></is></c>')
    sheet_data = "".join(f'<row r="{n}">{"".join(cs)}</row>' for n, cs in sorted(rows.items()))
    parts = {
        "[Content_Types].xml": f'<?xml version="1.0" encoding="UTF-8"?><Types xmlns="{ns}package/2006/content-types">'
        '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
        '<Default Extension="xml" ContentType="application/xml"/><Override PartName="/xl/workbook.xml" '
        'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/><Override '
        'PartName="/xl/worksheets/sheet1.xml" ContentType="application/vnd.openxmlformats-officedocument.'
        'spreadsheetml.worksheet+xml"/></Types>',
        "_rels/.rels": f'<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="{ns}package/2006/relationships">'
        f'<Relationship Id="rId1" Type="{ns}officeDocument/2006/relationships/officeDocument" '
        'Target="xl/workbook.xml"/></Relationships>',
        "xl/workbook.xml": f'<?xml version="1.0" encoding="UTF-8"?><workbook xmlns="{ns}spreadsheetml/2006/main" '
        f'xmlns:r="{ns}officeDocument/2006/relationships"><sheets><sheet name="S" sheetId="1" r:id="rId1"/>'
        '</sheets></workbook>',
        "xl/_rels/workbook.xml.rels": f'<?xml version="1.0" encoding="UTF-8"?><Relationships '
        f'xmlns="{ns}package/2006/relationships"><Relationship Id="rId1" '
        f'Type="{ns}officeDocument/2006/relationships/worksheet" Target="worksheets/sheet1.xml"/></Relationships>',
        "xl/worksheets/sheet1.xml": f'<?xml version="1.0" encoding="UTF-8"?><worksheet '
        f'xmlns="{ns}spreadsheetml/2006/main"><dimension ref="{dimension}"/><sheetData>{sheet_data}</sheetData>'
        '</worksheet>',
    }
    return zipped(parts)


def test_an_xlsx_whose_declared_dimension_lies_is_read_by_its_cells():
    files = {
        # the audit's A1:XFD501 variant (147.7 MB result) cut to 60 rows, to fail quickly before the fix too
        "wide.xlsx": sparse_xlsx("A1:XFD60", [("A1", "h"), ("B1", "k"), ("A2", "x"), ("A60", "y")]),
        # the audit's file: a million rows declared and one cell in the last
        "tall.xlsx": sparse_xlsx("A1:XFD1048576", [("A1", "h"), ("A1048576", "1")]),
        # cells really present out at column XFD on every row: cut to the column cap
        "real_wide.xlsx": sparse_xlsx("A1:XFD300", [(ref, "v") for n in range(1, 301)
                                                    for ref in (f"A{n}", f"XFD{n}")]),
    }

    async def main():
        async with connected(clawsdk_skills.factory("spreadsheets"), with_files(files)) as (c, _sb):
            r = await c.call_tool("sheet_read", {"path": "wide.xlsx"})
            size = len(json.dumps(r.structured_content))
            assert size < 20_000, f"a sheet of 4 cells gave a {size:,}-character result"
            assert r.structured_content["header"] == ["h", "k"]
            assert r.structured_content["rows"][0] == ["x", None] and r.structured_content["total_rows"] == 59

            # a cell really in the last row: the sheet is a million rows of one column, read whole, paged
            r = await c.call_tool("sheet_read", {"path": "tall.xlsx", "offset": 1_048_570})
            assert not r.is_error, text(r)
            data = r.structured_content
            assert data["header"] == ["h"] and data["total_rows"] == 1_048_575, text(r)[:300]
            assert data["rows"] == [[None]] * 4 + [["1"]] and data["note"] is None, text(r)[-300:]
            r = await c.call_tool("sheet_list", {"path": "tall.xlsx"})
            assert r.structured_content["sheets"][0]["rows"] == 1_048_576
            assert r.structured_content["sheets"][0]["columns"] == 1
            r = await c.call_tool("sheet_query", {"path": "tall.xlsx", "where": [{"column": "h", "op": "==",
                                                                                  "value": "1"}]})
            assert r.structured_content["rows"] == [["1"]] and r.structured_content["note"] is None, text(r)

            r = await c.call_tool("sheet_read", {"path": "real_wide.xlsx", "limit": 500})
            data = r.structured_content
            assert data["header"] == ["v"] and data["rows"][0] == ["v"], data["header"][:5]  # XFD is past the cap
            assert "cut to the first 1,000 columns" in data["note"], data["note"]
            assert len(json.dumps(data)) < 20_000
            # sheet_update writes the whole sheet back: one it read only in part would lose the rest
            r = await c.call_tool("sheet_update", {"path": "real_wide.xlsx", "cell": "B2", "value": 1})
            assert r.is_error and "cut to the first 1,000 columns" in text(r), text(r)

    anyio.run(main)


def test_a_csv_of_commas_is_cut_to_the_column_cap_and_the_result_to_its_size():
    import clawsdk_skills.spreadsheets.server as sheets

    wide = ",".join(f"c{i}" for i in range(5_000)) + "\n" + ("x" * 5_000 + ",") * 60 + "\n"

    async def main():
        async with connected(clawsdk_skills.factory("spreadsheets"), task_with({"w.csv": wide})) as (c, _sb):
            r = await c.call_tool("sheet_read", {"path": "w.csv"})
            data = r.structured_content
            assert len(data["header"]) == 1_000 and "1,000 columns" in data["note"], data["note"]
            assert len(json.dumps(data)) < sheets.MAX_RESULT_CHARS * 2
            assert "result is cut" in data["note"] and data["rows"][0][0].endswith("...[cut]")

    anyio.run(main)


def test_doc_search_with_a_pattern_that_backtracks_without_end_is_stopped_and_the_loop_stays_free():
    task = boundary_task(["documents"], {"r.md": "a" * 40 + "!\n", "s.md": "# fine\nno a here\n"}, tool_timeout_s=2)

    async def main():
        async with behind_boundary(task) as (session, _):
            async with loop_ticks() as ticks:
                bad, took = await timed(session, "doc_search", {"pattern": "(a+)+$", "path": "r.md"})
            good = await session.call("doc_search", {"pattern": r"^#\s+fine", "ignore_case": False})
            return bad, took, ticks, good

    bad, took, ticks, good = anyio.run(main)
    assert stopped_at_its_limit(bad, took, task, "doc_search") == "timeout"
    assert len(ticks) >= 10, f"the event loop ran {len(ticks)} times in {took:.1f} s: doc_search blocked it"
    assert good.text == "s.md:1:# fine", good.text
