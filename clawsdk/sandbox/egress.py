"""A network allowlist for an isolated sandbox: the only way out is an HTTP proxy that lets listed hosts through.

The sandbox keeps its network namespace with nothing in it but loopback, so no packet leaves it by itself.
What it may reach goes through a unix socket bound into it (`SOCKET_INSIDE`); inside, `FORWARDER` listens on
127.0.0.1:PROXY_PORT and relays each connection to that socket, and commands get HTTP_PROXY / HTTPS_PROXY
pointing at it. On the host, `EgressProxy` answers on the socket: a CONNECT (HTTPS) or a plain HTTP request to
a host the phase's allowlist names is connected; anything else gets 403 with the reason. A name the list
allows but that resolves to the runner's own loopback, a private or a link-local address is refused unless
the list names that address itself, so a DNS answer cannot open the runner's local services. The phase is
read at each connection: the agent's list while its turn lasts, the verifier's after (`Sandbox.turn_over`).
"""

from __future__ import annotations

import ipaddress
import os
import select
import shutil
import socket
import socketserver
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

PROXY_PORT = 3128
SOCKET_INSIDE = "/run/clawsdk-egress/egress.sock"
MAX_HEADER = 16384

#: runs inside the sandbox as `python3 -I -c FORWARDER SOCKET -- ARGV...` (ARGV empty: serve for ever):
#: listens on 127.0.0.1:PROXY_PORT in the sandbox's namespace, relays to SOCKET, and runs ARGV meanwhile
FORWARDER = r'''
import os, socket, sys, threading
path, argv = sys.argv[1], sys.argv[3:]
lsock = socket.socket()
lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
lsock.bind(("127.0.0.1", %d))
lsock.listen(64)
def pump(a, b):
    try:
        while True:
            data = a.recv(65536)
            if not data:
                break
            b.sendall(data)
    except OSError:
        pass
    finally:
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
def serve():
    while True:
        c, _ = lsock.accept()
        u = socket.socket(socket.AF_UNIX)
        try:
            u.connect(path)
        except OSError:
            c.close()
            continue
        threading.Thread(target=pump, args=(c, u), daemon=True).start()
        threading.Thread(target=pump, args=(u, c), daemon=True).start()
if not argv:
    serve()
pid = os.fork()
if pid == 0:
    lsock.close()
    os.execvp(argv[0], argv)
threading.Thread(target=serve, daemon=True).start()
_, status = os.waitpid(pid, 0)
os._exit(os.waitstatus_to_exitcode(status) & 0xff)
''' % PROXY_PORT


def proxy_env() -> dict[str, str]:
    url = f"http://127.0.0.1:{PROXY_PORT}"
    return {"HTTP_PROXY": url, "HTTPS_PROXY": url, "http_proxy": url, "https_proxy": url, "NO_PROXY": "",
            "no_proxy": ""}


def allowed(host: str, hosts: list[str]) -> bool:
    """Whether `host` (a name or an address) is one the list names: the name, a `*.suffix`, an address or a
    network (CIDR)."""
    host = host.strip("[]").lower().rstrip(".")
    try:
        addr = ipaddress.ip_address(host)
    except ValueError:
        addr = None
    for entry in hosts:
        if addr is not None and "/" in entry:
            try:
                if addr in ipaddress.ip_network(entry, strict=False):
                    return True
            except ValueError:
                continue
        elif entry.startswith("*.") and addr is None:
            if host.endswith(entry[1:]):
                return True
        elif host == entry:
            return True
    return False


def _internal(ip: str) -> bool:
    a = ipaddress.ip_address(ip)
    return a.is_loopback or a.is_private or a.is_link_local or a.is_unspecified or a.is_multicast


class EgressProxy:
    """The host side: a proxy on a unix socket whose allowlist is `hosts()`, read at each connection."""

    def __init__(self, hosts: Callable[[], list[str]], uid: int | None = None):
        # a folder of its own under the temp folder: a unix socket's path is at most 107 bytes, and a sandbox
        # root can lie deeper than that leaves room for; the sandbox binds the folder in
        self.path = Path(tempfile.mkdtemp(prefix="clawsdk-egress-")) / "egress.sock"
        self.path.parent.chmod(0o755)
        self.hosts = hosts
        proxy = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                proxy._handle(self.request)

        class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
            daemon_threads = True

        try:
            self.server = Server(str(self.path), Handler)
            os.chmod(self.path, 0o666)  # the sandbox's uid connects to it
            if uid is not None:
                os.chown(self.path.parent, uid, uid)
        except BaseException:
            shutil.rmtree(self.path.parent, ignore_errors=True)
            raise
        self.thread = threading.Thread(target=self.server.serve_forever, name=f"egress {self.path}", daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        shutil.rmtree(self.path.parent, ignore_errors=True)

    def _handle(self, client: socket.socket) -> None:
        client.settimeout(30)
        data = b""
        while b"\r\n\r\n" not in data and len(data) < MAX_HEADER:
            chunk = client.recv(4096)
            if not chunk:
                return
            data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        try:
            method, target, version = lines[0].split(" ", 2)
        except ValueError:
            return self._refuse(client, 400, "not an HTTP proxy request")
        if method.upper() == "CONNECT":
            host, _, port = target.rpartition(":")
        else:
            if not target.lower().startswith("http://"):
                return self._refuse(client, 400, "a proxy request names its URL (http://host/path)")
            hostport, _, path = target[7:].partition("/")
            host, _, port = hostport.rpartition(":") if ":" in hostport.strip("[]").split("]")[-1] else \
                (hostport, "", "80")
            lines[0] = f"{method} /{path} {version}"
        host = host.strip("[]")
        hosts = self.hosts()
        if not host or not port.isdigit() or not allowed(host, hosts):
            return self._refuse(client, 403, f"{host or target} is not in this phase's network allowlist "
                                             f"({', '.join(hosts) or 'empty'})")
        try:
            infos = socket.getaddrinfo(host, int(port), type=socket.SOCK_STREAM)
        except OSError as e:
            return self._refuse(client, 502, f"{host}: {e}")
        literal = _is_literal(host)
        for *_, sockaddr in infos:
            if _internal(str(sockaddr[0])) and not (literal and allowed(str(sockaddr[0]), hosts)):
                return self._refuse(client, 403, f"{host} resolves to {sockaddr[0]}, an address of this machine "
                                                 "or its network, which only an allowlist naming it reaches")
        try:
            upstream = socket.create_connection((host, int(port)), timeout=30)
        except OSError as e:
            return self._refuse(client, 502, f"{host}:{port}: {e}")
        with upstream:
            if method.upper() == "CONNECT":
                client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                if rest:
                    upstream.sendall(rest)
            else:
                upstream.sendall("\r\n".join(lines).encode("latin-1") + b"\r\n\r\n" + rest)
            _relay(client, upstream)

    @staticmethod
    def _refuse(client: socket.socket, code: int, why: str) -> None:
        body = f"clawsdk egress: {why}\n".encode()
        reason = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway"}[code]
        client.sendall(f"HTTP/1.1 {code} {reason}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
                       .encode() + body)


def _is_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False


def _relay(a: socket.socket, b: socket.socket) -> None:
    socks = [a, b]
    for s in socks:
        s.settimeout(None)
    while True:
        readable, _, _ = select.select(socks, [], [], 300)
        if not readable:
            return
        for s in readable:
            data = s.recv(65536)
            if not data:
                return
            (b if s is a else a).sendall(data)
