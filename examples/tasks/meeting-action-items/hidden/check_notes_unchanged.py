"""Fail if any meeting note was edited, deleted, or added."""
import hashlib
import os
import sys

EXPECTED = {
    "2024-03-04-standup.md": "790678ae1db8ef439624c1dcc48b80455598746fe2d08835844e726da2f08cda",
    "2024-03-06-planning.md": "1e89ec364d5d304b706ab3e70e1ef91032bc56eb600208dd088b843a47d42719",
    "2024-03-08-retro.md": "d4107d4d42488556d33b4ac5d5a4ce1a89ccc188440ed8caa50feee769294b77",
}

notes = "notes"
found = sorted(n for n in os.listdir(notes) if n.endswith(".md")) if os.path.isdir(notes) else []
if found != sorted(EXPECTED):
    print("notes/ holds %s, expected %s" % (found, sorted(EXPECTED)))
    sys.exit(1)
for name, digest in EXPECTED.items():
    with open(os.path.join(notes, name), "rb") as f:
        data = f.read().replace(b"\r\n", b"\n")
    if hashlib.sha256(data).hexdigest() != digest:
        print("notes/%s was modified" % name)
        sys.exit(1)
print("notes unchanged")
