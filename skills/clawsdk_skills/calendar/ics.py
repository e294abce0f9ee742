"""A small iCalendar reader/writer: VEVENTs with time zones, all-day events and common RRULEs."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

DAYS = {"MO": 0, "TU": 1, "WE": 2, "TH": 3, "FR": 4, "SA": 5, "SU": 6}


class ICSError(ValueError):
    pass


@dataclass
class Event:
    uid: str
    summary: str
    start: dt.datetime | dt.date
    end: dt.datetime | dt.date | None
    location: str | None = None
    description: str | None = None
    attendees: list[str] = field(default_factory=list)
    rrule: dict[str, str] | None = None
    exdates: set = field(default_factory=set)
    lines: list[str] = field(default_factory=list)  # the raw VEVENT, for rewriting the file unchanged

    @property
    def all_day(self) -> bool:
        return not isinstance(self.start, dt.datetime)


def unfold(text: str) -> list[str]:
    out: list[str] = []
    for line in text.replace("\r\n", "\n").split("\n"):
        if line[:1] in (" ", "\t") and out:
            out[-1] += line[1:]
        else:
            out.append(line)
    return out


def unescape(v: str) -> str:
    return re.sub(r"\\([\\;,nN])", lambda m: "\n" if m.group(1) in "nN" else m.group(1), v)


def escape(v: str) -> str:
    return v.replace("\\", "\\\\").replace(";", "\\;").replace(",", "\\,").replace("\n", "\\n")


def _split(line: str) -> tuple[str, dict[str, str], str]:
    head, _, value = line.partition(":")
    name, *params = head.split(";")
    return name.upper(), {k.upper(): v.strip('"') for k, _, v in (p.partition("=") for p in params)}, value


def zone(name: str | None) -> dt.tzinfo:
    if not name:
        return dt.UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as e:
        raise ICSError(f"unknown time zone {name!r} (use an IANA name such as Europe/Berlin)") from e


def parse_value(value: str, params: dict[str, str], tz: dt.tzinfo) -> dt.datetime | dt.date:
    """A DATE or DATE-TIME as a date or an aware datetime (floating times take `tz`)."""
    v = value.strip()
    if params.get("VALUE") == "DATE" or re.fullmatch(r"\d{8}", v):
        return dt.datetime.strptime(v[:8], "%Y%m%d").date()
    m = re.fullmatch(r"(\d{8}T\d{4,6})(Z?)", v)
    if not m:
        raise ICSError(f"cannot read the date-time {value!r}")
    fmt = "%Y%m%dT%H%M%S" if len(m.group(1)) == 15 else "%Y%m%dT%H%M"
    naive = dt.datetime.strptime(m.group(1), fmt)
    if m.group(2):
        return naive.replace(tzinfo=dt.UTC)
    return naive.replace(tzinfo=zone(params["TZID"]) if "TZID" in params else tz)


def parse(text: str, default_tz: dt.tzinfo | None = None) -> tuple[list[Event], dict[str, str]]:
    """(events, calendar properties) of an ICS text."""
    lines = unfold(text)
    if not any(line.strip().upper() == "BEGIN:VCALENDAR" for line in lines):
        raise ICSError("not an iCalendar file (no BEGIN:VCALENDAR)")
    props: dict[str, str] = {}
    for line in lines:
        name, _, value = _split(line)
        if name == "X-WR-TIMEZONE":
            props["timezone"] = value.strip()
    tz = default_tz or zone(props.get("timezone"))
    events: list[Event] = []
    cur: list[str] | None = None
    depth = 0
    for line in lines:
        u = line.strip().upper()
        if u == "BEGIN:VEVENT":
            cur, depth = [line], 0
            continue
        if cur is None:
            continue
        cur.append(line)
        if u.startswith("BEGIN:"):
            depth += 1
        elif u == "END:VEVENT" and depth == 0:
            events.append(_event(cur, tz))
            cur = None
        elif u.startswith("END:"):
            depth -= 1
    return events, props


def _event(lines: list[str], tz: dt.tzinfo) -> Event:
    fields: dict[str, tuple[dict[str, str], str]] = {}
    attendees: list[str] = []
    exdates: set = set()
    depth = 0
    for line in lines[1:-1]:
        u = line.strip().upper()
        if u.startswith("BEGIN:"):
            depth += 1
        elif u.startswith("END:"):
            depth -= 1
        if depth or u.startswith("END:"):
            continue  # VALARM and friends
        name, params, value = _split(line)
        if name == "ATTENDEE":
            attendees.append(re.sub(r"(?i)^mailto:", "", value.strip()))
        elif name == "EXDATE":
            for v in value.split(","):
                exdates.add(parse_value(v, params, tz))
        else:
            fields.setdefault(name, (params, value))
    if "DTSTART" not in fields:
        raise ICSError(f"event {fields.get('UID', ({}, '?'))[1]!r} has no DTSTART")
    start = parse_value(fields["DTSTART"][1], fields["DTSTART"][0], tz)
    end = parse_value(fields["DTEND"][1], fields["DTEND"][0], tz) if "DTEND" in fields else None
    if end is None and "DURATION" in fields:
        end = start + parse_duration(fields["DURATION"][1])
    rrule = None
    if "RRULE" in fields:
        rrule = {k.upper(): v for k, _, v in (p.partition("=") for p in fields["RRULE"][1].split(";"))}
    return Event(uid=fields.get("UID", ({}, ""))[1].strip(), summary=unescape(fields.get("SUMMARY", ({}, ""))[1]),
                 start=start, end=end, location=unescape(fields["LOCATION"][1]) if "LOCATION" in fields else None,
                 description=unescape(fields["DESCRIPTION"][1]) if "DESCRIPTION" in fields else None,
                 attendees=attendees, rrule=rrule, exdates=exdates, lines=lines)


def parse_duration(v: str) -> dt.timedelta:
    m = re.fullmatch(r"([+-])?P(?:(\d+)W)?(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)S)?)?", v.strip())
    if not m:
        raise ICSError(f"cannot read the duration {v!r}")
    sign = -1 if m.group(1) == "-" else 1
    w, d, h, mi, s = (int(x or 0) for x in m.groups()[1:])
    return sign * dt.timedelta(weeks=w, days=d, hours=h, minutes=mi, seconds=s)


class _Overflow(Exception):
    """A recurrence step past the last (or before the first) date Python can hold: nothing comes after it."""


def _add_months(d: dt.datetime | dt.date, months: int):
    y, m = divmod(d.month - 1 + months, 12)
    if not dt.MINYEAR <= d.year + y <= dt.MAXYEAR:
        raise _Overflow
    try:
        return d.replace(year=d.year + y, month=m + 1)
    except ValueError:
        return None  # e.g. the 31st in a shorter month: RFC 5545 skips it


def occurrences(ev: Event, until: dt.datetime | dt.date):
    """Start times of `ev` up to `until` (inclusive of starts before it). The expansion ends at `until`, at the
    rule's UNTIL or COUNT, or past year 9999, whichever comes first: a step may give no date (the 29th of
    February in a common year), so a COUNT alone need not end it (FREQ=YEARLY;COUNT=1999 from a 29th of
    February passes year 9999 first)."""
    if not ev.rrule:
        yield ev.start
        return
    r = ev.rrule
    freq = r.get("FREQ", "").upper()
    interval = int(r.get("INTERVAL", "1") or 1)
    if interval < 1:
        raise ICSError(f"event {ev.uid!r}: RRULE INTERVAL={interval} is not a positive whole number")
    count = int(r["COUNT"]) if "COUNT" in r else None
    rule_until = None
    if "UNTIL" in r:
        tz = ev.start.tzinfo if isinstance(ev.start, dt.datetime) else None
        rule_until = parse_value(r["UNTIL"], {}, tz or dt.UTC)
    bydays = [DAYS[d[-2:]] for d in r.get("BYDAY", "").split(",") if d[-2:] in DAYS]
    n = 0
    emitted = 0
    while True:
        try:
            if freq == "DAILY":
                cands = [ev.start + dt.timedelta(days=n * interval)]
            elif freq == "WEEKLY":
                week0 = ev.start - dt.timedelta(days=ev.start.weekday())
                base = week0 + dt.timedelta(weeks=n * interval)
                cands = sorted(base + dt.timedelta(days=d) for d in (bydays or [ev.start.weekday()]))
                cands = [c for c in cands if c >= ev.start]
            elif freq == "MONTHLY":
                c = _add_months(ev.start, n * interval)
                cands = [c] if c else []
            elif freq == "YEARLY":
                c = _add_months(ev.start, 12 * n * interval)
                cands = [c] if c else []
            else:
                yield ev.start
                return
        except (_Overflow, OverflowError):
            return  # past year 9999: no later date exists
        for c in cands:
            if _after(c, until) or (rule_until is not None and _after(c, rule_until)):
                return
            if count is not None and emitted >= count:
                return
            emitted += 1
            if c not in ev.exdates:
                yield c
        n += 1


def _after(a, b) -> bool:
    return _key(a) > _key(b)


def _key(v: dt.datetime | dt.date) -> dt.datetime:
    if isinstance(v, dt.datetime):
        return v if v.tzinfo else v.replace(tzinfo=dt.UTC)
    return dt.datetime(v.year, v.month, v.day, tzinfo=dt.UTC)


def fmt_value(v: dt.datetime | dt.date) -> tuple[str, str]:
    """(params, value) for writing DTSTART/DTEND."""
    if not isinstance(v, dt.datetime):
        return ";VALUE=DATE", v.strftime("%Y%m%d")
    if v.tzinfo is None:
        return "", v.strftime("%Y%m%dT%H%M%S")
    if v.utcoffset() == dt.timedelta(0) and str(v.tzinfo) in ("UTC", "UTC+00:00"):
        return "", v.strftime("%Y%m%dT%H%M%SZ")
    key = getattr(v.tzinfo, "key", None)
    if key:
        return f";TZID={key}", v.strftime("%Y%m%dT%H%M%S")
    return "", v.astimezone(dt.UTC).strftime("%Y%m%dT%H%M%SZ")


def fold(line: str) -> str:
    out, cur = [], line
    while len(cur.encode("utf-8")) > 75:
        cut = 75
        while len(cur[:cut].encode("utf-8")) > 75:
            cut -= 1
        out.append(cur[:cut])
        cur = " " + cur[cut:]
    out.append(cur)
    return "\r\n".join(out)


def event_lines(uid: str, summary: str, start, end, location, description, attendees, stamp: dt.datetime) -> list[str]:
    sp, sv = fmt_value(start)
    lines = ["BEGIN:VEVENT", f"UID:{uid}", f"DTSTAMP:{stamp.strftime('%Y%m%dT%H%M%SZ')}", f"DTSTART{sp}:{sv}"]
    if end is not None:
        ep, ev = fmt_value(end)
        lines.append(f"DTEND{ep}:{ev}")
    lines.append(f"SUMMARY:{escape(summary)}")
    if location:
        lines.append(f"LOCATION:{escape(location)}")
    if description:
        lines.append(f"DESCRIPTION:{escape(description)}")
    for a in attendees or []:
        lines.append(f"ATTENDEE:mailto:{a}")
    lines.append("END:VEVENT")
    return lines


EMPTY = "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//clawsdk//calendar skill//EN\r\nEND:VCALENDAR\r\n"
