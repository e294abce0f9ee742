"""Validate plan.json against courses.csv, the transcript and the advising rules."""
import csv
import json
import os
import sys

SEMESTERS = ["Fall 2024", "Spring 2025", "Fall 2025", "Spring 2026"]
COMPLETED = {"CS101", "MATH120"}

hidden = os.environ.get("CLAWSDK_HIDDEN", os.path.dirname(os.path.abspath(__file__)))
with open(os.path.join(hidden, "courses.csv"), newline="") as f:
    courses = {r["code"]: r for r in csv.DictReader(f)}
try:
    with open("plan.json", encoding="utf-8") as f:
        plan = json.load(f)
except (OSError, ValueError) as e:
    print("cannot read plan.json: %s" % e)
    sys.exit(1)
if not isinstance(plan, dict) or set(plan) != set(SEMESTERS) or not all(isinstance(v, list) for v in plan.values()):
    print("plan.json must map exactly %s to lists of course codes" % SEMESTERS)
    sys.exit(1)

problems = []
when = {}
for i, sem in enumerate(SEMESTERS):
    for code in plan[sem]:
        if code not in courses:
            problems.append("unknown course %r in %s" % (code, sem))
        elif code in when:
            problems.append("%s planned twice" % code)
        else:
            when[code] = i
required = set(courses) - COMPLETED
for code in sorted(required - set(when)):
    problems.append("%s is not planned" % code)
for code in sorted(COMPLETED & set(when)):
    problems.append("%s was already passed" % code)
for code, i in when.items():
    c = courses[code]
    term = SEMESTERS[i].split()[0]
    if c["offered"] != "Both" and c["offered"] != term:
        problems.append("%s is only offered in %s, planned %s" % (code, c["offered"], SEMESTERS[i]))
    for pre in filter(None, c["prerequisites"].split(";")):
        if pre not in COMPLETED and not (pre in when and when[pre] < i):
            problems.append("%s in %s needs %s in an earlier semester" % (code, SEMESTERS[i], pre))
for i, sem in enumerate(SEMESTERS):
    credits = sum(int(courses[c]["credits"]) for c, j in when.items() if j == i)
    if not 9 <= credits <= 12:
        problems.append("%s has %d credits (must be 9-12)" % (sem, credits))
if problems:
    print("\n".join(problems))
    sys.exit(1)
print("ok")
