"""The mail skill: a mailbox of .eml files in the workspace."""

from __future__ import annotations

import datetime as dt
import email
import email.parser
import email.policy
import email.utils
import html
import re
import secrets
from email.message import EmailMessage
from typing import TYPE_CHECKING, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel

from clawsdk.mcp.toolkit import tool_errors, truncate
from clawsdk.tasks.paths import normalize_relative
from clawsdk_skills._common import config, pack_server

if TYPE_CHECKING:
    from clawsdk.sandbox.base import Sandbox

_BLANK_LINE = re.compile(rb"\r?\n\r?\n")


class MessageSummary(BaseModel):
    id: str
    sender: str
    to: str
    subject: str
    date: str | None
    snippet: str
    attachments: int = 0


class MessageList(BaseModel):
    folder: str
    messages: list[MessageSummary]
    total: int


class Message(BaseModel):
    id: str
    headers: dict[str, str]
    body: str
    attachments: list[str]


def _html_text(markup: str) -> str:
    text = re.sub(r"(?is)<(script|style).*?</\1>", "", markup)
    text = re.sub(r"(?i)<br\s*/?>|</p>|</div>|</li>", "\n", text)
    text = re.sub(r"<[^>]+>", "", text)
    return re.sub(r"\n{3,}", "\n\n", html.unescape(text)).strip()


def _payload(part: email.message.Message) -> bytes:
    """A leaf part's bytes, transfer encoding undone (none for a part without any)."""
    payload = part.get_payload(decode=True)
    return payload if isinstance(payload, bytes) else b""


def body_of(msg: email.message.Message) -> tuple[str, list[str]]:
    plain, html_body, attachments = None, None, []
    for part in msg.walk() if msg.is_multipart() else [msg]:
        if part.is_multipart():
            continue
        disp = (part.get("Content-Disposition") or "").lower()
        name = part.get_filename()
        if name or "attachment" in disp:
            attachments.append(name or "(unnamed)")
            continue
        ctype = part.get_content_type()
        try:
            text = part.get_content() if hasattr(part, "get_content") else _payload(part).decode()
        except (LookupError, UnicodeDecodeError, KeyError):
            text = _payload(part).decode("utf-8", "replace")
        if ctype == "text/plain" and plain is None:
            plain = text
        elif ctype == "text/html" and html_body is None:
            html_body = text
    body = plain if plain is not None else (_html_text(html_body) if html_body else "")
    return body, attachments


def _date(msg: email.message.Message) -> dt.datetime | None:
    raw = msg.get("Date")
    if not raw:
        return None
    try:
        d = email.utils.parsedate_to_datetime(str(raw))
    except (TypeError, ValueError):
        return None
    return d if d.tzinfo else d.replace(tzinfo=dt.UTC)


def headers_of(data: bytes) -> email.message.Message:
    """The header block of a message (up to its first blank line), body left out: sorting and filtering need
    no more, and a message's body is parsed only when it is shown or searched."""
    head = data
    blank = _BLANK_LINE.search(head)
    if blank:
        head = head[:blank.start()]
    return email.parser.BytesHeaderParser(policy=email.policy.default).parsebytes(head)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40] or "message"


def server(sandbox: Sandbox, task: Any = None) -> MCPServer:
    srv = pack_server(__file__)
    cfg = config(task, "mail")
    me = cfg.get("address", "me@example.com")

    async def root() -> str:
        if "root" in cfg:
            return normalize_relative(cfg["root"])
        try:
            await sandbox.list("mail")
            return "mail"
        except (OSError, ValueError):
            return "."

    def join(base: str, rel: str) -> str:
        return normalize_relative(rel if base == "." else f"{base}/{rel}")

    async def load(mid: str) -> email.message.Message:
        base = await root()
        if not mid.endswith(".eml"):
            raise ToolError(f"{mid!r} is not a message id; ids are paths such as inbox/001.eml (see mail_list)")
        data = await sandbox.read_capped(join(base, mid))
        return email.message_from_bytes(data, policy=email.policy.default)

    async def messages(folder: str | None) -> list[tuple[str, bytes, email.message.Message]]:
        """(id, raw bytes, header block) of each message, oldest first."""
        base = await root()
        where = join(base, folder) if folder else base
        try:
            entries = await sandbox.list(where, recursive=folder is None)
        except (FileNotFoundError, NotADirectoryError) as e:
            raise ToolError(f"no mail folder {folder!r} in the mailbox {base!r}") from e
        out = []
        for entry in entries:
            if entry.is_dir or not entry.path.endswith(".eml"):
                continue
            mid = entry.path if base == "." else entry.path[len(base) + 1:]
            data = await sandbox.read_capped(entry.path)
            out.append((mid, data, headers_of(data)))
        out.sort(key=lambda x: (_date(x[2]) or dt.datetime.min.replace(tzinfo=dt.UTC), x[0]))
        return out

    def parsed(data: bytes) -> email.message.Message:
        return email.message_from_bytes(data, policy=email.policy.default)

    def summary(mid: str, msg: email.message.Message) -> MessageSummary:
        body, att = body_of(msg)
        d = _date(msg)
        return MessageSummary(id=mid, sender=str(msg.get("From", "")), to=str(msg.get("To", "")),
                              subject=str(msg.get("Subject", "")), date=d.isoformat() if d else None,
                              snippet=" ".join(body.split())[:160], attachments=len(att))

    @srv.tool()
    @tool_errors
    async def mail_list(folder: str = "inbox", offset: int = 0, limit: int = 50) -> MessageList:
        """The messages of a mailbox folder (inbox, drafts, outbox, sent, ...), oldest first."""
        msgs = await messages(folder)
        page = msgs[max(offset, 0): max(offset, 0) + max(1, min(limit, 200))]
        return MessageList(folder=folder, messages=[summary(m, parsed(data)) for m, data, _ in page],
                           total=len(msgs))

    @srv.tool()
    @tool_errors
    async def mail_read(id: str) -> Message:
        """One message: its headers, text body (HTML turned to text) and attachment names."""
        msg = await load(id)
        body, att = body_of(msg)
        headers = {k: str(v) for k, v in msg.items()
                   if k.lower() in ("from", "to", "cc", "bcc", "reply-to", "subject", "date", "message-id",
                                    "in-reply-to", "references")}
        return Message(id=id, headers=headers, body=truncate(body), attachments=att)

    @srv.tool()
    @tool_errors
    async def mail_search(query: str | None = None, sender: str | None = None, recipient: str | None = None,
                          since: str | None = None, until: str | None = None, folder: str | None = None,
                          limit: int = 50) -> MessageList:
        """Messages matching every given filter: query (subject or body text), sender, recipient (To/Cc),
        since/until (ISO dates, inclusive). folder: one folder, or every folder when omitted."""
        lo = dt.datetime.fromisoformat(since).replace(tzinfo=dt.UTC) if since else None
        hi = (dt.datetime.fromisoformat(until[:10]) + dt.timedelta(days=1)).replace(tzinfo=dt.UTC) \
            if until else None
        hits = []
        for mid, data, head in await messages(folder):
            if sender and sender.lower() not in str(head.get("From", "")).lower():
                continue
            if recipient and recipient.lower() not in (str(head.get("To", "")) + str(head.get("Cc", ""))).lower():
                continue
            d = _date(head)
            if (lo and (d is None or d < lo)) or (hi and (d is None or d >= hi)):
                continue
            msg = parsed(data)  # the body only for messages the header filters kept
            body, _ = body_of(msg)
            if query and query.lower() not in (str(msg.get("Subject", "")) + "\n" + body).lower():
                continue
            hits.append(summary(mid, msg))
        return MessageList(folder=folder or "(all)", messages=hits[: max(1, limit)], total=len(hits))

    @srv.tool()
    @tool_errors
    async def mail_draft(to: list[str], subject: str = "", body: str = "", cc: list[str] | None = None,
                         in_reply_to: str | None = None) -> MessageSummary:
        """Save a draft in drafts/. in_reply_to: the id of the message answered (threads it, "Re:" subject)."""
        if not to:
            raise ToolError("a draft needs at least one recipient in `to`")
        for addr in [*to, *(cc or [])]:
            if "@" not in email.utils.parseaddr(addr)[1]:
                raise ToolError(f"{addr!r} is not an e-mail address")
        msg = EmailMessage()
        msg["From"] = me
        msg["To"] = ", ".join(to)
        if cc:
            msg["Cc"] = ", ".join(cc)
        if in_reply_to:
            orig = await load(in_reply_to)
            oid = str(orig.get("Message-ID", "")).strip()
            if oid:
                msg["In-Reply-To"] = oid
                msg["References"] = (str(orig.get("References", "")) + " " + oid).strip()
            if not subject:
                s = str(orig.get("Subject", ""))
                subject = s if s.lower().startswith("re:") else f"Re: {s}"
        msg["Subject"] = subject
        msg["Message-ID"] = email.utils.make_msgid(domain=me.split("@")[-1] or "clawsdk")
        msg.set_content(body)
        base = await root()
        name = f"drafts/{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}-{_slug(subject)}.eml"
        await sandbox.write(join(base, name), msg.as_bytes())
        return summary(name, msg)

    @srv.tool()
    @tool_errors
    async def mail_send(draft_id: str) -> MessageSummary:
        """Send a draft: it gets a Date header and moves from drafts/ to outbox/."""
        if not draft_id.startswith("drafts/"):
            raise ToolError(f"{draft_id!r} is not a draft; save one with mail_draft, then send its id")
        msg = await load(draft_id)
        if "Date" not in msg:
            msg["Date"] = email.utils.format_datetime(dt.datetime.now(dt.UTC))
        base = await root()
        target = "outbox/" + draft_id.split("/", 1)[1]
        await sandbox.write(join(base, target), msg.as_bytes())
        await sandbox.exec(["rm", "-f", "--", join(base, draft_id)], timeout=30)
        return summary(target, msg)

    return srv
