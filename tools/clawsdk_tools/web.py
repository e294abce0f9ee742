"""OpenClaw's web_fetch: pages a task ships (offline), or live HTTP(S) behind an allow-list.

The fetch runs in the tool server, outside the sandbox, so it would bypass a sandbox that
isolates the network: live fetching is therefore off by default there. Loopback, private and
link-local addresses are refused unless the task allows them, so an agent cannot reach the
services on the host (the model proxy, `clawsdk serve`).

Task configuration (`tool_config.web`):

    pages: {URL: "text" | {content: "...", content_type: "text/html", status: 200}}
    live: true | false          default: true unless the sandbox isolates the network
    allow: ["example.com", "*.python.org"]   hosts live fetches may reach; default ["*"]
    allow_private: false        let live fetches reach loopback/private addresses (tests)
"""

from __future__ import annotations

import fnmatch
import ipaddress
import re
import socket
from html.parser import HTMLParser
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urldefrag, urlsplit

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel

from clawsdk.mcp.toolkit import tool_errors, truncate

if TYPE_CHECKING:
    from clawsdk.sandbox.base import Sandbox
    from clawsdk.tasks.model import Task

MAX_BYTES = 5 * 1024 * 1024
DEFAULT_MAX_CHARS = 20_000


class WebPage(BaseModel):
    url: str
    status: int
    content_type: str
    title: str | None = None
    text: str
    truncated: bool = False
    source: Literal["offline", "live"]


class _Extract(HTMLParser):
    """HTML to readable Markdown-ish text: headings, paragraphs, list items, links; scripts dropped."""

    BLOCK = frozenset({"p", "div", "section", "article", "main", "header", "footer", "br", "tr", "table", "ul", "ol",
             "pre", "blockquote", "hr"})
    SKIP = frozenset({"script", "style", "noscript", "template", "svg", "head", "title"})

    def __init__(self, markdown: bool):
        super().__init__(convert_charrefs=True)
        self.md = markdown
        self.out: list[str] = []
        self.skip = 0
        self.title: str | None = None
        self._in_title = False
        self._href: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
        if tag in self.SKIP:
            self.skip += 1
            return
        if tag in self.BLOCK:
            self.out.append("\n\n")
        elif re.fullmatch(r"h[1-6]", tag):
            self.out.append("\n\n" + ("#" * int(tag[1]) + " " if self.md else ""))
        elif tag == "li":
            self.out.append("\n- " if self.md else "\n")
        elif tag in ("td", "th"):
            self.out.append(" | ")
        elif tag == "a" and self.md:
            self._href = dict(attrs).get("href")
            self.out.append("[")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        if tag in self.SKIP:
            self.skip = max(0, self.skip - 1)
            return
        if re.fullmatch(r"h[1-6]", tag) or tag in self.BLOCK:
            self.out.append("\n")
        elif tag == "a" and self.md:
            self.out.append(f"]({self._href})" if self._href else "]")
            self._href = None

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title = (self.title or "") + data.strip()
        if self.skip:
            return
        self.out.append(re.sub(r"\s+", " ", data))

    def text(self) -> str:
        raw = "".join(self.out)
        raw = re.sub(r"[ \t]+\n", "\n", raw)
        return re.sub(r"\n{3,}", "\n\n", raw).strip()


def extract(body: str, content_type: str, mode: str) -> tuple[str | None, str]:
    if mode == "raw" or "html" not in content_type:
        return None, body
    parser = _Extract(markdown=mode == "markdown")
    parser.feed(body)
    parser.close()
    return parser.title, parser.text()


def _host_allowed(host: str, allow: list[str]) -> bool:
    host = host.lower().rstrip(".")
    for pattern in allow:
        p = pattern.lower()
        if p == "*" or fnmatch.fnmatch(host, p) or host == p or host.endswith("." + p.lstrip("*.")):
            return True
    return False


async def _public_only(host: str) -> None:
    """Refuse hosts that resolve to loopback, private, link-local or reserved addresses."""
    infos = await anyio.getaddrinfo(host, None)
    for info in infos:
        ip = ipaddress.ip_address(info[4][0])
        if ip.is_loopback or ip.is_private or ip.is_link_local or ip.is_reserved or ip.is_multicast:
            raise ToolError(f"web_fetch refuses {host}: it resolves to a non-public address ({ip})")


def _page(pages: dict[str, Any], url: str) -> tuple[str, str, int] | None:
    for candidate in (url, urldefrag(url)[0], url.rstrip("/"), url.rstrip("/") + "/"):
        if candidate in pages:
            page = pages[candidate]
            if isinstance(page, str):
                ctype = "text/html" if page.lstrip()[:1] == "<" else "text/plain"
                return page, ctype, 200
            return (str(page.get("content", "")), str(page.get("content_type", "text/html")),
                    int(page.get("status", 200)))
    return None


def add_web_tools(server: MCPServer, sandbox: Sandbox, task: Task | None) -> None:
    config: dict[str, Any] = dict(getattr(task, "tool_config", {}).get("web", {})) if task else {}
    pages: dict[str, Any] = config.get("pages") or {}
    live = bool(config.get("live", not sandbox.capabilities.network_isolated))
    allow = list(config.get("allow", ["*"]))
    allow_private = bool(config.get("allow_private", False))

    @server.tool()
    @tool_errors
    async def web_fetch(url: str, extractMode: Literal["markdown", "text", "raw"] = "markdown",
                        maxChars: int = DEFAULT_MAX_CHARS) -> WebPage:  # OpenClaw's names
        """Fetch a web page (http/https) and return its readable text (markdown, text, or raw)."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ToolError(f"web_fetch takes an http(s) URL with a host (got {url!r})")
        limit = max(100, min(maxChars, 200_000))
        shipped = _page(pages, url)
        if shipped is not None:
            body, ctype, status = shipped
            title, text = extract(body, ctype, extractMode)
            cut = truncate(text, limit, hint="fetch again with a larger maxChars")
            return WebPage(url=url, status=status, content_type=ctype, title=title, text=cut,
                           truncated=cut is not text, source="offline")
        if not live:
            known = f" The task ships these pages: {', '.join(sorted(pages))}." if pages else ""
            raise ToolError(f"web_fetch is offline in this sandbox: {url} is not one of the task's pages.{known}")
        if not _host_allowed(parts.hostname, allow):
            raise ToolError(f"web_fetch may not reach {parts.hostname}; allowed hosts: {', '.join(allow) or 'none'}")
        if not allow_private:
            try:
                await _public_only(parts.hostname)
            except socket.gaierror as e:
                raise ToolError(f"cannot resolve {parts.hostname}: {e}") from e
        import httpx2

        try:
            async with httpx2.AsyncClient(timeout=30, follow_redirects=False) as client:
                for _ in range(5):  # follow redirects ourselves so each hop is checked
                    resp = await client.get(url, headers={"User-Agent": "clawsdk-web_fetch/1"})
                    if resp.is_redirect and "location" in resp.headers:
                        url = str(resp.url.join(resp.headers["location"]))
                        host = urlsplit(url).hostname or ""
                        if not _host_allowed(host, allow):
                            raise ToolError(f"redirected to {host}, which is not allowed")
                        if not allow_private:
                            await _public_only(host)
                        continue
                    break
                data = resp.content[:MAX_BYTES]
        except httpx2.HTTPError as e:
            raise ToolError(f"fetching {url} failed: {type(e).__name__}: {e}") from e
        ctype = resp.headers.get("content-type", "application/octet-stream")
        if not re.search(r"text|html|json|xml|javascript", ctype):
            raise ToolError(f"{url} is {ctype} ({len(resp.content)} bytes), not text")
        title, text = extract(data.decode(resp.encoding or "utf-8", "replace"), ctype, extractMode)
        cut = truncate(text, limit, hint="fetch again with a larger maxChars")
        return WebPage(url=url, status=resp.status_code, content_type=ctype, title=title, text=cut,
                       truncated=cut is not text, source="live")
