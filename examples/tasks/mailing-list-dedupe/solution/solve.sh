#!/usr/bin/env bash
# Reference solution: dedupe with the csv module.
set -euo pipefail
python3 - <<'PY'
import csv

with open("subscribers.csv", newline="", encoding="utf-8") as f:
    rows = list(csv.DictReader(f))
unsub = {r["email"].strip().lower() for r in rows if r["status"].strip() == "unsubscribed"}
best = {}
kept_rows = 0
for r in rows:
    email = r["email"].strip().lower()
    if email in unsub:
        continue
    kept_rows += 1
    row = (email, r["name"].strip(), r["signup_date"].strip())
    if email not in best or row[2] < best[email][2]:
        best[email] = row
out = sorted(best.values(), key=lambda r: (r[2], r[0]))
with open("clean_subscribers.csv", "w", newline="", encoding="utf-8") as f:
    w = csv.writer(f, lineterminator="\n")
    w.writerow(["email", "name", "signup_date"])
    w.writerows(out)
with open("dedupe_report.txt", "w", encoding="utf-8") as f:
    f.write("duplicates removed: %d\n" % (kept_rows - len(best)))
    f.write("unsubscribed removed: %d\n" % len(unsub))
PY
