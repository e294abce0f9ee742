#!/usr/bin/env bash
# Reference solution: parse the headers with the standard email package.
set -euo pipefail
python3 - <<'PY'
import email
import glob
import json
from email import policy
from email.utils import getaddresses

OWNER = "dana@northwind.test"
contacts = {}
for path in sorted(glob.glob("inbox/*.eml")):
    with open(path, "rb") as f:
        msg = email.message_from_binary_file(f, policy=policy.compat32)
    values = [str(v) for h in ("From", "To", "Cc") for v in msg.get_all(h, [])]
    seen = set()
    for name, addr in getaddresses(values):
        addr = addr.strip().lower()
        if not addr or addr == OWNER:
            continue
        c = contacts.setdefault(addr, {"email": addr, "name": None, "messages": 0})
        if c["name"] is None and name.strip():
            c["name"] = name.strip()
        if addr not in seen:
            seen.add(addr)
            c["messages"] += 1
with open("contacts.json", "w", encoding="utf-8") as f:
    json.dump([contacts[k] for k in sorted(contacts)], f, indent=2)
    f.write("\n")
PY
