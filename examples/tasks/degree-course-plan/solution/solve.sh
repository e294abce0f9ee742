#!/usr/bin/env bash
# Reference solution: a small backtracking search over semesters.
set -euo pipefail
python3 - <<'PY'
import csv
import json
import re

SEMESTERS = ["Fall 2024", "Spring 2025", "Fall 2025", "Spring 2026"]
with open("courses.csv", newline="") as f:
    courses = {r["code"]: r for r in csv.DictReader(f)}
with open("transcript.txt") as f:
    done = {m for m in re.findall(r"\b([A-Z]+\d{3})\b", f.read()) if m in courses}
todo = sorted(c for c in courses if c not in done)
credits = {c: int(courses[c]["credits"]) for c in courses}
prereqs = {c: [p for p in courses[c]["prerequisites"].split(";") if p] for c in courses}


def allowed(code, i, when):
    term = SEMESTERS[i].split()[0]
    if courses[code]["offered"] not in ("Both", term):
        return False
    return all(p in done or (p in when and when[p] < i) for p in prereqs[code])


def search(when):
    load = [sum(credits[c] for c, j in when.items() if j == i) for i in range(4)]
    if len(when) == len(todo):
        return when if all(9 <= x <= 12 for x in load) else None
    # place courses whose prerequisites are already placed, in code order
    code = next(c for c in todo if c not in when and all(p in done or p in when for p in prereqs[c]))
    for i in range(4):
        if load[i] + credits[code] <= 12 and allowed(code, i, when):
            found = search(dict(when, **{code: i}))
            if found:
                return found
    return None


when = search({})
plan = {s: sorted(c for c, j in when.items() if j == i) for i, s in enumerate(SEMESTERS)}
with open("plan.json", "w") as f:
    json.dump(plan, f, indent=2)
    f.write("\n")
print(json.dumps(plan))
PY
