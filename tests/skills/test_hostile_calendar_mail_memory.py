"""Hostile workspace files against the calendar, mail and memory tools.

An .ics whose recurrence never reached its COUNT looped forever: a recurrence now ends past year 9999, where no
later date exists (correctness, checked in-process). mail_list, mail_search and memory_search read every file
they list whole: 150 sparse 16 MiB .eml files (no disk used) once put 2.4 GB in the runner's memory. They run
behind the sandbox's boundary now, so instead of a per-call byte budget of their own, what they read is bounded
by the tool host's memory limit: past it the agent reads that the tool ran out of memory, and the next call
works (tests/skills/boundary.py, a real tool session).
"""

from __future__ import annotations

import time

import anyio
import clawsdk_skills
import pytest

from tests.skills.boundary import behind_boundary, boundary_task, stopped_at_its_limit, timed
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


STANDUP = ("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nBEGIN:VEVENT\r\nUID:standup\r\nSUMMARY:standup\r\n"
           "DTSTART:20150105T090000Z\r\nDTEND:20150105T091500Z\r\nRRULE:FREQ=DAILY\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n")


def test_a_daily_series_that_began_years_ago_still_occurs_today():
    """A recurrence is expanded as far as the asked range, however many occurrences came before it (a cap of
    2,000 a rule once ended a daily series in mid-2020, and its later days were shown free)."""
    async def main():
        async with connected(clawsdk_skills.factory("calendar"), task_with({"c.ics": STANDUP})) as (c, _):
            r = await c.call_tool("calendar_events", {"path": "c.ics", "start": "2024-05-06", "end": "2024-05-07"})
            assert [e["start"] for e in r.structured_content["events"]] == ["2024-05-06T09:00", "2024-05-07T09:00"]
            r = await c.call_tool("calendar_free_slots", {"paths": ["c.ics"], "from_date": "2024-05-06",
                                                          "to_date": "2024-05-06", "duration_minutes": 30})
            assert r.structured_content["slots"] == [{"start": "2024-05-06T09:15", "end": "2024-05-06T17:00"}]

    anyio.run(main)


OK_MAIL = "From: a@b.test\nTo: me@example.com\nSubject: hi\nDate: Tue, 07 May 2024 09:00:00 +0000\n\nhello\n"
PADDED = b"From: c@d.test\nSubject: padded\nDate: Wed, 08 May 2024 09:00:00 +0000\n\nbody\n"


def test_a_mailbox_is_read_whole_and_one_past_the_tools_memory_is_its_tool_error():
    """5 messages of 16 MiB (80 MiB, over the 64 MiB a call the skill once allowed) are listed and searched;
    40 of them (640 MiB, sparse: no disk used) are past a 512 MiB tool memory limit: the agent reads that the
    tool ran out of memory, and once they are gone the mailbox answers again."""
    task = boundary_task(["mail"], {"mail/inbox/001.eml": OK_MAIL}, tool_memory_mb=512, tool_timeout_s=20)

    async def main():
        async with behind_boundary(task) as (session, sb):
            for i in range(5):
                sparse(sb, f"mail/inbox/big{i:02}.eml", 16 * MIB, PADDED)
            r = await session.call("mail_list", {"folder": "inbox", "limit": 2})
            assert not r.is_error, r.text[:300]
            assert r.structured["total"] == 6 and [m["id"] for m in r.structured["messages"]] == \
                ["inbox/001.eml", "inbox/big00.eml"], r.text[:300]
            r = await session.call("mail_search", {"sender": "a@b.test"})
            assert [m["id"] for m in r.structured["messages"]] == ["inbox/001.eml"], r.text[:300]
            for i in range(5, 40):
                sparse(sb, f"mail/inbox/big{i:02}.eml", 16 * MIB, PADDED)
            for tool, args in (("mail_list", {"folder": "inbox", "limit": 1}), ("mail_search", {"query": "hi"})):
                r, took = await timed(session, tool, args)
                assert stopped_at_its_limit(r, took, task, tool) == "memory"
            for i in range(40):
                (sb.workspace / f"mail/inbox/big{i:02}.eml").unlink()
            r = await session.call("mail_list", {"folder": "inbox"})
            assert not r.is_error and [m["subject"] for m in r.structured["messages"]] == ["hi"], r.text[:300]

    anyio.run(main)


def test_memory_files_are_searched_whole_and_past_the_tools_memory_it_says_so():
    """Memory files of text then a hole (what decode_text takes for text): 64 MiB of them (over the 32 MiB a
    call memory_search once allowed) are searched; 640 MiB are past a 256 MiB tool memory limit."""
    task = boundary_task(["memory"], {"MEMORY.md": "# Notes\nThe Atlas vendor.\n"}, tool_memory_mb=256,
                         tool_timeout_s=20)

    async def main():
        async with behind_boundary(task) as (session, sb):
            for i in range(4):
                sparse(sb, f"memory/day{i}.md", 16 * MIB, b"Atlas notes\n" * 1000)
            r = await session.call("memory_search", {"query": "vendor"})
            assert not r.is_error, r.text[:300]
            assert r.structured["searched_files"] == 5
            assert [h["path"] for h in r.structured["results"]] == ["MEMORY.md"], r.text[:300]
            for i in range(4, 40):
                sparse(sb, f"memory/day{i}.md", 16 * MIB, b"Atlas notes\n" * 1000)
            r, took = await timed(session, "memory_search", {"query": "Atlas"})
            assert stopped_at_its_limit(r, took, task, "memory_search") == "memory"
            for i in range(40):
                (sb.workspace / f"memory/day{i}.md").unlink()
            r = await session.call("memory_search", {"query": "Atlas"})
            assert not r.is_error and r.structured["results"][0]["path"] == "MEMORY.md", r.text[:300]

    anyio.run(main)
