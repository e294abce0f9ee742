#!/usr/bin/env bash
# Reference solution: plan all new names first, then rename and log.
set -euo pipefail
python3 - <<'PY'
import csv
import os
from datetime import datetime

with open("manifest.csv", newline="", encoding="utf-8") as f:
    rows = list(csv.DictReader(f))
taken = set(os.listdir("photos"))
plan = []
for row in rows:
    old = row["filename"]
    stamp = datetime.strptime(row["taken_at"], "%Y-%m-%d %H:%M:%S").strftime("%Y-%m-%d_%H%M%S")
    ext = os.path.splitext(old)[1].lower()
    new, n = stamp + ext, 1
    while new in {p for _, p in plan}:
        n += 1
        new = "%s-%d%s" % (stamp, n, ext)
    plan.append((old, new))
for old, new in plan:
    assert new not in taken, new
    os.rename(os.path.join("photos", old), os.path.join("photos", new))
with open("photos/rename_log.csv", "w", newline="", encoding="utf-8") as f:
    w = csv.writer(f, lineterminator="\n")
    w.writerow(["old_name", "new_name"])
    w.writerows(plan)
PY
