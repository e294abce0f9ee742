"""Internal consistency of report.json: categories add up to month totals, months to the grand total."""
import json
import sys

try:
    r = json.load(open("report.json", encoding="utf-8"))
    months = r["months"]
    problems = []
    for name, m in months.items():
        if abs(sum(m["by_category"].values()) - m["total"]) > 0.011:
            problems.append("%s: categories sum to %.2f, total says %.2f" % (name, sum(m["by_category"].values()), m["total"]))
    if abs(sum(m["total"] for m in months.values()) - r["grand_total"]) > 0.011:
        problems.append("months do not add up to grand_total")
    if abs(sum(r["category_totals"].values()) - r["grand_total"]) > 0.011:
        problems.append("category_totals do not add up to grand_total")
except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
    print("report.json is missing or malformed: %r" % e)
    sys.exit(1)
if problems:
    print("\n".join(problems))
    sys.exit(1)
print("ok")
