"""CHANGELOG.md must equal the expected file, ignoring blank lines and trailing spaces."""
import difflib
import os
import sys


def lines(path):
    with open(path, encoding="utf-8") as f:
        return [line.rstrip() for line in f if line.strip()]


hidden = os.environ["CLAWSDK_HIDDEN"]
try:
    got = lines("CHANGELOG.md")
except OSError:
    print("CHANGELOG.md is missing")
    sys.exit(1)
want = lines(os.path.join(hidden, "expected_CHANGELOG.md"))
if got != want:
    print("\n".join(list(difflib.unified_diff(want, got, "expected", "CHANGELOG.md", lineterm=""))[:40]))
    sys.exit(1)
print("ok")
