"""The calendar skill: iCalendar files in the workspace."""

from __future__ import annotations

import datetime as dt
import secrets
from typing import TYPE_CHECKING, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel

from clawsdk.mcp.toolkit import tool_errors
from clawsdk_skills._common import pack_server
from clawsdk_skills.calendar import ics

if TYPE_CHECKING:
    from clawsdk.sandbox.base import Sandbox

MAX_EVENTS = 500


class EventOut(BaseModel):
    uid: str
    summary: str
    start: str
    end: str | None
    all_day: bool
    location: str | None = None
    description: str | None = None
    attendees: list[str] = []
    recurring: bool = False


class EventList(BaseModel):
    timezone: str
    events: list[EventOut]
    note: str | None = None


class Slot(BaseModel):
    start: str
    end: str


class FreeSlots(BaseModel):
    timezone: str
    slots: list[Slot]


def parse_when(value: str, tz: dt.tzinfo) -> dt.datetime | dt.date:
    """An ISO date (all day) or date-time; a time without an offset is in `tz`."""
    v = value.strip()
    try:
        if len(v) == 10:
            return dt.date.fromisoformat(v)
        t = dt.datetime.fromisoformat(v.replace("Z", "+00:00"))
    except ValueError as e:
        raise ToolError(f"{value!r} is not an ISO date (2024-05-02) or date-time (2024-05-02T14:30)") from e
    return t if t.tzinfo else t.replace(tzinfo=tz)


def _show(v: dt.datetime | dt.date | None, tz: dt.tzinfo) -> str | None:
    if v is None:
        return None
    if isinstance(v, dt.datetime):
        return v.astimezone(tz).replace(tzinfo=None).isoformat(timespec="minutes")
    return v.isoformat()


def _as_dt(v: dt.datetime | dt.date, tz: dt.tzinfo, end_of_day: bool = False) -> dt.datetime:
    if isinstance(v, dt.datetime):
        return v
    t = dt.datetime(v.year, v.month, v.day, tzinfo=tz)
    return t + dt.timedelta(days=1) if end_of_day else t


def server(sandbox: Sandbox, task: Any = None) -> MCPServer:
    srv = pack_server(__file__)

    async def load(path: str, timezone: str | None) -> tuple[list[ics.Event], dt.tzinfo, str]:
        text = (await sandbox.read_capped(path)).decode("utf-8", "replace")
        tz = ics.zone(timezone) if timezone else None
        events, props = ics.parse(text, tz)
        name = timezone or props.get("timezone") or "UTC"
        return events, tz or ics.zone(props.get("timezone")), name

    def expand(events: list[ics.Event], tz: dt.tzinfo, start: dt.datetime, end: dt.datetime):
        """(event, occurrence start, occurrence end or None) overlapping [start, end)."""
        for ev in events:
            if ev.end is not None:
                length: dt.timedelta | None = _as_dt(ev.end, tz) - _as_dt(ev.start, tz)
            elif ev.all_day:
                length = dt.timedelta(days=1)
            else:
                length = None
            for occ in ics.occurrences(ev, end):
                o_start = _as_dt(occ, tz)
                o_end = o_start + (length or dt.timedelta(0))
                if (o_end > start and o_start < end) or (not length and start <= o_start < end):
                    yield ev, occ, (occ + length if length is not None else None)

    @srv.tool()
    @tool_errors
    async def calendar_events(path: str, start: str | None = None, end: str | None = None,
                              query: str | None = None, timezone: str | None = None) -> EventList:
        """Events of an .ics file between start and end (ISO dates/date-times; recurring events expanded)."""
        events, tz, tzname = await load(path, timezone)
        lo = _as_dt(parse_when(start, tz), tz) if start else dt.datetime(1900, 1, 1, tzinfo=dt.UTC)
        hi = _as_dt(parse_when(end, tz), tz, end_of_day=len(end.strip()) == 10) if end else None
        if hi is None:
            if any(e.rrule and "COUNT" not in e.rrule and "UNTIL" not in e.rrule for e in events):
                hi = lo + dt.timedelta(days=366) if start else dt.datetime.now(dt.UTC) + dt.timedelta(days=366)
            else:
                hi = dt.datetime(9999, 1, 1, tzinfo=dt.UTC)
        out = []
        for ev, occ, occ_end in expand(events, tz, lo, hi):
            text = " ".join(filter(None, [ev.summary, ev.location, ev.description])).lower()
            if query and query.lower() not in text:
                continue
            out.append((ics._key(occ), EventOut(uid=ev.uid, summary=ev.summary, start=_show(occ, tz) or "",
                                                end=_show(occ_end, tz), all_day=ev.all_day, location=ev.location,
                                                description=ev.description, attendees=ev.attendees,
                                                recurring=ev.rrule is not None)))
        out.sort(key=lambda x: x[0])
        note = None
        if len(out) > MAX_EVENTS:
            note = f"showing the first {MAX_EVENTS} of {len(out)} events; narrow start/end"
        return EventList(timezone=tzname, events=[e for _, e in out[:MAX_EVENTS]], note=note)

    @srv.tool()
    @tool_errors
    async def calendar_add_event(path: str, summary: str, start: str, end: str | None = None,
                                 duration_minutes: int | None = None, location: str | None = None,
                                 description: str | None = None, attendees: list[str] | None = None,
                                 timezone: str | None = None, uid: str | None = None) -> EventOut:
        """Add an event to an .ics file (created if missing). start/end: ISO date (all day) or date-time."""
        try:
            text = (await sandbox.read_capped(path)).decode("utf-8", "replace")
        except FileNotFoundError:
            text = ics.EMPTY
        events, props = ics.parse(text)
        tzname = timezone or props.get("timezone") or "UTC"
        tz = ics.zone(tzname)
        s = parse_when(start, tz)
        if end:
            e = parse_when(end, tz)
        elif duration_minutes:
            if not isinstance(s, dt.datetime):
                raise ToolError("an all-day event takes an end date, not duration_minutes")
            e = s + dt.timedelta(minutes=duration_minutes)
        else:
            e = (s + dt.timedelta(days=1)) if not isinstance(s, dt.datetime) else s + dt.timedelta(hours=1)
        if isinstance(s, dt.datetime) != isinstance(e, dt.datetime):
            raise ToolError("start and end must both be dates (all day) or both date-times")
        if ics._key(e) < ics._key(s):
            raise ToolError(f"the event ends ({end}) before it starts ({start})")
        new_uid = uid or f"{secrets.token_hex(8)}@clawsdk"
        if any(ev.uid == new_uid for ev in events):
            raise ToolError(f"an event with UID {new_uid} already exists")
        lines = ics.event_lines(new_uid, summary, s, e, location, description, attendees,
                                dt.datetime.now(dt.UTC))
        body = text.replace("\r\n", "\n").rstrip("\n").split("\n")
        idx = max(i for i, line in enumerate(body) if line.strip().upper() == "END:VCALENDAR")
        body[idx:idx] = lines
        await sandbox.write(path, ("\r\n".join(ics.fold(x) if not x.startswith(" ") else x for x in body)
                                   + "\r\n").encode("utf-8"))
        return EventOut(uid=new_uid, summary=summary, start=_show(s, tz) or "", end=_show(e, tz),
                        all_day=not isinstance(s, dt.datetime), location=location, description=description,
                        attendees=attendees or [])

    @srv.tool()
    @tool_errors
    async def calendar_remove_event(path: str, uid: str) -> str:
        """Remove the event with this UID from an .ics file."""
        text = (await sandbox.read_capped(path)).decode("utf-8", "replace")
        lines = text.replace("\r\n", "\n").split("\n")
        out, block, found = [], None, 0
        for line in lines:
            u = line.strip().upper()
            if u == "BEGIN:VEVENT" and block is None:
                block = [line]
                continue
            if block is not None:
                block.append(line)
                if u == "END:VEVENT":
                    unfolded = ics.unfold("\n".join(block))
                    if any(ics._split(x)[0] == "UID" and ics._split(x)[2].strip() == uid for x in unfolded):
                        found += 1
                    else:
                        out.extend(block)
                    block = None
                continue
            out.append(line)
        if not found:
            raise ToolError(f"no event with UID {uid!r} in {path}")
        await sandbox.write(path, "\r\n".join(out).encode("utf-8"))
        return f"removed {found} event(s) with UID {uid} from {path}"

    @srv.tool()
    @tool_errors
    async def calendar_free_slots(paths: list[str], from_date: str, to_date: str, duration_minutes: int,
                                  day_start: str = "09:00", day_end: str = "17:00", weekends: bool = False,
                                  timezone: str | None = None, max_slots: int = 50) -> FreeSlots:
        """Slots of at least duration_minutes free in every calendar, within working hours, from_date..to_date."""
        if not paths:
            raise ToolError("give at least one calendar path")
        busy: list[tuple[dt.datetime, dt.datetime]] = []
        tz: dt.tzinfo | None = ics.zone(timezone) if timezone else None
        tzname = timezone
        d0 = dt.date.fromisoformat(from_date[:10])
        d1 = dt.date.fromisoformat(to_date[:10])
        for p in paths:
            events, etz, name = await load(p, timezone)
            if tz is None:
                tz, tzname = etz, name
            lo = dt.datetime(d0.year, d0.month, d0.day, tzinfo=tz)
            hi = dt.datetime(d1.year, d1.month, d1.day, tzinfo=tz) + dt.timedelta(days=1)
            for _ev, occ, occ_end in expand(events, tz, lo, hi):
                s = _as_dt(occ, tz)
                e = _as_dt(occ_end, tz) if occ_end is not None else s
                busy.append((s, e))
        assert tz is not None
        h0, h1 = dt.time.fromisoformat(day_start), dt.time.fromisoformat(day_end)
        need = dt.timedelta(minutes=duration_minutes)
        slots: list[Slot] = []
        day = d0
        while day <= d1 and len(slots) < max_slots:
            if weekends or day.weekday() < 5:
                cur = dt.datetime.combine(day, h0, tzinfo=tz)
                stop = dt.datetime.combine(day, h1, tzinfo=tz)
                for s, e in sorted(b for b in busy if b[1] > cur and b[0] < stop):
                    if s - cur >= need:
                        slots.append(Slot(start=_show(cur, tz) or "", end=_show(s, tz) or ""))
                    cur = max(cur, e)
                if stop - cur >= need:
                    slots.append(Slot(start=_show(cur, tz) or "", end=_show(stop, tz) or ""))
            day += dt.timedelta(days=1)
        return FreeSlots(timezone=tzname or "UTC", slots=slots[:max_slots])

    return srv
