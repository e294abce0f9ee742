"""summary.csv review counts must add up to the histogram total, and both to the unique verified reviews."""
import csv
import json
import sys

try:
    with open("summary.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    summary_total = sum(int(r["review_count"]) for r in rows)
    hist = json.load(open("rating_counts.json", encoding="utf-8"))
    hist_total = sum(hist.values())
except (OSError, ValueError, KeyError, TypeError) as e:
    print("cannot read the deliverables: %r" % e)
    sys.exit(1)
unique = {}
with open("data/reviews.jsonl", encoding="utf-8") as f:
    for line in f:
        if line.strip():
            r = json.loads(line)
            if r["verified_purchase"]:
                unique[r["review_id"]] = r
if not summary_total == hist_total == len(unique):
    print("summary counts %d, histogram %d, unique verified reviews %d" % (summary_total, hist_total, len(unique)))
    sys.exit(1)
print("ok: %d reviews" % len(unique))
