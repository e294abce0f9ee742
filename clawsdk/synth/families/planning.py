"""Planning & knowledge: project schedules from dependencies, meeting slots from calendars."""

from __future__ import annotations

import csv
import io

from clawsdk.synth.families import pools
from clawsdk.synth.families.base import Family, Spec, dump_json, json_check, ls, read, write

STEPS = ("Gather requirements", "Design schema", "Set up CI", "Write API", "Build UI", "Write docs",
         "Load test", "Security review", "Migrate data", "Train support", "Beta release", "Collect feedback",
         "Fix beta bugs", "Launch", "Retrospective", "Plan sprint", "Order hardware", "Install racks",
         "Configure network", "Hire contractor")


class ProjectSchedule(Family):
    name = "project-schedule"
    category = "planning & knowledge"
    subcategory = "project planning"
    summary = "compute earliest start/finish days and the critical path from task dependencies"

    def _plan(self, rng, level):
        n = (4, 7, 10)[level - 1] + rng.randint(0, 2)
        names = rng.sample(STEPS, k=n)
        tasks = []
        for i, name in enumerate(names):
            deps = sorted(rng.sample(range(i), k=min(i, rng.randint(0, 2 if level > 1 else 1))))
            tasks.append({"id": f"T{i + 1}", "name": name, "duration": rng.randint(1, 9),
                          "deps": [f"T{d + 1}" for d in deps]})
        start, finish = {}, {}
        for t in tasks:  # listed in a topological order
            start[t["id"]] = max((finish[d] for d in t["deps"]), default=0)
            finish[t["id"]] = start[t["id"]] + t["duration"]
        total = max(finish.values())
        # the critical path: from a task finishing last, back through a dependency finishing at our start
        by_id = {t["id"]: t for t in tasks}
        ends = [i for i in finish if finish[i] == total]
        path, unique = [], len(ends) == 1
        cur = ends[0]
        while True:
            path.append(cur)
            before = [d for d in by_id[cur]["deps"] if finish[d] == start[cur]]
            if not before:
                unique = unique and start[cur] == 0
                break
            unique = unique and len(before) == 1
            cur = before[0]
        return tasks, start, finish, total, path[::-1], unique

    def build(self, rng, level, template="default"):
        while True:
            tasks, start, finish, total, path, unique = self._plan(rng, level)
            if level < 3 or unique:
                break
        shuffled = list(tasks)
        if level >= 2:
            rng.shuffle(shuffled)
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["id", "name", "duration_days", "depends_on"])
        for t in shuffled:
            w.writerow([t["id"], t["name"], t["duration"], ";".join(t["deps"])])
        expected = {"tasks": {t["id"]: {"start": start[t["id"]], "finish": finish[t["id"]]} for t in tasks},
                    "total_days": total}
        extra = ""
        if level == 3:
            expected["critical_path"] = path
            extra = ('\n  "critical_path" - the ids of the chain of tasks that determines total_days, '
                     "in order from the first to the last")
        instruction = f"""
plan.csv lists the tasks of our project: an id, a name, a duration in working days and the ids
of the tasks it depends on (separated by ";"). A task starts as soon as everything it depends on
has finished; the project starts on day 0 and tasks run in parallel whenever they can.
Write schedule.json with:
  "tasks"      - {{id: {{"start": day, "finish": day}}}} for every task (finish = start + duration)
  "total_days" - the day the last task finishes{extra}
"""
        solution = [read("plan.csv"), write("schedule.json", dump_json(expected))]
        return Spec(instruction, {"plan.csv": buf.getvalue()}, json_check("schedule.json", "expected.json"),
                    solution, hidden={"expected.json": dump_json(expected)}, tags=["scheduling", "dependencies"])


DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri")


def hhmm(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


class MeetingSlot(Family):
    name = "meeting-slot"
    category = "planning & knowledge"
    subcategory = "calendar"
    summary = "find the earliest common free slot in several calendars"

    def build(self, rng, level, template="default"):
        attendees = [f for f, _ in pools.people(rng, (2, 3, 5)[level - 1])]
        days = DAYS[: (1, 3, 5)[level - 1]]
        length = rng.choice((30, 45, 60, 90))
        day_start, day_end = 9 * 60, 17 * 60
        while True:
            busy = {a: {d: [] for d in days} for a in attendees}
            for i, a in enumerate(attendees):
                for d in days:
                    t = day_start
                    while True:
                        # the first attendee's days start busy: the first slot of the day was the answer to a
                        # third of the one-day tasks, a guess that passed without reading a calendar
                        t += 0 if i == 0 and t == day_start else rng.choice((0, 15, 30, 60, 90))
                        dur = rng.choice((30, 45, 60, 90, 120))
                        if t + dur > day_end:
                            break
                        busy[a][d].append((t, t + dur))
                        t += dur
            found = None
            for d in days:
                for s in range(day_start, day_end - length + 1, 15):
                    if all(not (s < b and a_ < s + length) for a in attendees for a_, b in busy[a][d]):
                        found = (d, s)
                        break
                if found:
                    break
            if found:
                break
        files = {}
        for a in attendees:
            lines = [f"# {a} - busy times (all free time is between 09:00 and 17:00)"]
            for d in days:
                slots = ", ".join(f"{hhmm(x)}-{hhmm(y)}" for x, y in busy[a][d]) or "free all day"
                lines.append(f"{d}: {slots}")
            files[f"calendars/{a.lower()}.txt"] = "\n".join(lines) + "\n"
        expected = {"day": found[0], "start": hhmm(found[1]), "end": hhmm(found[1] + length)}
        span = "on Monday" if len(days) == 1 else f"between {days[0]} and {days[-1]}"
        instruction = f"""
I need a {length}-minute meeting with {", ".join(attendees)} {span}. Their busy times are in
calendars/ (one file per person). Find the earliest slot where everyone is free, between
09:00 and 17:00, starting on a quarter hour (:00, :15, :30 or :45). A meeting may start the
minute another one ends. Write slot.json as {{"day": "{days[0]}", "start": "HH:MM", "end": "HH:MM"}}
(24-hour times; day is one of {", ".join(days)}).
"""
        solution = [ls("calendars"), *[read(p) for p in sorted(files)], write("slot.json", dump_json(expected))]
        return Spec(instruction, files, json_check("slot.json", "expected.json"), solution,
                    hidden={"expected.json": dump_json(expected)}, tags=["calendar", "constraints"])


FAMILIES = (ProjectSchedule(), MeetingSlot())
