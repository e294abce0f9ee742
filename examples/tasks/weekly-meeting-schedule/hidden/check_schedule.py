"""Validate schedule.json against the rules in meetings.md.

Without arguments: exit 0 when the file is well-formed (all six meetings, valid day
and start), 1 otherwise. With --score: always exit 0 and print, as the last line, the
share of meetings that break no rule touching them (0.0 when the file is not well-formed).
"""
import json
import re
import sys

DAYS = ["Mon", "Tue", "Wed", "Thu", "Fri"]
MEETINGS = {
    "Sprint kickoff": (1, ["Ana", "Ben", "Chloe", "Dev"]),
    "Design review": (2, ["Ana", "Chloe", "Dev"]),
    "Client demo": (1, ["Ana", "Ben"]),
    "Ana/Dev 1:1": (1, ["Ana", "Dev"]),
    "Hiring sync": (1, ["Ben", "Chloe", "Dev"]),
    "Retro": (1, ["Ana", "Ben", "Chloe", "Dev"]),
}
# hours (start of each hour) when a person can NOT meet, per day
BUSY = {
    "Ana": {"Mon": range(9, 17), "Wed": range(9, 12)},
    "Ben": {"Tue": range(9, 17), "Fri": range(12, 17)},
    "Chloe": {"Mon": range(13, 15), "Wed": range(14, 17), "Thu": range(9, 11)},
    "Dev": {"Tue": range(9, 17), "Thu": range(13, 17)},
}
score_mode = "--score" in sys.argv


def finish(ok, msg, score=None):
    print(msg)
    if score_mode:
        print("%.4f" % (score if score is not None else 0.0))
        sys.exit(0)
    sys.exit(0 if ok else 1)


try:
    with open("schedule.json", encoding="utf-8") as f:
        sched = json.load(f)
except (OSError, ValueError) as e:
    finish(False, "cannot read schedule.json: %s" % e)
if not isinstance(sched, dict) or set(sched) != set(MEETINGS):
    finish(False, "schedule.json must have exactly these keys: %s" % sorted(MEETINGS))
slots = {}
for name, v in sched.items():
    if not isinstance(v, dict) or v.get("day") not in DAYS or not isinstance(v.get("start"), str) \
            or not re.fullmatch(r"\d\d:00", v["start"]):
        finish(False, "%s: need {\"day\": Mon..Fri, \"start\": \"HH:00\"}, got %r" % (name, v))
    start = int(v["start"][:2])
    slots[name] = (DAYS.index(v["day"]), start, start + MEETINGS[name][0])
if not score_mode:
    finish(True, "well-formed")

# A meeting counts when every rule that touches it holds: a schedule written without reading the calendars
# satisfied 93% of the individual rule checks (most of them hold by chance), and scored 0.95 without passing.
wrong = {}  # meeting -> the first rule it breaks


def rule(label, ok, *meetings):
    if not ok:
        for name in meetings:
            wrong.setdefault(name, label)


names = list(slots)
for name, (day, start, end) in slots.items():
    hours = range(start, end)
    rule("%s inside core hours, not at lunch" % name, start >= 9 and end <= 17 and 12 not in hours, name)
    for person in MEETINGS[name][1]:
        busy = BUSY[person].get(DAYS[day], ())
        rule("%s: %s available" % (name, person), not any(h in busy for h in hours), name)
for i, a in enumerate(names):
    for b in names[i + 1:]:
        shared = set(MEETINGS[a][1]) & set(MEETINGS[b][1])
        da, sa, ea = slots[a]
        db, sb, eb = slots[b]
        if shared:
            rule("%s / %s do not overlap" % (a, b), da != db or ea <= sb or eb <= sa, a, b)


def t(name, which):
    day, start, end = slots[name]
    return day * 24 + (start if which == "start" else end)


rule("kickoff first", all(t("Sprint kickoff", "end") <= t(n, "start") for n in names if n != "Sprint kickoff"),
     "Sprint kickoff")
rule("retro last", all(t("Retro", "start") >= t(n, "end") for n in names if n != "Retro"), "Retro")
rule("design review not on kickoff day", slots["Design review"][0] != slots["Sprint kickoff"][0], "Design review")
rule("client demo Thu/Fri morning", slots["Client demo"][0] in (3, 4) and slots["Client demo"][2] <= 12,
     "Client demo")
rule("1:1 not on design review day", slots["Ana/Dev 1:1"][0] != slots["Design review"][0], "Ana/Dev 1:1")
for person in BUSY:
    for day in range(5):
        theirs = [n for n, (d, s, e) in slots.items() if d == day and person in MEETINGS[n][1]]
        total = sum(slots[n][2] - slots[n][1] for n in theirs)
        rule("%s at most 3h on %s" % (person, DAYS[day]), total <= 3, *theirs)

score = 1 - len(wrong) / len(MEETINGS)
finish(not wrong, "violations: %s" % ("; ".join("%s (%s)" % kv for kv in sorted(wrong.items())) or "none"), score)
