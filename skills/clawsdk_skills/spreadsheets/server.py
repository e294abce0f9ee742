"""The spreadsheets skill: CSV/TSV natively, XLSX through openpyxl when it is installed."""

from __future__ import annotations

import csv
import datetime as dt
import io
import re
from typing import TYPE_CHECKING, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field

from clawsdk.mcp.toolkit import tool_errors
from clawsdk_skills._common import ext, pack_server

if TYPE_CHECKING:
    from clawsdk.sandbox.base import Sandbox

#: the most rows one sheet_read or sheet_query answers (its `limit`); offset pages on
MAX_ROWS = 500
#: the columns of a sheet this skill reads: a row past them is cut, and the answer says so
MAX_COLUMNS = 1_000
#: characters of cell values one answer holds, whole rows at a time (the note says where to read on), and of
#: one cell when a single row is over that
MAX_RESULT_CHARS = 200_000
MAX_CELL_CHARS = 1_000
#: the last cell a spreadsheet has (Excel's XFD1048576): sheet_update refuses an address past it
MAX_SHEET_ROWS = 1_048_576
MAX_SHEET_COLUMNS = 16_384
Cell = str | int | float | bool | None


class SheetInfo(BaseModel):
    name: str
    rows: int
    columns: int
    header: list[Cell]
    note: str | None = None


class SheetList(BaseModel):
    path: str
    sheets: list[SheetInfo]


class SheetData(BaseModel):
    header: list[Cell]
    rows: list[list[Cell]]
    total_rows: int = Field(description="data rows before offset/limit")
    note: str | None = None


class Condition(BaseModel):
    column: str
    op: Literal["==", "!=", "<", "<=", ">", ">=", "contains", "startswith", "in"] = "=="
    value: Any = None


def _cell(v: Any) -> Cell:
    if isinstance(v, (dt.datetime, dt.date, dt.time)):
        return v.isoformat()
    if v is None or isinstance(v, (str, int, float, bool)):
        return v
    return str(v)


def _openpyxl():
    try:
        import openpyxl
    except ImportError as e:
        raise ToolError("XLSX files need the openpyxl package, which is not installed here; "
                        "use CSV, or install it with: pip install openpyxl") from e
    return openpyxl


def _workbook(data: bytes, **kwargs: Any):
    """The XLSX workbook in `data`."""
    return _openpyxl().load_workbook(io.BytesIO(data), **kwargs)


def _delimiter(path: str) -> str:
    return "\t" if ext(path) in (".tsv", ".tab") else ","


def _rows(raw_rows: Any, convert: Any, trim: bool) -> tuple[list[list[Cell]], str | None]:
    """Rows as lists of cells, each cut to MAX_COLUMNS, and a note when one was."""
    rows: list[list[Cell]] = []
    wide = False
    for raw in raw_rows:
        if len(raw) > MAX_COLUMNS:
            raw = raw[:MAX_COLUMNS]
            wide = True
        row = [convert(c) for c in raw]
        if trim:
            while row and row[-1] is None:
                row.pop()
        rows.append(row)
    return rows, (f"cut to the first {MAX_COLUMNS:,} columns, the most this skill reads" if wide else None)


def _pad(rows: list[list[Cell]], width: int) -> list[list[Cell]]:
    """Rows padded with empty cells to `width`."""
    return [r + [None] * (width - len(r)) if len(r) < width else r for r in rows]


def _width(rows: list[list[Cell]], path: str) -> int:
    """How wide an XLSX sheet's rows are shown: its used range (its rows end at their last cell). 0 for a CSV,
    whose rows are shown as they are."""
    return max((len(r) for r in rows), default=0) if ext(path) in (".xlsx", ".xlsm") else 0


def _at(row: list[Cell], i: int) -> Cell:
    """The row's cell in column `i` (0-based); past the row's end, empty."""
    return row[i] if i < len(row) else None


async def load_noted(sandbox: Sandbox, path: str) -> tuple[dict[str, list[list[Cell]]], dict[str, str]]:
    """Every sheet of the file as rows of cells, and for each sheet cut to MAX_COLUMNS, a note saying so.
    An XLSX sheet's rows are as long as its cells say (trailing empty cells left out)."""
    data = await sandbox.read_capped(path)
    notes: dict[str, str] = {}
    if ext(path) in (".xlsx", ".xlsm"):
        wb = _workbook(data, data_only=True, read_only=True)
        try:
            sheets = {}
            for ws in wb.worksheets:
                if hasattr(ws, "reset_dimensions"):
                    # the cells present say how large the sheet is, not its <dimension>, the file's word for it
                    # (openpyxl pads every row up to it: A1:XFD1048576 made a million rows of 16,384 cells)
                    ws.reset_dimensions()
                rows, note = _rows(ws.iter_rows(values_only=True), _cell, trim=True)
                sheets[ws.title] = rows
                if note:
                    notes[ws.title] = note
            return sheets, notes
        finally:
            wb.close()
    if ext(path) not in (".csv", ".tsv", ".tab", ".txt"):
        raise ToolError(f"{path}: not a spreadsheet this skill reads (CSV, TSV, XLSX)")
    text = data.decode("utf-8-sig", "replace")
    rows, note = _rows(csv.reader(io.StringIO(text), delimiter=_delimiter(path)), lambda c: c, trim=False)
    return {"Sheet1": rows}, ({"Sheet1": note} if note else {})


async def load(sandbox: Sandbox, path: str) -> dict[str, list[list[Cell]]]:
    """Every sheet of the file as rows of cells (`load_noted` says which were cut to MAX_COLUMNS)."""
    return (await load_noted(sandbox, path))[0]


def _short(v: Cell, limit: int = MAX_CELL_CHARS) -> Cell:
    return v[:limit] + "...[cut]" if isinstance(v, str) and len(v) > limit else v


def _size(row: list[Cell]) -> int:
    return sum(len(c) if isinstance(c, str) else 6 for c in row) + len(row) + 2


def _fit(head: list[Cell], rows: list[list[Cell]]) -> tuple[list[Cell], list[list[Cell]], bool]:
    """The header and as many rows as fit in MAX_RESULT_CHARS (long cells shortened if even one row does not)."""
    cut = False
    if _size(head) > MAX_RESULT_CHARS // 2:
        head, cut = [_short(c) for c in head], True
    left = MAX_RESULT_CHARS - _size(head)
    out: list[list[Cell]] = []
    for r in rows:
        n = _size(r)
        if n > left:
            if out:
                return head, out, True
            r, cut = [_short(c, max(20, min(MAX_CELL_CHARS, left // max(len(r), 1)))) for c in r], True
            n = _size(r)
        out.append(r)
        left -= n
    return head, out, cut


def pick(sheets: dict[str, list[list[Cell]]], sheet: str | None, path: str) -> list[list[Cell]]:
    if sheet is None:
        return next(iter(sheets.values()), [])
    if sheet not in sheets:
        raise ToolError(f"{path} has no sheet {sheet!r}; sheets: {', '.join(sheets)}")
    return sheets[sheet]


def number(v: Any) -> float | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        s = v.strip().replace(",", "") if re.fullmatch(r"-?[\d,]+(\.\d+)?", v.strip()) else v.strip()
        try:
            return float(s)
        except ValueError:
            return None
    return None


def _test(cell: Cell, cond: Condition) -> bool:
    op, want = cond.op, cond.value
    if op == "contains":
        return str(want).lower() in str(cell if cell is not None else "").lower()
    if op == "startswith":
        return str(cell if cell is not None else "").lower().startswith(str(want).lower())
    if op == "in":
        options = want if isinstance(want, list) else [want]
        return any(_test(cell, Condition(column=cond.column, op="==", value=o)) for o in options)
    a, b = number(cell), number(want)
    if a is None or b is None:
        a, b = ("" if cell is None else str(cell)), ("" if want is None else str(want))  # type: ignore[assignment]
    return {"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]  # type: ignore[operator]


def _col(header: list[Cell], name: str, path: str) -> int:
    names = [str(h) if h is not None else "" for h in header]
    if name in names:
        return names.index(name)
    lowered = [n.strip().lower() for n in names]
    if name.strip().lower() in lowered:
        return lowered.index(name.strip().lower())
    raise ToolError(f"{path} has no column {name!r}; columns: {', '.join(names)}")


def _aggregate(values: list[Cell], fn: str) -> Cell:
    if fn == "count":
        return sum(1 for v in values if v not in (None, ""))
    nums = [n for n in (number(v) for v in values) if n is not None]
    if not nums:
        return None
    result = {"sum": sum(nums), "mean": sum(nums) / len(nums), "min": min(nums), "max": max(nums)}.get(fn)
    if result is None:
        raise ToolError(f"unknown aggregate {fn!r}; use sum, mean, min, max or count")
    return int(result) if float(result).is_integer() and fn != "mean" else round(result, 10)


def _cell_ref(ref: str) -> tuple[int, int]:
    m = re.fullmatch(r"([A-Za-z]{1,3})(\d+)", ref.strip())
    if not m:
        raise ToolError(f"cell {ref!r} is not in A1 notation (column letters then row number, e.g. C7)")
    col = 0
    for ch in m.group(1).upper():
        col = col * 26 + ord(ch) - 64
    return int(m.group(2)), col


def server(sandbox: Sandbox, task: Any = None) -> MCPServer:
    srv = pack_server(__file__)

    async def save(path: str, rows: list[list[Cell]], sheet: str | None) -> None:
        if ext(path) in (".xlsx", ".xlsm"):
            openpyxl = _openpyxl()
            try:
                wb = _workbook(await sandbox.read_capped(path))
            except FileNotFoundError:
                wb = openpyxl.Workbook()
                wb.active.title = sheet or "Sheet1"
            name = sheet or wb.worksheets[0].title
            if name in wb.sheetnames:
                idx = wb.sheetnames.index(name)
                wb.remove(wb[name])
                ws = wb.create_sheet(name, idx)
            else:
                ws = wb.create_sheet(name)
            for row in rows:
                ws.append(list(row))
            buf = io.BytesIO()
            wb.save(buf)
            await sandbox.write(path, buf.getvalue())
            return
        if ext(path) not in (".csv", ".tsv", ".tab", ".txt"):
            raise ToolError(f"{path}: write spreadsheets as .csv, .tsv or .xlsx")
        text = io.StringIO()
        writer = csv.writer(text, delimiter=_delimiter(path), lineterminator="\n")
        for row in rows:
            writer.writerow(["" if c is None else c for c in row])
        await sandbox.write(path, text.getvalue().encode("utf-8"))

    @srv.tool()
    @tool_errors
    async def sheet_list(path: str) -> SheetList:
        """The sheets of a spreadsheet file with their row and column counts and header row."""
        sheets, notes = await load_noted(sandbox, path)
        infos = []
        for n, r in sheets.items():
            head, _, cut = _fit(r[0] if r else [], [])
            note = "; ".join(x for x in (notes.get(n), "header cells shortened" if cut else None) if x) or None
            infos.append(SheetInfo(name=n, rows=len(r), columns=max((len(x) for x in r), default=0), header=head,
                                   note=note))
        return SheetList(path=path, sheets=infos)

    @srv.tool()
    @tool_errors
    async def sheet_read(path: str, sheet: str | None = None, offset: int = 0, limit: int = 100,
                         header: bool = True) -> SheetData:
        """Rows of a sheet. header: the first row names the columns. offset/limit page the data rows."""
        sheets, notes = await load_noted(sandbox, path)
        rows = pick(sheets, sheet, path)
        cut = notes.get(sheet if sheet is not None else next(iter(sheets), ""))
        width = _width(rows, path)
        head, body = (rows[0] if rows else [], rows[1:]) if header else ([], rows)
        lim = max(1, min(limit, MAX_ROWS))
        page = _pad(body[max(offset, 0): max(offset, 0) + lim], width)
        head, page, shortened = _fit(_pad([head], width)[0] if header else head, page)
        rest = len(body) - max(offset, 0) - len(page)
        parts = [f"the sheet was {cut}"] if cut else []
        if shortened:
            parts.append(f"the result is cut at about {MAX_RESULT_CHARS:,} characters (long cells shortened)")
        if rest > 0:
            parts.append(f"{rest} more rows; read with offset={max(offset, 0) + len(page)}")
        return SheetData(header=head, rows=page, total_rows=len(body), note="; ".join(parts) or None)

    @srv.tool()
    @tool_errors
    async def sheet_query(path: str, sheet: str | None = None, where: list[Condition] | None = None,
                          columns: list[str] | None = None, group_by: list[str] | None = None,
                          aggregate: dict[str, Literal["sum", "mean", "min", "max", "count"]] | None = None,
                          sort_by: list[str] | None = None, descending: bool = False,
                          limit: int = 100) -> SheetData:
        """Filter, group, aggregate and sort a sheet whose first row is the header."""
        sheets, notes = await load_noted(sandbox, path)
        rows = pick(sheets, sheet, path)
        cut = notes.get(sheet if sheet is not None else next(iter(sheets), ""))
        if not rows:
            return SheetData(header=[], rows=[], total_rows=0, note="the sheet is empty")
        # a row shorter than the header has empty cells at its end
        head, body = _pad([rows[0]], _width(rows, path))[0], rows[1:]
        for cond in where or []:
            i = _col(head, cond.column, path)
            body = [r for r in body if _test(_at(r, i), cond)]
        if group_by or aggregate:
            keys = [_col(head, g, path) for g in group_by or []]
            groups: dict[tuple, list[list[Cell]]] = {}
            for r in body:
                groups.setdefault(tuple(_at(r, k) for k in keys), []).append(r)
            out_head: list[Cell] = [head[k] for k in keys]
            agg = list((aggregate or {}).items())
            out_head += [f"{fn}({c})" for c, fn in agg]
            table = []
            for key, members in groups.items():
                row = list(key)
                for c, fn in agg:
                    i = _col(head, c, path)
                    row.append(_aggregate([_at(m, i) for m in members], fn))
                table.append(row)
            head, body = out_head, table
        elif columns:
            idx = [_col(head, c, path) for c in columns]
            head, body = [head[i] for i in idx], [[_at(r, i) for i in idx] for r in body]
        for column in reversed(sort_by or []):
            i = _col(head, column, path)
            body.sort(key=lambda r: (number(_at(r, i)) is None,
                                     number(_at(r, i)) if number(_at(r, i)) is not None else str(_at(r, i) or "")),
                      reverse=descending)
        total = len(body)
        lim = max(1, min(limit, MAX_ROWS))
        head, shown, shortened = _fit(head, _pad(body[:lim], len(head)))
        parts = [f"the sheet was {cut}; these rows come from what was read"] if cut else []
        if shortened:
            parts.append(f"the result is cut at about {MAX_RESULT_CHARS:,} characters (long cells shortened)")
        if total > len(shown):
            parts.append(f"showing {len(shown)} of {total} rows; raise limit (at most {MAX_ROWS}) or filter")
        return SheetData(header=head, rows=shown, total_rows=total, note="; ".join(parts) or None)

    @srv.tool()
    @tool_errors
    async def sheet_write(path: str, rows: list[list[Cell]], header: list[str] | None = None,
                          sheet: str | None = None) -> str:
        """Create or replace a CSV/TSV/XLSX file (for XLSX: the named sheet) with header + rows."""
        table: list[list[Cell]] = [list(header)] if header else []
        table += [list(r) for r in rows]
        await save(path, table, sheet)
        return f"wrote {len(rows)} rows{' and a header' if header else ''} to {path}" + (f" [{sheet}]" if sheet else "")

    @srv.tool()
    @tool_errors
    async def sheet_update(path: str, cell: str, value: Cell, sheet: str | None = None) -> str:
        """Set one cell, in A1 notation (A1 is the first cell of the header row)."""
        row, col = _cell_ref(cell)
        if row < 1 or row > MAX_SHEET_ROWS or col > MAX_SHEET_COLUMNS:
            raise ToolError(f"cell {cell!r} is outside a spreadsheet's {MAX_SHEET_ROWS:,} rows and "
                            f"{MAX_SHEET_COLUMNS:,} columns (A1 to XFD{MAX_SHEET_ROWS})")
        sheets, notes = await load_noted(sandbox, path)
        name = sheet or next(iter(sheets), "Sheet1")
        if name in notes:  # the sheet is written back whole: a part would lose the rest
            raise ToolError(f"{path}: cannot update the sheet {name!r}: it was {notes[name]}, and this tool "
                            "rewrites the whole sheet; edit it with exec (python) instead")
        rows = [list(r) for r in pick(sheets, sheet, path)] if sheets else []
        while len(rows) < row:
            rows.append([])
        while len(rows[row - 1]) < col:
            rows[row - 1].append(None)
        old = rows[row - 1][col - 1]
        rows[row - 1][col - 1] = value
        await save(path, rows, name if ext(path) in (".xlsx", ".xlsm") else None)
        return f"{path}{f' [{name}]' if ext(path) in ('.xlsx', '.xlsm') else ''} {cell.upper()}: {old!r} -> {value!r}"

    return srv
