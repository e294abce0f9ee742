"""photos/ must hold exactly the renamed files (plus the untouched ones) with their original bytes."""
import csv
import os
import sys

HIDDEN = os.environ.get("CLAWSDK_HIDDEN", os.path.dirname(os.path.abspath(__file__)))
with open(os.path.join(HIDDEN, "expected_rename_log.csv"), newline="") as f:
    renames = [(r["old_name"], r["new_name"]) for r in csv.DictReader(f)]
expected = {new: old for old, new in renames}
expected["screenshot.png"] = "screenshot.png"

if not os.path.isdir("photos"):
    print("photos/ is missing")
    sys.exit(1)
present = set(os.listdir("photos")) - {"rename_log.csv"}
problems = []
missing = sorted(set(expected) - present)
extra = sorted(present - set(expected))
if missing:
    problems.append("missing: %s" % ", ".join(missing))
if extra:
    problems.append("unexpected: %s" % ", ".join(extra))
for new, old in sorted(expected.items()):
    path = os.path.join("photos", new)
    if os.path.isfile(path):
        with open(path) as f:
            if f.read() != "placeholder image data for %s\n" % old:
                problems.append("%s does not hold the contents of %s" % (new, old))
if problems:
    print("\n".join(problems))
    sys.exit(1)
print("ok: %d files" % len(expected))
