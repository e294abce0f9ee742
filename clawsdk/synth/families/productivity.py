"""Productivity & collaboration: mail, meeting notes."""

from __future__ import annotations

import csv
import datetime as dt
import io

from clawsdk.synth.families import pools
from clawsdk.synth.families.base import Family, Spec, csv_check, dump_json, json_check, ls, read, write


class MailContacts(Family):
    name = "mail-contacts"
    category = "productivity & collaboration"
    subcategory = "email"
    summary = "extract an address book from .eml files into JSON"

    def build(self, rng, level, template="default"):
        n_people = (4, 7, 10)[level - 1] + rng.randint(0, 2)
        n_msgs = (3, 5, 8)[level - 1] + rng.randint(0, 2)
        domain = rng.choice(pools.DOMAINS)
        owner_first, owner_last = pools.person(rng)
        owner = f"{owner_first.lower()}@{domain}"
        folks = []
        for first, last in pools.people(rng, n_people):
            dom = rng.choice(pools.DOMAINS)
            style = rng.choice(("first.last", "flast", "first"))
            local = {"first.last": f"{first}.{last}", "flast": f"{first[0]}{last}", "first": first}[style]
            # some people never give a name
            named = rng.random() > 0.2
            email = f"{local}@{dom}".lower()
            while email in {f["email"] for f in folks} or email == owner:
                email = f"{local}{rng.randint(2, 99)}@{dom}".lower()
            folks.append({"email": email,
                          "name": (f"{last}, {first}" if level == 3 and rng.random() < 0.4 else f"{first} {last}")
                          if named else None})
        subjects = [f"{rng.choice(pools.VERBS)} {rng.choice(pools.OBJECTS)}" for _ in range(n_msgs)]
        counts: dict[str, int] = {}
        names: dict[str, str | None] = {}
        files = {}
        day = dt.date(2024, rng.randint(1, 12), rng.randint(1, 28))

        def render(p, named_here: bool) -> str:
            addr = p["email"]
            if level == 3 and rng.random() < 0.3:
                local, _, dom = addr.partition("@")
                addr = f"{local.capitalize()}@{dom.upper()}"
            if p["name"] and named_here:
                return f'"{p["name"]}" <{addr}>' if "," in p["name"] else f'{p["name"]} <{addr}>'
            return addr

        for i in range(n_msgs):
            sender_is_owner = rng.random() < 0.35
            pick = rng.sample(folks, k=min(len(folks), rng.randint(1, 3) + (level > 1) * rng.randint(0, 2)))
            if sender_is_owner:
                frm, to, cc = None, pick[:max(1, len(pick) - 1)], pick[max(1, len(pick) - 1):]
            else:
                frm, to, cc = pick[0], [None, *pick[1:2]], pick[2:]
            headers = []
            mentioned = []

            def addrs(ps, mentioned):
                out = []
                for p in ps:
                    if p is None:
                        out.append(f"{owner_first} {owner_last} <{owner}>")
                        continue
                    named_here = rng.random() < 0.7
                    out.append(render(p, named_here))
                    mentioned.append(p)
                    if named_here and p["name"] and names.get(p["email"]) is None:
                        names[p["email"]] = p["name"]
                    names.setdefault(p["email"], None)
                return out

            headers.append("From: " + (addrs([frm], mentioned)[0] if frm else f"{owner_first} {owner_last} <{owner}>"))
            to_list = addrs(to, mentioned)
            if level == 3 and len(to_list) > 1:
                headers.append("To: " + ",\n    ".join(to_list))
            else:
                headers.append("To: " + ", ".join(to_list))
            if cc:
                headers.append("Cc: " + ", ".join(addrs(cc, mentioned)))
            for e in {p["email"] for p in mentioned}:
                counts[e] = counts.get(e, 0) + 1
            when = day + dt.timedelta(days=i)
            headers += [f"Subject: {subjects[i].capitalize()}", f"Date: {when.isoformat()} 09:{i:02d}:00 +0000"]
            body = f"Hi all,\n\nQuick note about {subjects[i]}. Let me know if anything is missing.\n\nThanks\n"
            files[f"inbox/{i + 1:03d}-{subjects[i].split()[0]}.eml"] = "\n".join(headers) + "\n\n" + body
        expected = [{"email": e, "name": names.get(e), "messages": counts[e]} for e in sorted(counts)]
        instruction = f"""
I saved some emails from my mail client into inbox/ as .eml files. Please build an address
book from them: write contacts.json listing everyone who appears in the From, To or Cc
headers of any message, except me ({owner}).

contacts.json must be a JSON array sorted by email address, one object per person:
  "email"    - the address in lower case (addresses are case-insensitive)
  "name"     - the person's display name as written in the headers, or null if no
               message ever gives one
  "messages" - how many .eml files mention the address in From, To or Cc
"""
        if level == 3:
            instruction += "Careful: some display names contain commas and some headers continue on the next line.\n"
        solution = [ls("inbox"), *[read(p) for p in sorted(files)], write("contacts.json", dump_json(expected))]
        return Spec(instruction, files, json_check("contacts.json", "expected.json"), solution,
                    hidden={"expected.json": dump_json(expected)}, tags=["email", "json"])


class MeetingActions(Family):
    name = "meeting-actions"
    category = "productivity & collaboration"
    subcategory = "meeting notes"
    summary = "collect the open action items of meeting notes into a CSV"

    def build(self, rng, level, template="default"):
        n_notes = level
        team = pools.people(rng, 3 + level)
        handles = [f.lower() for f, _ in team]
        start = dt.date(2024, rng.randint(1, 11), rng.randint(1, 20))
        rows = []
        files = {}
        for n in range(n_notes):
            date = start + dt.timedelta(days=7 * n)
            path = f"notes/{date.isoformat()}-{rng.choice(pools.WORDS)}.md"
            lines = [f"# Team sync {date.isoformat()}", "", f"Attendees: {', '.join(f for f, _ in team)}", "",
                     "## Discussion", ""]
            for _ in range(rng.randint(2, 4)):
                lines.append(f"- {rng.choice(pools.FIRST)} raised {rng.choice(pools.OBJECTS)}; "
                             f"agreed to revisit {rng.choice(pools.TOPICS)} later.")
            lines += ["", "## Action items", ""]
            used: set[str] = set()
            for _ in range(rng.randint(2, 3 + level)):
                who = rng.choice(handles)
                what = f"{rng.choice(pools.VERBS).capitalize()} {rng.choice(pools.OBJECTS)}"
                if what in used:
                    continue
                used.add(what)
                due = date + dt.timedelta(days=rng.randint(1, 14))
                has_due = level < 3 or rng.random() < 0.75
                done = level >= 2 and rng.random() < 0.3
                box = "x" if done else " "
                tail = f" (due {due.isoformat()})" if has_due else ""
                lines.append(f"- [{box}] @{who}: {what}{tail}")
                if not done:
                    rows.append([who, what, due.isoformat() if has_due else "", path])
            files[path] = "\n".join(lines) + "\n"
        rows.sort(key=lambda r: (r[2] == "", r[2], r[0], r[1]))
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["owner", "task", "due", "source"])
        w.writerows(rows)
        instruction = """
The notes of our recent team syncs are in notes/. Collect every action item that is still
open (unchecked "- [ ]" box) into actions.csv with the header row

  owner,task,due,source

owner is the handle after @ (without the @), task is the text after the colon, due is the
YYYY-MM-DD date in "(due ...)" without the brackets, source is the note's path (e.g. notes/x.md).
Sort the rows by due date (earliest first), then owner, then task.
"""
        if level == 3:
            instruction += "Items without a due date get an empty due field and go after all dated items.\n"
        checks = csv_check("actions.csv", "expected.csv")
        solution = [ls("notes"), *[read(p) for p in sorted(files)], write("actions.csv", buf.getvalue())]
        return Spec(instruction, files, checks, solution, hidden={"expected.csv": buf.getvalue()},
                    tags=["markdown", "csv"])


FAMILIES = (MailContacts(), MeetingActions())
