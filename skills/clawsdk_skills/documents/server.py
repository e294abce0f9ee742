"""The documents skill: Markdown and text, DOCX through zipfile + XML, PDF text through pypdf."""

from __future__ import annotations

import io
import re
import zipfile
from typing import TYPE_CHECKING, Any
from xml.etree import ElementTree as ET
from xml.sax.saxutils import escape

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel

from clawsdk.errors import FileTooLarge
from clawsdk.mcp.toolkit import decode_text, tool_errors, truncate
from clawsdk_skills._common import ext, pack_server

if TYPE_CHECKING:
    from clawsdk.sandbox.base import Sandbox

W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
TEXT_EXT = (".md", ".markdown", ".txt", ".rst", ".text")
DOC_EXT = TEXT_EXT + (".docx", ".pdf")
#: the pages one doc_read, doc_outline or doc_search reads of a PDF from its `page` on; the text says where it
#: stopped and how to read on (what a read is, like `limit` lines: a PDF's text is read a part at a time)
MAX_PDF_PAGES = 100
#: characters of a matching line doc_search shows
MAX_HIT_CHARS = 300


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
            xml = z.read("word/document.xml")
    except (zipfile.BadZipFile, KeyError) as e:
        raise ToolError(f"{path} is not a valid DOCX file ({e})") from e
    try:
        root = ET.fromstring(xml)
    except ET.ParseError as e:
        raise ToolError(f"{path} is not a valid DOCX file (its word/document.xml: {e})") from e
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


def pdf_text(data: bytes, path: str, page: int = 1) -> tuple[str, str | None]:
    """The text of the PDF's pages from `page` on, MAX_PDF_PAGES at most, and a note when there are more."""
    try:
        import pypdf
    except ImportError as e:
        raise ToolError("PDF text needs the pypdf package, which is not installed here "
                        "(pip install pypdf)") from e
    first = max(page, 1)
    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        total = len(reader.pages)
        if total == 0:
            return "", None
        if first > total:
            raise ToolError(f"{path} has {total} pages; page={first} is past the end")
        last = min(total, first + MAX_PDF_PAGES - 1)
        pages = [f"--- page {n} ---\n{(reader.pages[n - 1].extract_text() or '').strip()}"
                 for n in range(first, last + 1)]
    except (ToolError, MemoryError):  # out of memory: the tool host says so, with its limit
        raise
    except Exception as e:  # pypdf raises many kinds on a broken file
        raise ToolError(f"{path}: could not read the PDF ({type(e).__name__}: {e})") from e
    note = None
    if last < total:
        note = (f"[PDF cut: read pages {first}-{last} of {total}; one call reads at most {MAX_PDF_PAGES} "
                f"pages; read on with page={last + 1}]")
    return "\n".join(pages), note


async def document(sandbox: Sandbox, path: str, page: int = 1) -> tuple[str, str | None]:
    """The text of a document, and for a PDF of more pages than one call reads, a note saying where it
    stopped."""
    data = await sandbox.read_capped(path)
    kind = ext(path)
    if kind == ".docx":
        return docx_text(data, path), None
    if kind == ".pdf":
        return pdf_text(data, path, page)
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
        hits: list[str] = []
        for t in targets:
            try:
                text, cut = await document(sandbox, t, 1)
            except (ToolError, FileTooLarge) as e:
                skipped.append(f"{t} ({e})")
                continue
            if cut:
                partly.append(f"{t} {cut.strip('[]')}")
            for n, line in enumerate(text.splitlines(), 1):
                if rx.search(line):
                    hits.append(f"{t}:{n}:{line[:MAX_HIT_CHARS]}")
                    if len(hits) > limit:
                        break
            if len(hits) > limit:
                break
        if len(hits) > limit:
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
