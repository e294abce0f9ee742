#!/usr/bin/env bash
# Reference solution: aggregate in cents to avoid float drift.
set -euo pipefail
python3 - <<'PY'
import csv
import json
from collections import defaultdict
from decimal import Decimal

months = defaultdict(lambda: defaultdict(Decimal))
cats = defaultdict(Decimal)
largest = None
with open("expenses.csv", newline="", encoding="utf-8") as f:
    for row in csv.DictReader(f):
        amount = Decimal(row["amount"].replace(",", ""))
        month = row["date"][:7]
        months[month][row["category"]] += amount
        cats[row["category"]] += amount
        if largest is None or amount > largest[2]:
            largest = (row["date"], row["description"], amount)

def money(d):
    return float(d.quantize(Decimal("0.01")))

report = {
    "months": {m: {"total": money(sum(c.values())), "by_category": {k: money(v) for k, v in sorted(c.items())}}
               for m, c in sorted(months.items())},
    "category_totals": {k: money(v) for k, v in sorted(cats.items())},
    "grand_total": money(sum(cats.values())),
    "largest_expense": {"date": largest[0], "description": largest[1], "amount": money(largest[2])},
}
with open("report.json", "w", encoding="utf-8") as f:
    json.dump(report, f, indent=2)
    f.write("\n")
PY
