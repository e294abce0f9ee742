"""A task's network allowlist, per phase, under bwrap and docker: through the egress proxy a listed host answers,
any other is refused (403, saying why), nothing is reachable around the proxy, a name that resolves to the
runner's own addresses is refused, and once the agent's turn is over the verifier's list (none) applies."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import anyio
import pytest
from sandbox_backends import skip_unless_available

from clawsdk.plugins import get_registry
from clawsdk.sandbox.base import SandboxConfig
from clawsdk.sandbox.egress import allowed
from clawsdk.tasks.model import Task

FETCH = ("import sys, urllib.request, urllib.error\n"
         "try:\n"
         "    print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())\n"
         "except urllib.error.HTTPError as e:\n"
         "    print(e.code, e.read().decode())\n"
         "except Exception as e:\n"
         "    print('failed', type(e).__name__)\n")


class Hello(BaseHTTPRequestHandler):
    def do_GET(self):  # http.server's name
        body = f"hello from {self.server.server_address[0]}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def servers():
    made = [ThreadingHTTPServer((ip, 0), Hello) for ip in ("127.0.0.1", "127.0.0.2")]
    for s in made:
        threading.Thread(target=s.serve_forever, daemon=True).start()
    yield [f"http://{s.server_address[0]}:{s.server_address[1]}/" for s in made]
    for s in made:
        s.shutdown()
        s.server_close()


def test_the_allowlist_matches_names_wildcards_addresses_and_networks():
    hosts = ["pypi.org", "*.example.com", "10.0.0.0/8", "127.0.0.1"]
    assert allowed("pypi.org", hosts) and allowed("PyPI.org.", hosts) and allowed("a.b.example.com", hosts)
    assert allowed("10.2.3.4", hosts) and allowed("127.0.0.1", hosts)
    assert not allowed("example.com", hosts) and not allowed("evil-pypi.org", hosts) and not allowed("127.0.0.2", hosts)


@pytest.mark.parametrize("backend", ["bwrap", "docker"])
def test_an_allowlist_is_enforced_in_the_agent_phase_and_the_verifier_phase(backend, servers):
    skip_unless_available(backend)
    allowed_url, other_url = servers
    task = Task(id="net", instruction="fetch", network={"agent": {"mode": "allowlist",
                                                                  "hosts": ["127.0.0.1", "localhost"]}})
    sb = get_registry().get("sandboxes", backend)(SandboxConfig())
    assert sb.cannot_run(task) is None

    async def fetch(url: str, *env: str) -> str:
        r = await sb.exec(["env", *env, "python3", "-c", FETCH, url], timeout=60)
        return r.stdout.strip()

    async def main() -> dict[str, str]:
        try:
            with anyio.fail_after(180):
                await sb.start(task)
                out = {"listed": await fetch(allowed_url), "other": await fetch(other_url),
                       "by_name": await fetch(allowed_url.replace("127.0.0.1", "localhost")),
                       "around": await fetch(allowed_url, "NO_PROXY=*", "no_proxy=*")}
                await sb.end_turn()
                out["verifier"] = await fetch(allowed_url)
                return out
        finally:
            with anyio.CancelScope(shield=True):
                await sb.close()

    out = anyio.run(main)
    assert out["listed"] == "hello from 127.0.0.1"
    assert out["other"].startswith("403") and "not in this phase's network allowlist" in out["other"]
    # localhost is listed by name, but it is this machine: only the address itself, listed, reaches it
    assert out["by_name"].startswith("403") and "resolves to 127.0.0.1" in out["by_name"]
    assert out["around"].startswith("failed")  # no route but the proxy
    assert out["verifier"].startswith("403") and "(empty)" in out["verifier"]


def test_a_backend_that_cannot_enforce_an_allowlist_refuses_the_task():
    task = Task(id="net", instruction="fetch", network={"verifier": {"mode": "allowlist", "hosts": ["pypi.org"]}})
    why = get_registry().get("sandboxes", "local")(SandboxConfig()).cannot_run(task)
    assert why and "cannot enforce a network allowlist (pypi.org)" in why
    docker_open = get_registry().get("sandboxes", "docker")(SandboxConfig(extra={"network": True}))
    assert "network=true" in docker_open.cannot_run(task)
