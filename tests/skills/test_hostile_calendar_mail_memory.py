"""Hostile workspace files against the tool servers that run in the runner's process.

The calendar, mail and memory tools parse the agent's files on the event loop every rollout shares: an .ics
whose recurrence never reached its COUNT looped forever (the runner needed SIGKILL), and mail_list and
memory_search read every file whole, so 150 sparse 16 MiB .eml files (no disk used) put 2.4 GB in the
runner's memory. Each call now returns: an answer, or a tool error naming the cap.
"""

from __future__ import annotations

import time

import anyio
import pytest

import clawsdk_skills
from clawsdk_tools.core import memory_server
from tests.tools.conftest import connected, task_with, text

MIB = 2**20

LEAP_DAY = ("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nBEGIN:VEVENT\r\nUID:x\r\nSUMMARY:leap\r\n"
            "DTSTART;VALUE=DATE:20240229\r\nRRULE:FREQ=YEARLY;{rule}\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n")


def sparse(sb, path: str, size: int, head: bytes = b"") -> None:
    """A file of `size` bytes in the workspace that takes no room past `head` (a hole)."""
    p = sb.workspace / path
    p.parent.mkdir(parents=True, exist_ok=True)
    with open(p, "wb") as f:
        f.write(head)
        f.truncate(size)


def count_reads(sb) -> list[int]:
    """The sizes of what the tools read through the sandbox from now on."""
    seen: list[int] = []
    read_capped, read = sb.read_capped, sb.read

    async def counted_capped(path, max_bytes=None):
        data = await read_capped(path, max_bytes)
        seen.append(len(data))
        return data

    async def counted(path):
        data = await read(path)
        seen.append(len(data))
        return data

    sb.read_capped, sb.read = counted_capped, counted
    return seen


@pytest.mark.timeout(20, method="signal")  # the loop is synchronous: only a signal stops a regression
def test_a_leap_day_rule_that_never_reaches_its_count_ends():
    """FREQ=YEARLY;COUNT=1999 from 2024-02-29 has 1,9xx leap days before year 9999: expansion stops there."""
    async def main():
        files = {"cal.ics": LEAP_DAY.format(rule="COUNT=1999"), "back.ics": LEAP_DAY.format(rule="INTERVAL=-1")}
        async with connected(clawsdk_skills.factory("calendar"), task_with(files)) as (c, _):
            t = time.monotonic()
            r = await c.call_tool("calendar_events", {"path": "cal.ics"})
            assert time.monotonic() - t < 10
            assert not r.is_error, text(r)
            starts = [e["start"] for e in r.structured_content["events"]]
            assert starts[:3] == ["2024-02-29", "2028-02-29", "2032-02-29"], starts[:3]
            assert "2100-02-29" not in starts  # not a leap year: skipped, not an error
            r = await c.call_tool("calendar_events", {"path": "cal.ics", "start": "9990-01-01"})
            assert [e["start"] for e in r.structured_content["events"]] == ["9992-02-29", "9996-02-29"], text(r)
            r = await c.call_tool("calendar_events", {"path": "back.ics", "end": "2030-01-01"})
            assert r.is_error and "INTERVAL=-1 is not a positive whole number" in text(r), text(r)

    anyio.run(main)


def test_mail_list_refuses_a_mailbox_over_its_budget_without_reading_it():
    """20 sparse 16 MiB messages (320 MiB, no disk used): refused by their sizes, nothing read."""
    from clawsdk_skills.mail import server

    cap = f"{getattr(server, 'MAX_MAILBOX_BYTES', 64 * MIB) // MIB} MiB"
    ok = "From: a@b.test\nTo: me@example.com\nSubject: hi\nDate: Tue, 07 May 2024 09:00:00 +0000\n\nhello\n"

    async def main():
        async with connected(clawsdk_skills.factory("mail"), task_with({"mail/inbox/001.eml": ok})) as (c, sb):
            for i in range(20):
                sparse(sb, f"mail/inbox/big{i:02}.eml", 16 * MIB)
            seen = count_reads(sb)
            t = time.monotonic()
            for tool, args in (("mail_list", {"folder": "inbox", "limit": 1}), ("mail_search", {"query": "hi"})):
                r = await c.call_tool(tool, args)
                assert r.is_error and f"over the {cap} {tool} reads in one call" in text(r), text(r)
                assert "21 messages of 320.0 MiB" in text(r) and "mail_read" in text(r), text(r)
            assert sum(seen) == 0, f"read {sum(seen) / MIB:.0f} MiB of a mailbox it refused"
            assert time.monotonic() - t < 5
            for i in range(20):
                (sb.workspace / f"mail/inbox/big{i:02}.eml").unlink()
            sparse(sb, "mail/inbox/002.eml", 2 * MIB, b"From: c@d.test\nSubject: padded\n\nbody\n")
            r = await c.call_tool("mail_list", {"folder": "inbox"})  # under the budget: listed as before
            assert not r.is_error, text(r)
            assert [m["subject"] for m in r.structured_content["messages"]] == ["padded", "hi"], text(r)
            r = await c.call_tool("mail_search", {"sender": "a@b.test"})
            assert [m["id"] for m in r.structured_content["messages"]] == ["inbox/001.eml"], text(r)

    anyio.run(main)


def test_memory_search_refuses_memory_files_over_its_budget_without_reading_them():
    """Memory files of text then a hole (what decode_text takes for text), 64 MiB together: refused."""
    from clawsdk_tools import memory

    cap = f"{getattr(memory, 'MAX_SEARCH_BYTES', 32 * MIB) // MIB} MiB"

    async def main():
        async with connected(memory_server, task_with({"MEMORY.md": "# Notes\nThe Atlas vendor.\n"})) as (c, sb):
            for i in range(4):
                sparse(sb, f"memory/day{i}.md", 16 * MIB, b"Atlas notes\n" * 1000)
            seen = count_reads(sb)
            r = await c.call_tool("memory_search", {"query": "Atlas"})
            assert r.is_error and f"over the {cap} memory_search reads in one call" \
                in text(r), text(r)
            assert "the 5 memory files" in text(r) and "64.0 MiB" in text(r), text(r)
            assert sum(seen) == 0, f"read {sum(seen) / MIB:.0f} MiB of memory files it refused"
            for i in range(4):
                (sb.workspace / f"memory/day{i}.md").unlink()
            r = await c.call_tool("memory_search", {"query": "Atlas"})
            assert not r.is_error and r.structured_content["results"][0]["path"] == "MEMORY.md", text(r)

    anyio.run(main)
