"""Two Ray nodes on this machine (a head and a worker node, each its own temp dir and ports) with token
authentication on both and on the driver, as docs/ray.md's cluster recipe: rollouts placed on the worker
node run there with the agent's options and the driver's install prefixes; a driver without the token is
refused with an error that names it; ray:// is refused with one line."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.conftest import make_task

pytest.importorskip("ray")
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
RAY = str(Path(sys.executable).parent / "ray")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """`ray start --head` and `ray start --address` of a second node, both with RAY_AUTH_MODE=token and the
    token; each in a session of its own, ended by its process group (never `ray stop`, which ends every Ray
    on the machine)."""
    base = tmp_path_factory.mktemp("cluster")
    short = Path(tempfile.mkdtemp(prefix="ray", dir="/tmp"))  # Ray's socket paths must fit in 107 bytes
    token = secrets.token_hex(32)
    home = base / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(HOME=str(home), RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token, RAY_USAGE_STATS_ENABLED="0",
               PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "plugins"), str(ROOT / "tools"),
                                           str(ROOT / "skills"), env.get("PYTHONPATH", "")]))
    port = free_port()
    nodes = []

    def start(*args: str, temp: str) -> subprocess.Popen:
        log = open(base / f"{temp}.log", "w")  # noqa: SIM115 - the node writes to it until it is stopped
        node = subprocess.Popen([RAY, "start", "--block", "--temp-dir", str(short / temp),
                                 "--disable-usage-stats", *args], env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        nodes.append(node)
        return node

    try:
        # the head keeps no rollout (no `worker_node` resource); the worker node runs them
        start("--head", "--port", str(port), "--num-cpus", "1", "--include-dashboard", "false", temp="h")
        address = f"127.0.0.1:{port}"
        probe = ("import ray, sys, time\n"
                 "ray.init(address=sys.argv[1])\n"
                 "deadline = time.time() + 120\n"
                 "while len([n for n in ray.nodes() if n['Alive']]) < int(sys.argv[2]):\n"
                 "    assert time.time() < deadline, ray.nodes()\n"
                 "    time.sleep(0.5)\n")
        _wait_for(lambda: nodes[0].poll() is None and subprocess.run(
            [sys.executable, "-c", probe, address, "1"], env=env, capture_output=True, timeout=120).returncode == 0,
            120, "the head", base / "h.log")
        start("--address", address, "--num-cpus", "2", "--resources", '{"worker_node": 2}', temp="w")
        done = subprocess.run([sys.executable, "-c", probe, address, "2"], env=env, capture_output=True,
                              text=True, timeout=180)
        assert done.returncode == 0, (base / "w.log").read_text()[-3000:]
        yield {"address": address, "env": env, "token": token, "base": base}
    finally:
        for node in nodes:
            try:
                os.killpg(node.pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
        for node in nodes:
            try:
                node.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(node.pid, signal.SIGKILL)
                node.wait()
        shutil.rmtree(short, ignore_errors=True)


def _wait_for(cond, timeout: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"{what} did not come up within {timeout} s: {log.read_text()[-3000:]}"
        time.sleep(1)


DRIVER = r"""
import json, os, sys
from clawsdk import load_tasks, run_sync, Store
from tests.executors.ray_agents import WhereAmI

tasks = load_tasks("tasks").tasks
result = run_sync(tasks, agent=WhereAmI(home="prefix"), samples=2, sandbox="local", db="store.db", run_id="two",
                  executor="ray", executor_options={"address": sys.argv[1], "resources_per_rollout": {"worker_node": 1}})
with Store("store.db") as store:
    notes = [e["payload"] for o in result.outcomes for e in store.events(o.rollout_id) if e["kind"] == "note"]
print(json.dumps({"kinds": [o.kind.value for o in result.outcomes], "notes": notes}))
"""


def test_rollouts_run_on_the_worker_node_with_the_drivers_options_and_prefixes(cluster, tmp_path):
    make_task(tmp_path / "tasks", "one")
    (tmp_path / "prefix").mkdir()  # an install prefix, named relative to the driver's folder
    env = {**cluster["env"], "CLAWSDK_PROBE_HOME": "prefix", "CLAWSDK_PROBE_TOKEN": "not for the workers"}
    done = subprocess.run([sys.executable, "-c", DRIVER, cluster["address"]], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["kinds"] == ["ok", "ok"]
    for note in report["notes"]:
        assert note["resources"].get("worker_node") == 1  # placed on the worker node, the only one with it
        assert note["pid"] != os.getpid()
        assert note["prefix_env"] == str(tmp_path / "prefix")  # the driver's CLAWSDK_* variable, made absolute
        assert note["secret_env"] is None  # a credential is not sent through the runtime environment
        assert note["cwd"] == str(tmp_path)  # where the driver works: relative names mean the same


def test_the_cli_on_the_cluster_a_relative_agent_option_reaches_the_workers(cluster, tmp_path):
    """The built-in scripted agent, by name, with its script named relative to the driver's folder."""
    make_task(tmp_path / "tasks", "one", steps=[])
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "s.yaml").write_text("- tool: write\n  args: {path: done.txt, content: done}\n")
    done = subprocess.run([sys.executable, "-m", "clawsdk", "run", "tasks", "--agent", "scripted", "--agent-opt",
                           "script=scripts/s.yaml", "--sandbox", "local", "--db", "store.db", "--json", "-k", "2",
                           "--executor", "ray", "--executor-opt", f"address={cluster['address']}",
                           "--executor-opt", "resources_per_rollout={worker_node: 1}"],
                          cwd=tmp_path, env=cluster["env"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    assert summary["failure_kinds"] == {"ok": 2} and summary["total"]["passed"] == 2


def test_a_driver_without_the_token_is_told_to_give_it(cluster, tmp_path):
    make_task(tmp_path / "tasks", "one")
    env = {k: v for k, v in cluster["env"].items() if k not in ("RAY_AUTH_TOKEN", "RAY_AUTH_MODE")}
    env["HOME"] = str(tmp_path)  # no ~/.ray/auth_token either
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "clawsdk", "run", "tasks", "--sandbox", "local", "--db", "store.db",
                           "--executor", "ray", "--executor-opt", f"address={cluster['address']}"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    err = " ".join(done.stderr.split())
    assert "requires Ray's token authentication and this driver has no token" in err, err[-2000:]
    assert "RAY_AUTH_TOKEN" in err and "ray get-auth-token" in err
    assert time.monotonic() - started < 60  # told at once, not after Ray's retries


def test_a_wrong_token_is_named(cluster, tmp_path):
    make_task(tmp_path / "tasks", "one")
    env = {**cluster["env"], "RAY_AUTH_TOKEN": secrets.token_hex(32)}
    done = subprocess.run([sys.executable, "-m", "clawsdk", "run", "tasks", "--sandbox", "local", "--db", "store.db",
                           "--executor", "ray", "--executor-opt", f"address={cluster['address']}"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    err = " ".join(done.stderr.split())
    assert "answers but refused this driver" in err and "is the token from RAY_AUTH_TOKEN the cluster's?" in err


def test_ray_client_addresses_are_refused_in_one_line(tmp_path):
    make_task(tmp_path / "tasks", "one")
    done = subprocess.run([sys.executable, "-m", "clawsdk", "run", "tasks", "--sandbox", "local", "--db", "store.db",
                           "--executor", "ray", "--executor-opt", "address=ray://127.0.0.1:10001"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if "ray://" in line]
    assert len(lines) == 1 and "is not supported: run `clawsdk run` on the head node" in lines[0]
