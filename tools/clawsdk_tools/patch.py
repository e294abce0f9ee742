"""The apply_patch format OpenClaw and Codex agents write, parsed and applied all-or-nothing.

    *** Begin Patch
    *** Add File: notes/todo.md
    +first line
    *** Update File: src/app.py
    *** Move to: src/main.py          (optional rename)
    @@ def main():                     (optional anchor: a line the hunk comes after)
     context line
    -old line
    +new line
    *** Delete File: old.txt
    *** End Patch
"""

from __future__ import annotations

from dataclasses import dataclass, field


class PatchError(ValueError):
    """A patch that cannot be parsed or does not apply; the message says where."""


@dataclass
class Hunk:
    anchor: str | None
    old: list[str] = field(default_factory=list)
    new: list[str] = field(default_factory=list)
    line_no: int = 0  # where the hunk starts in the patch, for messages


@dataclass
class FileOp:
    kind: str  # add | update | delete
    path: str
    move_to: str | None = None
    content: list[str] = field(default_factory=list)  # add
    hunks: list[Hunk] = field(default_factory=list)  # update


def parse_patch(text: str) -> list[FileOp]:
    lines = text.replace("\r\n", "\n").split("\n")
    while lines and lines[-1].strip() == "":
        lines.pop()
    while lines and lines[0].strip() == "":
        lines.pop(0)
    if not lines or lines[0].strip() != "*** Begin Patch":
        raise PatchError("a patch starts with the line '*** Begin Patch'")
    if lines[-1].strip() != "*** End Patch":
        raise PatchError("a patch ends with the line '*** End Patch'")
    ops: list[FileOp] = []
    i = 1
    end = len(lines) - 1
    while i < end:
        line = lines[i]
        if line.startswith("*** Add File: "):
            op = FileOp("add", line[len("*** Add File: "):].strip())
            i += 1
            while i < end and not lines[i].startswith("*** "):
                if not lines[i].startswith("+"):
                    raise PatchError(f"patch line {i + 1}: every line of an added file starts with '+'")
                op.content.append(lines[i][1:])
                i += 1
            ops.append(op)
        elif line.startswith("*** Delete File: "):
            ops.append(FileOp("delete", line[len("*** Delete File: "):].strip()))
            i += 1
        elif line.startswith("*** Update File: "):
            op = FileOp("update", line[len("*** Update File: "):].strip())
            i += 1
            if i < end and lines[i].startswith("*** Move to: "):
                op.move_to = lines[i][len("*** Move to: "):].strip()
                i += 1
            hunk: Hunk | None = None
            while i < end and not (lines[i].startswith("*** ") and not lines[i].startswith("*** End of File")):
                cur = lines[i]
                if cur.startswith("@@"):
                    hunk = Hunk(anchor=cur[2:].strip() or None, line_no=i + 1)
                    op.hunks.append(hunk)
                elif cur.startswith("*** End of File"):
                    pass
                else:
                    if hunk is None:
                        hunk = Hunk(anchor=None, line_no=i + 1)
                        op.hunks.append(hunk)
                    tag, body = (cur[:1], cur[1:]) if cur else (" ", "")
                    if tag == " ":
                        hunk.old.append(body)
                        hunk.new.append(body)
                    elif tag == "-":
                        hunk.old.append(body)
                    elif tag == "+":
                        hunk.new.append(body)
                    else:
                        raise PatchError(f"patch line {i + 1}: a hunk line starts with ' ', '-' or '+' "
                                         f"(got {cur[:20]!r})")
                i += 1
            if not op.hunks and op.move_to is None:
                raise PatchError(f"*** Update File: {op.path} has no hunks")
            ops.append(op)
        elif line.strip() == "":
            i += 1
        else:
            raise PatchError(f"patch line {i + 1}: expected '*** Add File:', '*** Update File:' or "
                             f"'*** Delete File:', got {line[:40]!r}")
    if not ops:
        raise PatchError("the patch changes no file")
    return ops


def _find(lines: list[str], block: list[str], start: int) -> int:
    """Index of `block` in `lines` at or after `start`: exact first, then ignoring trailing, then all spacing."""
    if not block:
        return start
    for norm in (lambda s: s, str.rstrip, str.strip):
        target = [norm(b) for b in block]
        for k in range(start, len(lines) - len(block) + 1):
            if all(norm(lines[k + j]) == target[j] for j in range(len(block))):
                return k
    return -1


def apply_hunks(text: str, hunks: list[Hunk], path: str) -> str:
    """Apply update hunks in order; PatchError names the hunk that does not match."""
    ends_nl = text.endswith("\n")
    lines = text.split("\n")
    if ends_nl:
        lines.pop()
    pos = 0
    for n, h in enumerate(hunks, 1):
        if h.anchor:
            a = _find(lines, [h.anchor], pos)
            if a < 0:
                raise PatchError(f"{path}: hunk {n} (patch line {h.line_no}): anchor line {h.anchor!r} not found")
            pos = a  # the hunk's lines come at or after its anchor
        k = _find(lines, h.old, pos)
        if k < 0:
            shown = "\n".join(h.old[:6])
            raise PatchError(f"{path}: hunk {n} (patch line {h.line_no}) does not match the file; the lines "
                             f"to replace were not found:\n{shown}")
        lines[k:k + len(h.old)] = h.new
        pos = k + len(h.new)
    out = "\n".join(lines)
    return out + "\n" if (ends_nl or not text) and lines else out
