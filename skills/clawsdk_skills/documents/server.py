"""The documents skill: Markdown and text, DOCX through zipfile + XML, PDF text through pypdf."""

from __future__ import annotations

import contextlib
import io
import re
import time
import zipfile
from typing import TYPE_CHECKING, Any
from xml.etree import ElementTree as ET
from xml.sax.saxutils import escape

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel

from clawsdk import rematch
from clawsdk.errors import FileTooLarge
from clawsdk.mcp.toolkit import decode_text, tool_errors, truncate
from clawsdk_skills._common import check_unpacked, ext, pack_server

if TYPE_CHECKING:
    from clawsdk.sandbox.base import Sandbox

W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
TEXT_EXT = (".md", ".markdown", ".txt", ".rst", ".text")
DOC_EXT = TEXT_EXT + (".docx", ".pdf")
#: doc_search matches in a process of its own (clawsdk.rematch), stopped past this, a batch of texts a time
SEARCH_TIMEOUT_S = 20.0
SEARCH_BATCH_BYTES = 4 * 2**20


class Heading(BaseModel):
    level: int
    text: str
    line: int


class Outline(BaseModel):
    path: str
    kind: str
    headings: list[Heading]
    lines: int
    note: str | None = None


def docx_text(data: bytes, path: str) -> str:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            check_unpacked(z, path)
            xml = z.read("word/document.xml")
    except (zipfile.BadZipFile, KeyError) as e:
        raise ToolError(f"{path} is not a valid DOCX file ({e})") from e
    root = ET.fromstring(xml)
    body = root.find(f"{W}body")
    out: list[str] = []

    def para(p: ET.Element) -> str:
        parts = []
        for node in p.iter():
            if node.tag == f"{W}t":
                parts.append(node.text or "")
            elif node.tag == f"{W}tab":
                parts.append("\t")
            elif node.tag in (f"{W}br", f"{W}cr"):
                parts.append("\n")
        text = "".join(parts)
        style = p.find(f"{W}pPr/{W}pStyle")
        val = style.get(f"{W}val", "") if style is not None else ""
        m = re.match(r"(?i)heading\s*(\d)", val)
        level = int(m.group(1)) if m else (1 if val.lower() == "title" else 0)
        if level and text.strip():
            return "#" * level + " " + text
        bullet = p.find(f"{W}pPr/{W}numPr") is not None or re.match(r"(?i)list\s*(bullet|paragraph)", val)
        if bullet and text.strip():
            return "- " + text
        return text

    for child in list(body) if body is not None else []:
        if child.tag == f"{W}p":
            out.append(para(child))
        elif child.tag == f"{W}tbl":
            for tr in child.iter(f"{W}tr"):
                cells = [" ".join(para(p) for p in tc.iter(f"{W}p")).strip() for tc in tr.iter(f"{W}tc")]
                out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


#: a PDF is read a slice of pages at a time: its text costs pypdf time in proportion to the page content it
#: parses, and a file of a few KiB can point every one of its pages at one large content stream (40 pages of
#: one 500 KB stream took 28 s, on the event loop every rollout shares). One call reads at most this many
#: pages, characters of text, and bytes of page content, and says where it stopped and how to read on.
MAX_PDF_PAGES = 100
MAX_PDF_CHARS = 400_000
MAX_PDF_CONTENT_BYTES = 2 * 2**20
#: and stops a page's extraction past this many seconds of one call (the page is reported as cut)
PDF_TIME_BUDGET_S = 4.0
#: pypdf lists every page of the tree before it reads one (about 0.1 ms each: a 16 MiB file holds 100,000)
MAX_PDF_TREE_PAGES = 20_000


class _PdfStop(Exception):
    """Raised from pypdf's visitors to stop a page's extraction at a cap."""


class PdfBudget:
    """What one call may still spend on PDF text; doc_search shares one across the files it searches."""

    def __init__(self) -> None:
        self.chars = MAX_PDF_CHARS
        self.content = MAX_PDF_CONTENT_BYTES
        self.deadline = time.monotonic() + PDF_TIME_BUDGET_S

    def spent(self) -> str | None:
        if self.chars <= 0:
            return f"{MAX_PDF_CHARS:,} characters of PDF text"
        if self.content <= 0:
            return f"{MAX_PDF_CONTENT_BYTES / 2**20:.3g} MiB of PDF page content"
        if time.monotonic() >= self.deadline:
            return f"{PDF_TIME_BUDGET_S:g} s of PDF text extraction"
        return None


def _content_bytes(page: Any, over: int) -> int:
    """The decoded size of a page's content streams, counted until it passes `over` (a cap, not the total)."""
    contents = page.get("/Contents")
    if contents is None:
        return 0
    contents = contents.get_object()
    streams = list(contents) if isinstance(contents, list) else [contents]
    size = 0
    for s in streams:
        s = s.get_object()
        if hasattr(s, "get_data"):
            size += len(s.get_data())
            if size > over:
                break
    return size


def _pdf_config():
    import pypdf

    apply = getattr(pypdf, "apply_configuration", None)
    if apply is None:  # an older pypdf: the declared /Count is all there is to go on
        return contextlib.nullcontext()
    return apply(page_tree_maximum_entries=MAX_PDF_TREE_PAGES + 1000)


def pdf_text(data: bytes, path: str, page: int = 1, budget: PdfBudget | None = None) -> tuple[str, str | None]:
    """The text of the PDF's pages from `page` on, as far as the caps allow, and a note when it was cut."""
    try:
        import pypdf
    except ImportError as e:
        raise ToolError("PDF text needs the pypdf package, which is not installed here "
                        "(pip install pypdf)") from e
    budget = budget or PdfBudget()
    too_many = (f"{path}: its page tree holds more than {MAX_PDF_TREE_PAGES:,} pages, more than this tool reads "
                f"of one PDF")
    pages: list[str] = []
    stop: str | None = None
    first = max(page, 1)
    try:
        with _pdf_config():
            reader = pypdf.PdfReader(io.BytesIO(data))
            try:
                declared = int(reader.trailer["/Root"]["/Pages"]["/Count"])
            except Exception:  # noqa: BLE001 - a broken tree: pypdf says so below
                declared = 0
            if declared > MAX_PDF_TREE_PAGES:
                raise ToolError(too_many)
            total = len(reader.pages)
            if total == 0:
                return "", None
            if first > total:
                raise ToolError(f"{path} has {total} pages; page={first} is past the end")
            n = first
            while n <= total:
                if n - first >= MAX_PDF_PAGES:
                    stop = f"{MAX_PDF_PAGES} pages"
                    break
                stop = budget.spent()
                if stop:
                    break
                p = reader.pages[n - 1]
                size = _content_bytes(p, budget.content)
                if size > budget.content:
                    if pages:  # the next call starts with it, with the whole budget
                        stop = f"{MAX_PDF_CONTENT_BYTES / 2**20:.3g} MiB of PDF page content"
                        break
                    pages.append(f"--- page {n} ---\n[not read: its content streams hold over "
                                 f"{MAX_PDF_CONTENT_BYTES / 2**20:.3g} MiB, more than one call parses]")
                    budget.content = 0
                    n += 1
                    continue
                budget.content -= size
                chunks: list[str] = []
                seen = [0, 0]  # characters, operators

                def on_text(text: Any, *_: Any) -> None:
                    chunks.append(text)
                    seen[0] += len(text)
                    if seen[0] > budget.chars:
                        raise _PdfStop(f"{MAX_PDF_CHARS:,} characters of PDF text")

                def on_operator(*_: Any) -> None:
                    seen[1] += 1
                    if seen[1] % 500 == 0 and time.monotonic() >= budget.deadline:
                        raise _PdfStop(f"{PDF_TIME_BUDGET_S:g} s of PDF text extraction")

                try:
                    text = (p.extract_text(visitor_text=on_text, visitor_operand_before=on_operator) or "").strip()
                except _PdfStop as e:
                    text = "".join(chunks)[:max(budget.chars, 0)].strip()
                    pages.append(f"--- page {n} ---\n{text}\n[page {n} cut: past {e}]")
                    stop = str(e)
                    budget.chars = 0
                    n += 1
                    break
                text = text[:max(budget.chars, 0)]
                budget.chars -= len(text)
                pages.append(f"--- page {n} ---\n{text}")
                n += 1
    except ToolError:
        raise
    except Exception as e:  # noqa: BLE001 - pypdf raises many kinds on a broken file
        if type(e).__name__ == "LimitReachedError" and "page tree" in str(e).lower():
            raise ToolError(too_many) from e
        raise ToolError(f"{path}: could not read the PDF ({type(e).__name__}: {e})") from e
    note = None
    if stop and n == first:
        note = (f"[PDF not read: this call already spent its {stop}; read it, from page={first}, "
                f"in a call of its own]")
    elif stop and n <= total:
        note = (f"[PDF cut: read pages {first}-{n - 1} of {total}; one call reads at most {stop}; "
                f"read on with page={n}]")
    elif stop:
        note = f"[PDF cut: read pages {first}-{n - 1} of {total}; one call reads at most {stop}]"
    return "\n".join(pages), note


async def document(sandbox: Sandbox, path: str, page: int = 1,
                   budget: PdfBudget | None = None) -> tuple[str, str | None]:
    """The text of a document, and for a PDF cut at a cap, a note saying where it stopped."""
    data = await sandbox.read_capped(path)
    kind = ext(path)
    if kind == ".docx":
        return docx_text(data, path), None
    if kind == ".pdf":
        return pdf_text(data, path, page, budget)
    return decode_text(data, path), None


def markdown_to_docx(markdown: str) -> bytes:
    """A minimal, valid DOCX: headings, bullet items (as 'List Bullet' paragraphs) and paragraphs."""
    paras = []
    for line in markdown.splitlines():
        m = re.match(r"^(#{1,6})\s+(.*)", line)
        if m:
            style, text = f"Heading{len(m.group(1))}", m.group(2)
        elif re.match(r"^\s*[-*]\s+", line):
            style, text = "ListBullet", re.sub(r"^\s*[-*]\s+", "", line)
        elif not line.strip():
            continue
        else:
            style, text = None, line
        ppr = f'<w:pPr><w:pStyle w:val="{style}"/></w:pPr>' if style else ""
        paras.append(f'<w:p>{ppr}<w:r><w:t xml:space="preserve">{escape(text)}</w:t></w:r></w:p>')
    doc = ('<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
           '<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>'
           + "".join(paras) + "</w:body></w:document>")
    styles = ('<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
              '<w:styles xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">'
              + "".join(f'<w:style w:type="paragraph" w:styleId="Heading{i}"><w:name w:val="heading {i}"/>'
                        f'<w:pPr><w:outlineLvl w:val="{i - 1}"/></w:pPr></w:style>' for i in range(1, 7))
              + '<w:style w:type="paragraph" w:styleId="ListBullet"><w:name w:val="List Bullet"/></w:style>'
              "</w:styles>")
    content_types = ('<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
                     '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
                     '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
                     '<Default Extension="xml" ContentType="application/xml"/>'
                     '<Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-'
                     'officedocument.wordprocessingml.document.main+xml"/>'
                     '<Override PartName="/word/styles.xml" ContentType="application/vnd.openxmlformats-'
                     'officedocument.wordprocessingml.styles+xml"/></Types>')
    rels = ('<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
            '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
            '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/'
            'officeDocument" Target="word/document.xml"/></Relationships>')
    doc_rels = ('<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
                '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
                '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/'
                'relationships/styles" Target="styles.xml"/></Relationships>')
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("[Content_Types].xml", content_types)
        z.writestr("_rels/.rels", rels)
        z.writestr("word/document.xml", doc)
        z.writestr("word/styles.xml", styles)
        z.writestr("word/_rels/document.xml.rels", doc_rels)
    return buf.getvalue()


def server(sandbox: Sandbox, task: Any = None) -> MCPServer:
    srv = pack_server(__file__)

    @srv.tool()
    @tool_errors
    async def doc_read(path: str, offset: int = 1, limit: int = 400, page: int = 1) -> str:
        """The text of a document (.md, .txt, .docx, .pdf): lines from `offset` (1-based), `limit` lines.
        For a PDF, `page` is the first page read (one call reads at most 100 pages; the text says where it
        stopped, and the lines count from that page)."""
        text, cut = await document(sandbox, path, page)
        lines = text.splitlines()
        start = max(offset, 1) - 1
        shown = lines[start:start + max(limit, 1)]
        out = "\n".join(shown)
        rest = len(lines) - start - len(shown)
        if rest > 0:
            out += f"\n[{rest} more lines; read with offset={start + len(shown) + 1}]"
        out = truncate(out, hint="read fewer lines with limit=")
        return out + "\n" + cut if cut else out

    @srv.tool()
    @tool_errors
    async def doc_outline(path: str, page: int = 1) -> Outline:
        """The headings of a Markdown or DOCX document, or the pages of a PDF (from `page`), with their line numbers."""
        text, cut = await document(sandbox, path, page)
        lines = text.splitlines()
        heads = []
        for n, line in enumerate(lines, 1):
            m = re.match(r"^(#{1,6})\s+(.*)", line)
            if m:
                heads.append(Heading(level=len(m.group(1)), text=m.group(2).strip(), line=n))
            elif line.startswith("--- page ") and ext(path) == ".pdf":
                heads.append(Heading(level=1, text=line.strip("- "), line=n))
        return Outline(path=path, kind=ext(path).lstrip(".") or "text", headings=heads, lines=len(lines), note=cut)

    @srv.tool()
    @tool_errors
    async def doc_search(pattern: str, path: str = ".", ignore_case: bool = True, max_matches: int = 100) -> str:
        """Find a regular expression in documents (md, txt, docx, pdf) under `path`; prints path:line:text."""
        try:
            rx = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
        except re.error as e:
            raise ToolError(f"invalid regular expression: {e}") from e
        if ext(path) in DOC_EXT:
            targets = [path]
        else:
            targets = [e.path for e in await sandbox.list(path, recursive=True)
                       if not e.is_dir and ext(e.path) in DOC_EXT]  # one over the read cap: 'not searched'
        limit = max(max_matches, 1)
        skipped: list[str] = []
        partly: list[str] = []
        budget = PdfBudget()  # one for the call: many large PDFs cost no more than one

        async def texts():
            for t in targets:
                try:
                    text, cut = await document(sandbox, t, 1, budget)
                except (ToolError, FileTooLarge) as e:
                    skipped.append(f"{t} ({e})")
                    continue
                if cut:
                    partly.append(f"{t} {cut.strip('[]')}")
                # the matcher skips what looks binary; a NUL in extracted text is no reason to
                yield t, text.replace("\x00", " ").encode("utf-8", "replace")

        # the agent's pattern runs in a process of its own, killed at the deadline: (a+)+$ against a line of a's
        # backtracks for hours, and this loop is every rollout's
        try:
            found = await rematch.search_lines(rx, texts(), limit, timeout_s=SEARCH_TIMEOUT_S,
                                               batch_bytes=SEARCH_BATCH_BYTES)
        except TimeoutError as e:
            raise ToolError(str(e)) from None
        hits: list[str] = []
        for h in found:  # path:line:text, the text cut to 300 characters as before
            t = next((t for t in targets if h.startswith(t + ":")), None)
            if t is None:
                hits.append(h)
                continue
            n, _, line = h[len(t) + 1:].partition(":")
            hits.append(f"{t}:{n}:{line[:300]}")
        if len(hits) >= limit:
            hits = hits[:limit] + [f"[stopped at {limit} matches]"]
        out = "\n".join(hits) if hits else "(no match)"
        if partly:
            out += "\n[searched in part: " + "; ".join(partly) + "]"
        if skipped:
            out += "\n[not searched: " + "; ".join(skipped) + "]"
        return truncate(out)

    @srv.tool()
    @tool_errors
    async def doc_write(path: str, markdown: str) -> str:
        """Write a document from Markdown: .md/.txt as given, .docx converted (headings, bullets, paragraphs)."""
        kind = ext(path)
        if kind == ".docx":
            data = markdown_to_docx(markdown)
        elif kind in TEXT_EXT:
            data = markdown.encode("utf-8")
        elif kind == ".pdf":
            raise ToolError("this skill cannot write PDF; write .docx or .md instead")
        else:
            raise ToolError(f"{path}: write documents as .md, .txt or .docx")
        await sandbox.write(path, data)
        return f"wrote {len(data)} bytes to {path}"

    return srv
