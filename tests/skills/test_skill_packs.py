"""Each shipped skill pack doing its job through a real in-process MCP client on a local sandbox."""

from __future__ import annotations

import email
import io
import json
import zipfile
from pathlib import Path

import anyio
import clawsdk_skills
import pytest
import yaml

from clawsdk.tasks.model import File
from tests.tools.conftest import connected, task_with, text


def pack(name):
    return clawsdk_skills.factory(name)


def minimal_pdf(lines: list[str]) -> bytes:
    stream = "BT /F1 12 Tf 72 720 Td " + " ".join(f"({line}) Tj 0 -16 Td" for line in lines) + " ET"
    objs = ["<< /Type /Catalog /Pages 2 0 R >>", "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
            "/Resources << /Font << /F1 5 0 R >> >> >>",
            f"<< /Length {len(stream)} >>\nstream\n{stream}\nendstream",
            "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    out, offsets = b"%PDF-1.4\n", []
    for i, body in enumerate(objs, 1):
        offsets.append(len(out))
        out += f"{i} 0 obj\n{body}\nendobj\n".encode()
    xref = len(out)
    out += f"xref\n0 {len(objs) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    out += f"trailer\n<< /Size {len(objs) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return out


SALES = "region,rep,amount\nNorth,Ann,120\nSouth,Bob,80\nNorth,Cid,30.5\nEast,Dee,200\nSouth,Eve,1,000\n"


def test_spreadsheets_query_group_write_csv_and_xlsx():
    async def main():
        csv_text = "region,rep,amount\nNorth,Ann,120\nSouth,Bob,80\nNorth,Cid,30.5\nEast,Dee,200\n"
        async with connected(pack("spreadsheets"), task_with({"sales.csv": csv_text})) as (c, sb):
            r = await c.call_tool("sheet_query", {"path": "sales.csv", "group_by": ["region"],
                                                  "aggregate": {"amount": "sum"}, "sort_by": ["sum(amount)"],
                                                  "descending": True})
            assert r.structured_content["header"] == ["region", "sum(amount)"]
            assert r.structured_content["rows"] == [["East", 200], ["North", 150.5], ["South", 80]]
            r = await c.call_tool("sheet_query", {"path": "sales.csv", "where": [
                {"column": "amount", "op": ">", "value": 50}], "columns": ["rep"]})
            assert r.structured_content["rows"] == [["Ann"], ["Bob"], ["Dee"]]
            r = await c.call_tool("sheet_write", {"path": "out/top.xlsx", "header": ["rep", "amount"],
                                                  "rows": [["Dee", 200], ["Ann", 120]], "sheet": "Top"})
            assert not r.is_error, text(r)
            import openpyxl

            wb = openpyxl.load_workbook(sb.workspace / "out/top.xlsx")
            assert wb.sheetnames == ["Top"] and wb["Top"]["A2"].value == "Dee" and wb["Top"]["B2"].value == 200
            r = await c.call_tool("sheet_update", {"path": "out/top.xlsx", "cell": "B3", "value": 121,
                                                   "sheet": "Top"})
            assert "B3: 120 -> 121" in text(r)
            r = await c.call_tool("sheet_read", {"path": "out/top.xlsx", "sheet": "Top"})
            assert r.structured_content["rows"] == [["Dee", 200], ["Ann", 121]]
            r = await c.call_tool("sheet_read", {"path": "out/top.xlsx", "sheet": "Nope"})
            assert r.is_error and "sheets: Top" in text(r)
            r = await c.call_tool("sheet_query", {"path": "sales.csv", "columns": ["price"]})
            assert r.is_error and "columns: region, rep, amount" in text(r)

    anyio.run(main)


def test_documents_read_docx_and_pdf_search_and_write_docx():
    from clawsdk_skills.documents.server import markdown_to_docx

    async def main():
        docx = markdown_to_docx("# Contract\nThe term is 12 months.\n## Fees\n- Setup: 500 EUR\n- Monthly: 90 EUR\n")
        task = task_with({"notes.md": "# Notes\nNothing about fees here.\n"})
        task = task.model_copy(update={"workspace": [*task.workspace, File.from_bytes("contract.docx", docx),
                                                     File.from_bytes("invoice.pdf", minimal_pdf(
                                                         ["Invoice 2024-17", "Total due: 590 EUR"]))]})
        async with connected(pack("documents"), task) as (c, sb):
            r = await c.call_tool("doc_read", {"path": "contract.docx"})
            assert text(r).splitlines() == ["# Contract", "The term is 12 months.", "## Fees", "- Setup: 500 EUR",
                                            "- Monthly: 90 EUR"]
            r = await c.call_tool("doc_outline", {"path": "contract.docx"})
            assert [(h["level"], h["text"]) for h in r.structured_content["headings"]] == [(1, "Contract"),
                                                                                          (2, "Fees")]
            r = await c.call_tool("doc_read", {"path": "invoice.pdf"})
            assert "--- page 1 ---" in text(r) and "Total due: 590 EUR" in text(r)
            r = await c.call_tool("doc_search", {"pattern": r"\bEUR\b"})
            found = {line.split(":")[0] for line in text(r).splitlines()}
            assert found == {"contract.docx", "invoice.pdf"}
            r = await c.call_tool("doc_write", {"path": "summary.docx", "markdown": "# Summary\n- fees: 590 EUR\n"})
            with zipfile.ZipFile(io.BytesIO((sb.workspace / "summary.docx").read_bytes())) as z:
                assert "fees: 590 EUR" in z.read("word/document.xml").decode()
            r = await c.call_tool("doc_write", {"path": "x.pdf", "markdown": "x"})
            assert r.is_error and "cannot write PDF" in text(r)

    anyio.run(main)


ICS = """BEGIN:VCALENDAR
VERSION:2.0
X-WR-TIMEZONE:Europe/Berlin
BEGIN:VEVENT
UID:standup@test
DTSTART;TZID=Europe/Berlin:20240506T093000
DTEND;TZID=Europe/Berlin:20240506T094500
RRULE:FREQ=WEEKLY;BYDAY=MO,WE,FR;COUNT=5
EXDATE;TZID=Europe/Berlin:20240508T093000
SUMMARY:Stand-up
END:VEVENT
BEGIN:VEVENT
UID:lunch@test
DTSTART:20240507T100000Z
DTEND:20240507T110000Z
SUMMARY:Lunch with\\, Ana
LOCATION:Cafe
END:VEVENT
END:VCALENDAR
"""


def test_calendar_expands_recurrences_adds_removes_and_finds_free_slots():
    async def main():
        async with connected(pack("calendar"), task_with({"team.ics": ICS})) as (c, sb):
            r = await c.call_tool("calendar_events", {"path": "team.ics", "start": "2024-05-06", "end": "2024-05-12"})
            ev = r.structured_content["events"]
            assert r.structured_content["timezone"] == "Europe/Berlin"
            assert [(e["summary"], e["start"]) for e in ev] == [
                ("Stand-up", "2024-05-06T09:30"), ("Lunch with, Ana", "2024-05-07T12:00"),
                ("Stand-up", "2024-05-10T09:30")]
            r = await c.call_tool("calendar_add_event", {"path": "team.ics", "summary": "Review; Q2",
                                                         "start": "2024-05-07T14:00", "duration_minutes": 90,
                                                         "attendees": ["ana@x.test"]})
            uid = r.structured_content["uid"]
            r = await c.call_tool("calendar_free_slots", {"paths": ["team.ics"], "from_date": "2024-05-07",
                                                          "to_date": "2024-05-07", "duration_minutes": 60})
            assert [(s["start"], s["end"]) for s in r.structured_content["slots"]] == [
                ("2024-05-07T09:00", "2024-05-07T12:00"), ("2024-05-07T13:00", "2024-05-07T14:00"),
                ("2024-05-07T15:30", "2024-05-07T17:00")]
            r = await c.call_tool("calendar_remove_event", {"path": "team.ics", "uid": uid})
            assert not r.is_error
            r = await c.call_tool("calendar_events", {"path": "team.ics", "query": "review"})
            assert r.structured_content["events"] == []
            r = await c.call_tool("calendar_add_event", {"path": "new.ics", "summary": "Holiday",
                                                         "start": "2024-08-01", "end": "2024-08-03"})
            assert r.structured_content["all_day"] and (sb.workspace / "new.ics").read_text().count("BEGIN:VEVENT") == 1

    anyio.run(main)


EML = """From: "Ng, Alice" <alice@corp.test>
To: me@example.com
Subject: Budget Q3
Date: Tue, 07 May 2024 09:00:00 +0000
Message-ID: <q3@corp.test>

Can you send the Q3 budget by Friday?
"""


def test_mail_lists_searches_drafts_replies_and_sends_to_the_outbox():
    async def main():
        files = {"mail/inbox/001.eml": EML,
                 "mail/inbox/002.eml": EML.replace("Budget Q3", "Lunch").replace("<q3@", "<l@")
                 .replace("Q3 budget", "lunch plan").replace("07 May", "08 May"),
                 "mail/sent/old.eml": "From: me@example.com\nTo: a@b.test\nSubject: Old\nContent-Type: text/html\n\n"
                                      "<p>Hi &amp; bye</p><script>track()</script>\n"}
        async with connected(pack("mail"), task_with(files)) as (c, sb):
            r = await c.call_tool("mail_list", {})
            assert [m["subject"] for m in r.structured_content["messages"]] == ["Budget Q3", "Lunch"]
            r = await c.call_tool("mail_search", {"query": "budget", "since": "2024-05-07", "until": "2024-05-07"})
            assert [m["id"] for m in r.structured_content["messages"]] == ["inbox/001.eml"]
            r = await c.call_tool("mail_draft", {"to": ["alice@corp.test"], "body": "Attached.",
                                                 "in_reply_to": "inbox/001.eml"})
            draft = r.structured_content["id"]
            assert draft.startswith("drafts/") and r.structured_content["subject"] == "Re: Budget Q3"
            r = await c.call_tool("mail_send", {"draft_id": draft})
            sent = r.structured_content["id"]
            assert sent.startswith("outbox/") and not (sb.workspace / "mail" / draft).exists()
            msg = email.message_from_bytes((sb.workspace / "mail" / sent).read_bytes())
            assert msg["In-Reply-To"] == "<q3@corp.test>" and msg["Date"]
            r = await c.call_tool("mail_read", {"id": "sent/old.eml"})
            assert r.structured_content["body"] == "Hi & bye"
            r = await c.call_tool("mail_read", {"id": "../secret.eml"})
            assert r.is_error
            r = await c.call_tool("mail_draft", {"to": ["not-an-address"], "body": "x"})
            assert r.is_error and "not an e-mail address" in text(r)

    anyio.run(main)


def test_git_commits_logs_and_diffs_in_the_sandbox():
    async def main():
        async with connected(pack("git"), task_with({"app/main.py": "print(1)\n"})) as (c, sb):
            assert not (await c.call_tool("git_init", {"repo": "app"})).is_error
            await c.call_tool("git_add", {"repo": "app", "paths": ["."]})
            r = await c.call_tool("git_commit", {"repo": "app", "message": "feat: first"})
            assert not r.is_error, text(r)
            (sb.workspace / "app/main.py").write_text("print(2)\n")
            r = await c.call_tool("git_diff", {"repo": "app"})
            assert "-print(1)" in text(r) and "+print(2)" in text(r)
            await c.call_tool("git_commit", {"repo": "app", "message": "fix: two", "all": True})
            r = await c.call_tool("git_log", {"repo": "app"})
            assert [x["subject"] for x in r.structured_content["commits"]] == ["fix: two", "feat: first"]
            assert r.structured_content["commits"][0]["author"] == "clawsdk agent <agent@clawsdk.invalid>"
            r = await c.call_tool("git_show", {"repo": "app", "ref": "HEAD~1", "path": "main.py"})
            assert text(r) == "print(1)\n"
            r = await c.call_tool("git_checkout", {"repo": "app", "ref": "--orphan=x"})
            assert r.is_error and "not a git revision" in text(r)
            r = await c.call_tool("git_status", {"repo": "../"})
            assert r.is_error

    anyio.run(main)


def test_data_queries_filters_edits_and_converts():
    doc = {"orders": [{"id": 1, "status": "open", "total": 10}, {"id": 2, "status": "done", "total": 25},
                      {"id": 3, "status": "open", "total": 40}], "meta": {"owner": "ops"}}

    async def main():
        async with connected(pack("data"), task_with({"orders.json": json.dumps(doc)})) as (c, sb):
            r = await c.call_tool("data_get", {"path": "orders.json", "query": '$.orders[?status == "open"].id'})
            assert [(m["path"], m["value"]) for m in r.structured_content["matches"]] == [
                ("$.orders[0].id", 1), ("$.orders[2].id", 3)]
            r = await c.call_tool("data_set", {"path": "orders.json", "query": "orders[?total >= 25].status",
                                               "value": "archived"})
            assert "set 2 value(s)" in text(r)
            await c.call_tool("data_set", {"path": "orders.json", "query": "meta.reviewed.by", "value": "me"})
            await c.call_tool("data_delete", {"path": "orders.json", "query": "orders[*].total"})
            saved = json.loads((sb.workspace / "orders.json").read_text())
            assert saved["orders"] == [{"id": 1, "status": "open"}, {"id": 2, "status": "archived"},
                                       {"id": 3, "status": "archived"}]
            assert saved["meta"] == {"owner": "ops", "reviewed": {"by": "me"}}
            await c.call_tool("data_convert", {"src": "orders.json", "dest": "orders.yaml"})
            assert yaml.safe_load((sb.workspace / "orders.yaml").read_text()) == saved
            r = await c.call_tool("data_get", {"path": "orders.json", "query": "orders[?"})
            assert r.is_error and "cannot read the query" in text(r)

    anyio.run(main)


@pytest.mark.parametrize("name", clawsdk_skills.PACKS)
def test_every_shipped_skill_passes_the_conformance_kit(name):
    from clawsdk.testing.skills import assert_skill_conforms

    report = assert_skill_conforms(pack(name))
    assert report.name == name and len(report.tools) >= 4
    assert any("stays in the workspace" in f.check for f in report.findings)


def test_the_core_tool_servers_pass_the_kit_too():
    from clawsdk_tools.core import core_server, memory_server, web_server

    from clawsdk.testing.skills import assert_skill_conforms

    for factory in (core_server, web_server, memory_server):
        assert_skill_conforms(factory, require_skill_md=False)


def test_the_kit_catches_a_skill_that_escapes_crashes_or_lacks_a_description(tmp_path):
    from mcp.server.mcpserver import MCPServer

    from clawsdk.testing.skills import check_skill

    (tmp_path / "SKILL.md").write_text("---\nname: leaky\ndescription: A bad skill.\n---\nDo things.\n")

    def leaky(sandbox, task=None):
        server = MCPServer("leaky", instructions="A bad skill.")

        @server.tool()
        async def cat(path: str) -> str:
            """Read a file the wrong way: straight from the host, relative to the workspace."""
            return (Path(sandbox.workspace) / path).read_text()  # follows .., symlinks, absolute paths

        @server.tool()
        async def boom(n: int) -> str:
            return str(1 // (n - n))

        return server

    report = anyio.run(lambda: check_skill(leaky, skill_md=tmp_path / "SKILL.md"))
    failed = {f.check for f in report.failures}
    assert not report.ok
    assert "cat: path='link_out/secret.txt' stays in the workspace" in failed
    assert "boom: description" in failed and "boom: plain call does not crash" in failed
    # a closure: the tool host inside the sandbox could not import it, so its tools could not run there
    assert "runs behind the sandbox's boundary" in failed
    bad_md = tmp_path / "bad"
    bad_md.mkdir()
    (bad_md / "SKILL.md").write_text("---\nname: Bad Name\n---\nx\n")
    report = anyio.run(lambda: check_skill(leaky, skill_md=bad_md / "SKILL.md"))
    assert any(f.check == "SKILL.md" and "lower-case" in f.detail for f in report.failures)


def _plain_server(sandbox, task=None):
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("nameless", instructions="Notes.")

    @server.tool()
    async def note_count() -> int:
        """How many notes there are."""
        return 0

    return server


def test_the_kit_fails_a_skill_whose_skill_md_it_cannot_find(tmp_path):
    from clawsdk.testing.skills import check_skill

    report = anyio.run(lambda: check_skill(_plain_server))
    assert not report.ok
    assert [f.detail for f in report.failures if f.check == "SKILL.md"] == [
        "no SKILL.md found: pass skill_md=PATH, or set the factory's skill_dir (server.skill_dir = "
        "Path(__file__).parent) to the folder holding it"]
    missing = anyio.run(lambda: check_skill(_plain_server, skill_md=tmp_path / "SKILL.md"))
    assert any(f.check == "SKILL.md" and "no SKILL.md here" in f.detail for f in missing.failures)
    # a plain tool server: not checked, and not counted as a passed check either
    plain = anyio.run(lambda: check_skill(_plain_server, require_skill_md=False, name="notes"))
    assert plain.ok and "SKILL.md" not in {f.check for f in plain.findings}
    assert plain.summary().startswith("skill notes: passes") and "not checked: SKILL.md" in plain.summary()


def test_skills_check_fails_a_registered_skill_without_skill_dir_and_names_it(monkeypatch):
    import types

    from click.testing import CliRunner

    from clawsdk.cli import cli
    from clawsdk.hookspecs import hookimpl
    from clawsdk.plugins import register_plugin, reset_registry

    plugin = types.ModuleType("third_party_notes")
    plugin.register_skills = hookimpl(lambda register: register("notes", _plain_server))
    reset_registry()
    try:
        register_plugin(plugin)
        res = CliRunner().invoke(cli, ["skills", "check", "notes"])
        assert res.exit_code == 1, res.output
        assert res.output.startswith("skill notes: FAILS") and "no SKILL.md found" in res.output
        res = CliRunner().invoke(cli, ["skills", "check", "core", "calendar"])
        assert res.exit_code == 0, res.output
        assert "skill core: passes" in res.output and "not checked: SKILL.md" in res.output
        assert "skill calendar: passes" in res.output
    finally:
        reset_registry()


def test_the_kit_sends_no_wrong_value_for_an_argument_of_several_json_types():
    # a hand-written schema may give `type` as a list; the kit crashed on it (unhashable) before mypy saw it
    from clawsdk.testing.skills import _wrong

    assert _wrong({"type": ["string", "null"]}) is None
    assert _wrong({}) is None
    assert _wrong({"type": "integer"}) == "not-a-number"
