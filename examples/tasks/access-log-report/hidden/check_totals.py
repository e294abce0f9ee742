"""Cross-check report.json against the log independently of the exact expected file."""
import json
import re
import sys

LINE = re.compile(r'^\S+ \S+ \S+ \[[^\]]+\] "[^"]*" (\d{3}) (\d+|-) ')
try:
    report = json.load(open("report.json", encoding="utf-8"))
except (OSError, ValueError) as e:
    print("cannot read report.json: %s" % e)
    sys.exit(1)
statuses = [m.group(1) for m in map(LINE.match, open("logs/access.log", encoding="utf-8")) if m]
counts = report.get("status_counts", {})
if sum(counts.values()) != report.get("total_requests"):
    print("status_counts sum to %s but total_requests is %s" % (sum(counts.values()), report.get("total_requests")))
    sys.exit(1)
if report.get("total_requests") != len(statuses):
    print("total_requests is %s, the log has %d entries" % (report.get("total_requests"), len(statuses)))
    sys.exit(1)
print("ok")
