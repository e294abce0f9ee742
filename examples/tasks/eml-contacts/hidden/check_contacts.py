"""Structural checks on contacts.json: a sorted list of unique, lower-case emails without the owner."""
import json
import sys

try:
    with open("contacts.json", encoding="utf-8") as f:
        contacts = json.load(f)
except (OSError, ValueError) as e:
    print("cannot read contacts.json: %s" % e)
    sys.exit(1)
if not isinstance(contacts, list) or not all(isinstance(c, dict) for c in contacts):
    print("contacts.json must be a list of objects")
    sys.exit(1)
emails = [c.get("email") for c in contacts]
problems = []
if any(set(c) != {"email", "name", "messages"} for c in contacts):
    problems.append("each contact needs exactly email, name, messages")
if any(not isinstance(e, str) or e != e.lower() for e in emails):
    problems.append("emails must be lower-case strings")
if len(set(emails)) != len(emails):
    problems.append("duplicate emails")
if "dana@northwind.test" in emails:
    problems.append("the owner's own address must be left out")
if emails != sorted(emails, key=str):
    problems.append("not sorted by email")
if problems:
    print("; ".join(problems))
    sys.exit(1)
print("ok: %d contacts" % len(contacts))
