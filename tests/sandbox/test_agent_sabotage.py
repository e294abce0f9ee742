"""What the agent does is the agent's: junk it leaves where the reward scripts go, or a `kill -9 -1`,
ends scored (with the reason recorded), never unscored; a sandbox broken from outside stays unscored."""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

import pytest
from clawsdk_plugins.agents.builtin import ScriptedAgent
from clawsdk_plugins.sources.clawgym import REWARD_SH
from sandbox_backends import skip_unless_available

from clawsdk import Store, run_sync
from clawsdk.runtime.agent import Agent, AgentContext
from clawsdk.tasks.sources import load_tasks
from tests.conftest import make_task

BACKENDS = ["local", "bwrap", "docker"]


def clawgym_task(root: Path):
    folder = root / "task_sabotage"
    (folder / "input_files").mkdir(parents=True)
    (folder / "input_files" / "notes.txt").write_text("hello\n")
    (folder / "reward").mkdir()
    (folder / "reward" / "reward.sh").write_text(REWARD_SH)
    (folder / "reward" / "check.py").write_text(
        "import json, os, sys\n"
        "p = os.path.join(sys.argv[1], 'answer.txt')\n"
        "print(json.dumps({'answer': float(os.path.exists(p) and open(p).read().strip() == '42')}))\n")
    (folder / "data_entry.json").write_text(json.dumps(
        {"task_id": "task_sabotage", "user_query": "Write 42 to answer.txt", "metadata": {"grading_type": "automated"}}))
    (task,) = load_tasks(f"clawgym:{folder}").tasks
    return task


def answer(text: str = "42") -> dict:
    return {"tool": "write", "args": {"path": "answer.txt", "content": text}}


def run_one(task, agent, db, backend):
    [o] = run_sync([task], agent=agent, db=db, sandbox=backend, retries=1, backoff_s=0.01).outcomes
    with Store(db) as store:
        rows = store.query("SELECT detail FROM verdicts WHERE rollout_id = ?", [o.rollout_id])
    return o, (rows[-1]["detail"] if rows else "")


@pytest.fixture
def outside():
    folder = Path("/tmp") / f"clawsdk-sabotage-{secrets.token_hex(4)}"
    folder.mkdir()
    folder.chmod(0o777)
    yield folder
    for p in folder.rglob("*"):
        if p.is_file():
            p.unlink()
    for p in sorted(folder.rglob("*"), reverse=True):
        p.rmdir()
    folder.rmdir()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("junk", ["file", "folder", "symlink-root", "symlink-out"])
def test_junk_at_reward_is_moved_aside_and_the_rollout_is_scored(backend, junk, tmp_path, outside):
    skip_unless_available(backend)
    task = clawgym_task(tmp_path)
    plant = {
        "file": {"tool": "write", "args": {"path": "reward", "content": "mine"}},
        "folder": {"tool": "write", "args": {"path": "reward/reward.sh", "content": "echo 1\n"}},
        "symlink-root": {"tool": "exec", "args": {"command": "ln -s / reward"}},
        "symlink-out": {"tool": "exec", "args": {"command": f"ln -s {outside} reward"}},
    }[junk]
    # one agent earns its score, one earns nothing: both are scored, the junk changes neither
    for calls, expected in (([answer(), plant], 1.0), ([answer("41"), plant], 0.0)):
        db = tmp_path / f"{junk}-{expected}.db"
        o, detail = run_one(task, ScriptedAgent(calls), db, backend)
        assert o.kind.value == "ok" and o.reward == expected, (o, detail)
        if junk.startswith("symlink"):  # out of the workspace: end_turn has already removed it
            with Store(db) as store:
                ends = [e["payload"] for e in store.events(o.rollout_id) if e["kind"] == "note"
                        and e["payload"].get("event") == "end_turn"]
            assert "reward" in json.dumps(ends) and "moved aside" not in detail, (ends, detail)
        else:
            assert "reward was moved aside to reward.agent-" in detail, detail
    assert list(outside.iterdir()) == [], "the reward scripts were written through the agent's symlink"


class _Steps(Agent):
    """Tool calls, with a callback on the sandbox in between (what the infrastructure might do)."""

    name = "steps"

    def __init__(self, steps):
        self.steps = steps

    async def run(self, ctx: AgentContext) -> None:
        for step in self.steps:
            if callable(step):
                await step(ctx.sandbox)
            else:
                await ctx.tools.call(step["tool"], step["args"])


#: a command runs in the workspace: where it was gone, it could not start (a file check just found no file)
CHECKS_IN_THE_WORKSPACE = [{"type": "command", "name": "done", "run": "grep -q done done.txt"}]
GONE = {
    "removed": 'cd / && rm -rf "$CLAWSDK_WORKSPACE"',
    "moved": 'cd / && mv "$CLAWSDK_WORKSPACE" "$CLAWSDK_WORKSPACE.x"',
    "a link in its place": 'cd / && mv "$CLAWSDK_WORKSPACE" "$CLAWSDK_WORKSPACE.x" && ln -s /etc "$CLAWSDK_WORKSPACE"',
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("how", sorted(GONE))
def test_a_workspace_the_agent_removed_is_scored_empty(backend, how, tmp_path):
    """On the local sandbox the workspace is the agent's to remove or move (its commands run as the runner's
    user): scoring then failed, verifier_error, unscored (found by a read-only audit). It is made again, empty,
    and the rollout scored 0; the isolated sandboxes mount it, so it never went."""
    skip_unless_available(backend)
    task = load_tasks(make_task(tmp_path / "src", "gone", checks=CHECKS_IN_THE_WORKSPACE)).tasks[0]
    agent = ScriptedAgent([{"tool": "exec", "args": {"command": GONE[how]}}])
    o, detail = run_one(task, agent, tmp_path / "gone.db", backend)
    assert o.kind.value == "ok" and o.reward == 0.0, (o, detail)


def test_a_local_sandbox_root_the_agent_removed_is_scored_empty(tmp_path):
    task = load_tasks(make_task(tmp_path / "src", "gone", checks=CHECKS_IN_THE_WORKSPACE)).tasks[0]
    agent = ScriptedAgent([{"tool": "exec", "args": {"command": 'cd / && rm -rf "$(dirname "$CLAWSDK_WORKSPACE")"'}}])
    o, detail = run_one(task, agent, tmp_path / "gone.db", "local")
    assert o.kind.value == "ok" and o.reward == 0.0, (o, detail)


@pytest.mark.parametrize("backend", ["bwrap", "docker"])
def test_the_agents_kill_of_everything_is_its_own_and_scored(backend, tmp_path):
    skip_unless_available(backend)
    if backend == "docker" and os.geteuid() != 0:
        pytest.skip("without root the container's keeper runs as the agent's uid (documented)")
    task = clawgym_task(tmp_path)
    kill = {"tool": "exec", "args": {"command": "kill -9 -1; sleep 1; echo survived"}}
    for calls, expected in (([kill, answer(), kill], 1.0), ([kill], 0.0)):
        o, detail = run_one(task, ScriptedAgent(calls), tmp_path / f"kill-{expected}.db", backend)
        assert o.kind.value == "ok" and o.reward == expected, (o, detail)


def test_a_container_removed_from_outside_is_unscored(tmp_path):
    skip_unless_available("docker")
    task = clawgym_task(tmp_path)

    async def remove(sandbox):
        import anyio

        await anyio.to_thread.run_sync(lambda: sandbox.container.remove(force=True))

    agent = _Steps([answer(), remove, {"tool": "exec", "args": {"command": "echo still here"}}])
    o, _ = run_one(task, agent, tmp_path / "infra.db", "docker")
    assert o.kind.value == "sandbox_error" and o.reward is None, o


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_fifo_or_socket_the_agent_leaves_is_taken_out_and_the_rollout_scored(backend, tmp_path):
    """A FIFO where the verifier reads a deliverable blocked reward.sh until the verifier timed out, and the
    checks verifier refused it: either way the agent's failure ended unscored."""
    skip_unless_available(backend)
    clawgym = clawgym_task(tmp_path)
    clawgym = clawgym.model_copy(update={"limits": clawgym.limits.model_copy(update={"verifier_timeout_s": 20})})
    native = load_tasks(make_task(tmp_path / "native", "fifo")).tasks[0]
    fifo = {"tool": "exec", "args": {"command": "mkfifo answer.txt done.txt"}}
    litter = {"tool": "exec", "args": {"command": "mkdir -p ro && mkfifo ro/p && chmod 555 ro && python3 -c "
                                                  "\"import socket; socket.socket(socket.AF_UNIX).bind('s.sock')\""}}
    done = {"tool": "write", "args": {"path": "done.txt", "content": "done\n"}}
    for task, calls, expected, removed in (
            (clawgym, [fifo], 0.0, ["answer.txt", "done.txt"]),
            (native, [fifo], 0.0, ["answer.txt", "done.txt"]),
            (clawgym, [answer(), litter], 1.0, ["ro/p", "s.sock"]),
            (native, [done, litter], 1.0, ["ro/p", "s.sock"])):
        db = tmp_path / f"{task.id}-{expected}.db"
        o, detail = run_one(task, ScriptedAgent(calls), db, backend)
        assert o.kind.value == "ok" and o.reward == expected, (task.id, o, detail)
        with Store(db) as store:
            notes = [json.loads(e["payload"]) for e in store.query(
                "SELECT payload FROM events WHERE rollout_id = ? AND kind = 'note'", [o.rollout_id])]
        assert [n["removed"] for n in notes if n.get("event") == "end_turn"] == [removed], notes


FILL_BYTES = "for i in $(seq 1 100); do head -c 8000000 /dev/zero > f$i || break; done; df -k . | tail -1"
# empty files take no bytes: without a limit on their number an agent made 3 million in 30 s (about
# 3 GB of the host's memory) and scoring could not create its files: verifier_error, unscored
FILL_FILES = ("python3 -c \"import os\nos.mkdir('d')\nn = 0\ntry:\n  while True: open('d/%d' % n, 'w').close(); "
              "n += 1\nexcept OSError as e: print(n, e)\"; df -i . | tail -1")


@pytest.mark.parametrize("backend", ["bwrap", "docker"])
@pytest.mark.parametrize("fill", [FILL_BYTES, FILL_FILES], ids=["bytes", "files"])
def test_an_agent_that_fills_its_disk_quota_is_still_scored(backend, fill, tmp_path):
    """Hidden and reward files are written into the quota the agent filled: that was ENOSPC, a verifier_error,
    unscored, for the agent that did the work as for the one that did not."""
    skip_unless_available(backend)
    if os.geteuid() != 0:
        pytest.skip("the disk quota is a tmpfs, mounted as root only (without root it is per file)")
    from clawsdk.sandbox.base import SandboxConfig

    task = clawgym_task(tmp_path)
    fill_call = {"tool": "exec", "args": {"command": fill}}
    for calls, expected in (([answer(), fill_call], 1.0), ([fill_call], 0.0)):
        db = tmp_path / f"fill-{expected}.db"
        [o] = run_sync([task], agent=ScriptedAgent(calls), db=db, sandbox=backend, retries=0,
                       sandbox_config=SandboxConfig(extra={"disk_mb": 64, "files": 5000})).outcomes
        with Store(db) as store:
            out = store.query("SELECT payload FROM events WHERE rollout_id = ? AND kind = 'tool_result'",
                              [o.rollout_id])[-1]["payload"]
        assert "No space left" in out, out  # the agent did fill it
        if fill is FILL_FILES:
            made = int(json.loads(json.loads(out)["content"])["stdout"].split()[0])
            assert 4000 < made < 5000, out  # the limit held, and left scoring its files
        assert o.kind.value == "ok" and o.reward == expected, o


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_command_over_the_systems_length_limit_is_the_agents_error_not_a_broken_sandbox(backend, tmp_path):
    """exec of a 5 MB command failed to spawn (E2BIG) and the sandbox was marked broken: sandbox_error,
    unscored. Now the agent gets exit 126 and a message, and the rollout is scored."""
    skip_unless_available(backend)
    task = clawgym_task(tmp_path)
    huge = {"tool": "exec", "args": {"command": "echo " + "a" * 5_000_000}}
    for calls, expected in (([huge, answer()], 1.0), ([huge], 0.0)):
        db = tmp_path / f"e2big-{expected}.db"
        o, detail = run_one(task, ScriptedAgent(calls), db, backend)
        assert o.kind.value == "ok" and o.reward == expected, (o, detail)
        with Store(db) as store:
            first = json.loads(store.query("SELECT payload FROM events WHERE rollout_id = ? AND kind = 'tool_result' "
                                           "ORDER BY seq LIMIT 1", [o.rollout_id])[0]["payload"])
        assert json.loads(first["content"])["exit_code"] == 126, first  # a shell says the same


@pytest.mark.parametrize("backend", ["bwrap", "docker"])
def test_the_number_of_files_a_sandbox_may_hold_is_limited_by_default(backend, tmp_path):
    """Each file costs the host about 1 KiB of kernel memory whatever its size; the kernel's default
    allowed an agent 3 million of them in a sandbox whose bytes were limited."""
    skip_unless_available(backend)
    if os.geteuid() != 0:
        pytest.skip("the quota is a tmpfs, mounted as root only")
    from clawsdk.sandbox.limits import IsolationOptions

    df = {"tool": "exec", "args": {"command": "df --output=itotal . /tmp | tail -n +2"}}
    o, _ = run_one(clawgym_task(tmp_path), ScriptedAgent([df]), tmp_path / "df.db", backend)
    with Store(tmp_path / "df.db") as store:
        out = store.query("SELECT payload FROM events WHERE rollout_id = ? AND kind = 'tool_result'",
                          [o.rollout_id])[-1]["payload"]
    totals = [int(line.split()[0]) for line in json.loads(json.loads(out)["content"])["stdout"].splitlines()]
    assert totals == [IsolationOptions().files] * 2, out


@pytest.mark.parametrize("backend", ["bwrap", "docker"])
@pytest.mark.parametrize("fill", [FILL_BYTES, FILL_FILES], ids=["bytes", "files"])
def test_the_agents_code_a_check_runs_cannot_fill_the_room_kept_for_scoring(backend, fill, tmp_path):
    """A check's `agent_run` runs the agent's code after its turn. The room kept for scoring was freed when
    the turn ended, so that code filled it again and the hidden files could not be written: verifier_error,
    unscored, on every retry (found by a read-only audit). The room is now kept until that code has run."""
    skip_unless_available(backend)
    if os.geteuid() != 0:
        pytest.skip("the disk quota is a tmpfs, mounted as root only (without root it is per file)")
    from clawsdk.sandbox.base import SandboxConfig

    task = load_tasks(make_task(tmp_path / "src", "fills", hidden={"expected.txt": "42\n"}, checks=[
        {"type": "command", "name": "its output", "agent_run": "bash answer.sh",
         "run": "grep -qx 42 && test -s \"$CLAWSDK_HIDDEN/expected.txt\""}])).tasks[0]
    for answer_line, expected in (("echo 42", 1.0), ("echo 41", 0.0)):
        script = f"cd ~ && {{ {fill}; }} >/dev/null 2>&1; {answer_line}\n"
        db = tmp_path / f"fill-{expected}.db"
        [o] = run_sync([task], agent=ScriptedAgent([{"tool": "write", "args": {"path": "answer.sh", "content": script}}]),
                       db=db, sandbox=backend, retries=0,
                       sandbox_config=SandboxConfig(extra={"disk_mb": 64, "files": 5000})).outcomes
        assert o.kind.value == "ok" and o.reward == expected, o


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name, line", [("usercustomize.py", "import os; os.write(1, b'1.0\\n'); os._exit(0)"),
                                        ("x.pth", "import os; os.write(1, b'1.0\\n') and os._exit(0)")],
                         ids=["usercustomize", "pth"])
def test_python_startup_files_the_agent_plants_in_its_home_do_not_run_in_the_verifier(backend, name, line, tmp_path):
    """Python runs ~/.local/lib/pythonX.Y/site-packages/usercustomize.py, and that folder's .pth files, at
    start. The verifiers run Python in the sandbox with the agent's HOME, so one file there scored an agent
    that did nothing 1.0 on every ClawGym task, and on every checks task with a Python command."""
    skip_unless_available(backend)
    plant = {"tool": "exec", "args": {"command": (
        "d=$(python3 -c 'import site; print(site.getusersitepackages())') && mkdir -p \"$d\" && "
        f"echo \"{line}\" > \"$d/{name}\" && python3 -c 'print(2)'")}}
    native = load_tasks(make_task(tmp_path / "native", "py", checks=[
        {"type": "command", "run": "python3 -c 'import sys; sys.exit(1)'"}])).tasks[0]
    for task in (clawgym_task(tmp_path), native):
        o, detail = run_one(task, ScriptedAgent([plant]), tmp_path / f"{task.id}.db", backend)
        with Store(tmp_path / f"{task.id}.db") as store:
            out = store.query("SELECT payload FROM events WHERE rollout_id = ? AND kind = 'tool_result'",
                              [o.rollout_id])[-1]["payload"]
        # planted, and it runs in the agent's own python
        assert json.loads(json.loads(out)["content"])["stdout"] == "1.0\n", out
        assert o.kind.value == "ok" and o.reward == 0.0, (task.id, o, detail)


SHADOW = {  # a module named like the standard library's, in the workspace: it runs where it is imported
    "clawgym": "import os, sys; sys.stdin.read(); os.write(1, b'1.0\\n'); os._exit(0)",
    "pinchbench": "import os; os.write(1, b'\\n__CLAWSDK_GRADE__{\"result\": {\"x\": 1.0}}\\n'); os._exit(0)",
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fmt", sorted(SHADOW))
def test_a_module_the_agent_writes_does_not_shadow_the_standard_library_in_the_verifier(backend, fmt, tmp_path):
    """ClawGym's reward.sh pipes check.py into `python3 -c 'import json ...'`, and PinchBench's grade()
    runner is `python3 -c`: both ran in the workspace, where `-c` looks for modules first. A json.py the
    agent wrote there scored an agent that did nothing 1.0, on every task of both formats."""
    skip_unless_available(backend)
    from tests.formats.formats_helpers import PINCHBENCH

    task = clawgym_task(tmp_path) if fmt == "clawgym" else \
        {t.id: t for t in load_tasks(f"pinchbench:{PINCHBENCH}").tasks}["task_02_project_layout"]
    shadow = {"tool": "write", "args": {"path": "json.py", "content": SHADOW[fmt]}}
    o, detail = run_one(task, ScriptedAgent([shadow]), tmp_path / "shadow.db", backend)
    assert o.kind.value == "ok" and o.reward is not None and o.reward < 0.5, (o, detail)
    with Store(tmp_path / "shadow.db") as store:
        runs = [json.loads(e["payload"]) for e in store.query(
            "SELECT payload FROM events WHERE rollout_id = ? AND kind = 'sandbox_exec'", [o.rollout_id])]
    assert runs and all("__CLAWSDK_GRADE__{\"result\": {\"x\"" not in r["stdout"] for r in runs), runs


@pytest.mark.parametrize("backend", ["bwrap", "docker"])
def test_the_agents_code_a_verifier_runs_never_sees_the_hidden_files(backend, tmp_path):
    """A check that runs the agent's code (its `agent_run`) runs it before the hidden files exist, and
    stops what it left running before they appear: neither its output nor a process it leaves behind
    can carry a hidden expected value into the score. The check's own stdin is the agent's stdout."""
    skip_unless_available(backend)
    from clawsdk.sandbox.limits import IsolationOptions

    secret = secrets.token_hex(8)
    where = IsolationOptions().hidden_path
    look = ("for f in \"$CLAWSDK_HIDDEN/secret.txt\" " + where + "/secret.txt "
            "$(find / -xdev -name secret.txt 2>/dev/null); do cat \"$f\" 2>/dev/null; done; echo answered\n")
    stay = ("setsid sh -c 'for i in $(seq 400); do if [ -s " + where + "/secret.txt ]; then "
            "cp " + where + "/secret.txt leak.txt; exit; fi; sleep 0.05; done' </dev/null >/dev/null 2>&1 &\n")
    given = "python3 -I -c 'import os, sys; sys.exit(open(os.environ[\"CLAWSDK_HIDDEN\"] + \"/secret.txt\").read()" \
            ".strip() not in sys.stdin.read())'"
    task = load_tasks(make_task(tmp_path / "src", "peek", hidden={"secret.txt": secret + "\n"}, checks=[
        {"type": "command", "name": "its output", "agent_run": "bash answer.sh", "run": given},
        {"type": "command", "name": "its stdout is the check's stdin", "agent_run": "bash answer.sh",
         "run": "grep -qx answered"},
        {"type": "text_equals", "name": "a process it left", "path": "leak.txt", "expected_file": "secret.txt"},
    ])).tasks[0]
    agent = ScriptedAgent([{"tool": "write", "args": {"path": "answer.sh", "content": look + stay}}])
    o, detail = run_one(task, agent, tmp_path / "peek.db", backend)
    with Store(tmp_path / "peek.db") as store:
        scores = {r["name"]: r["score"] for r in store.query(
            "SELECT name, score FROM verdict_scores WHERE rollout_id = ?", [o.rollout_id])}
    assert o.kind.value == "ok", (o, detail)
    assert scores == {"its output": 0.0, "its stdout is the check's stdin": 1.0, "a process it left": 0.0}, detail


@pytest.mark.parametrize("backend", ["bwrap", "docker"])  # local keeps the hidden files on the host anyway
@pytest.mark.parametrize("link", ["/clawsdk/hidden/expected.txt", "w/../../../../../clawsdk/hidden/expected.txt"],
                         ids=["direct", "inside-by-its-text"])
def test_a_deliverable_that_links_to_the_hidden_answer_is_not_read_as_the_agents(tmp_path, backend, link):
    """`out.txt -> /clawsdk/hidden/expected.txt` dangles during the agent's turn; once the hidden files
    exist, a check that compares out.txt with them read the answer through it: 1.0 under bwrap and docker,
    for a file the agent never wrote. end_turn removes links that resolve out of the workspace, as the
    sandbox's kernel resolves them: `up/a/b/c/w` names the workspace, so the second, read as text from
    there, stays inside; the kernel climbs from the workspace itself, to `/`."""
    skip_unless_available(backend)
    import clawsdk.tasks.model as model

    task = model.Task.model_validate({
        "id": "t-link-hidden", "instruction": "Write the answer to out.txt.",
        "hidden": [{"path": "expected.txt", "text": "secret 42\n"}],
        "verifier": {"type": "checks", "checks": [
            {"type": "command", "name": "cmp", "run": 'cmp -s out.txt "$CLAWSDK_HIDDEN/expected.txt"'},
            {"type": "command", "name": "python", "run": "python3 -I -c \"import os, sys; sys.exit(open('out.txt')"
             ".read() != open(os.environ['CLAWSDK_HIDDEN'] + '/expected.txt').read())\""}]}})
    make = f'mkdir -p up/a/b/c && ln -s "$(pwd -P)" up/a/b/c/w && ln -s up/a/b/c/{link.removeprefix("/")} out.txt' \
        if not link.startswith("/") else f"ln -s {link} out.txt"
    agent = ScriptedAgent([{"tool": "exec", "args": {"command": make}}])
    [o] = run_sync([task], agent=agent, sandbox=backend, db=tmp_path / "r.db", retries=0).outcomes
    assert (o.kind.value, o.reward) == ("ok", 0.0), o
    with Store(tmp_path / "r.db") as store:
        note = next(e["payload"] for e in store.events(o.rollout_id) if e["kind"] == "note"
                    and e["payload"].get("event") == "end_turn")
    assert "out.txt" in json.dumps(note), note


DEEP_CHAIN = "python3 -c \"import os\nfor _ in range(1100):\n    os.mkdir('a'); os.chdir('a')\""
LINK = "ln -s /clawsdk/hidden/expected.txt"


@pytest.mark.parametrize("backend", ["bwrap", "docker"])
@pytest.mark.parametrize("make", [
    # the folder made last is listed first (tmpfs): the chain is walked before out/
    f"mkdir out && {LINK} out/answer.txt && chmod 111 .",
    f"mkdir out && {LINK} out/answer.txt && mkdir -p deep && cd deep && {DEEP_CHAIN}",
    f"mkdir 'a\\b' && {LINK} 'a\\b/answer.txt' && ln -s 'a\\b' out"],
    ids=["unlistable-workspace", "deep-chain", "backslash"])
def test_a_link_to_the_hidden_answer_cannot_hide_from_end_turn(tmp_path, backend, make):
    """end_turn's scan ran in the sandbox as the agent's uid: `chmod 111 .` left it nothing to list, and a
    chain of 1,100 folders crashed its os.walk (RecursionError) before it reached the link; the host's walk
    then read `a\\b/answer.txt` as `a/b/answer.txt`, found nothing there, and kept the link as one dangling
    inside. Each left `out/answer.txt` reading /clawsdk/hidden/expected.txt: 1.0 for a file never written.
    end_turn now walks the workspace from the host, through descriptors, at any depth, by the names the
    folders hold."""
    skip_unless_available(backend)
    import clawsdk.tasks.model as model

    task = model.Task.model_validate({
        "id": "t-hide-link", "instruction": "Write the answer to out/answer.txt.",
        "hidden": [{"path": "expected.txt", "text": "secret 42\n"}],
        "verifier": {"type": "checks", "checks": [
            {"type": "command", "name": "cmp", "run": 'cmp -s out/answer.txt "$CLAWSDK_HIDDEN/expected.txt"'}]}})
    agent = ScriptedAgent([{"tool": "exec", "args": {"command": f"{make} && echo hidden"}}])
    [o] = run_sync([task], agent=agent, sandbox=backend, db=tmp_path / "r.db", retries=0).outcomes
    assert (o.kind.value, o.reward) == ("ok", 0.0), o


@pytest.mark.parametrize("backend", ["bwrap", "docker"])
def test_a_workspace_the_agent_locked_is_scored_on_what_it_holds(tmp_path, backend):
    """`chmod 000 .` made every verifier command fail in bwrap before it ran (exit 1), which passed a
    check that expects exit 1 ("no TODO left") for an agent that did nothing; a FIFO in a folder the
    agent made unlistable (`chmod 111`) ended verifier_error. end_turn gives the owner r-x on every
    folder and r on every file, and removes the FIFO: both score 0."""
    skip_unless_available(backend)
    import clawsdk.tasks.model as model

    task = model.Task.model_validate({
        "id": "t-locked", "instruction": "Remove the TODO from app.py and write done to done.txt.",
        "workspace": [{"path": "app.py", "text": "x = 1  # TODO\n"}],
        "verifier": {"type": "checks", "checks": [
            {"type": "command", "name": "no-todo", "run": "grep -q TODO app.py", "expect_exit": 1},
            {"type": "text_contains", "path": "done.txt", "text": "done"}]}})
    for lock in ("chmod 000 .", "mkfifo done.txt && chmod 111 ."):
        agent = ScriptedAgent([{"tool": "exec", "args": {"command": lock}}])
        [o] = run_sync([task], agent=agent, sandbox=backend, db=tmp_path / f"{len(lock)}.db", retries=0).outcomes
        assert (o.kind.value, o.reward) == ("ok", 0.0), (lock, o)


@pytest.mark.parametrize("backend", ["bwrap", "docker"])
def test_startup_files_the_agent_planted_in_home_do_not_reach_the_verifier(tmp_path, backend):
    """The verifier's commands ran with the agent's HOME: `~/.sqliterc` making a TEMP VIEW named like
    the table a check counts, and `~/.jq` redefining `length`, each passed its check for an agent that
    wrote nothing (1.0). end_turn moves the agent's dot files out of HOME (the path to a workspace
    mounted inside it, OpenClaw's ~/.openclaw/workspace, stays)."""
    skip_unless_available(backend)
    import clawsdk.tasks.model as model

    task = model.Task.model_validate({
        "id": "t-home-rc", "instruction": "Make out.db with 3 items, and report.json listing them.",
        "verifier": {"type": "checks", "checks": [
            {"type": "command", "name": "sqlite",
             "run": "test \"$(sqlite3 out.db 'SELECT count(*) FROM items' 2>/dev/null)\" = 3"},
            {"type": "command", "name": "jq", "run": "jq -e '.items | length == 3' report.json"}]}})
    plant = ("printf 'CREATE TEMP VIEW items AS SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3;\\n' > ~/.sqliterc"
             " && echo 'def length: 3;' > ~/.jq && echo kept > ~/notes.txt && echo planted")
    agent = ScriptedAgent([{"tool": "write", "args": {"path": "report.json", "content": '{"items": []}'}},
                           {"tool": "exec", "args": {"command": plant}}])
    db = tmp_path / "r.db"
    [o] = run_sync([task], agent=agent, sandbox=backend, db=db, retries=0).outcomes
    assert (o.kind.value, o.reward) == ("ok", 0.0), o
    with Store(db) as store:
        note = next(e["payload"] for e in store.events(o.rollout_id) if e["kind"] == "note"
                    and e["payload"].get("event") == "end_turn")
    assert {"~/.jq", "~/.sqliterc"} <= set(note["removed"]) and "~/notes.txt" not in note["removed"], note


@pytest.mark.parametrize("backend", ["bwrap", "docker"])
def test_a_grader_the_agents_files_slow_down_scores_0_and_one_slow_on_its_own_stays_unscored(tmp_path, backend):
    """A ClawGym check.py whose regex backtracks on the agent's report ran reward.sh past its timeout:
    verifier_timeout, unscored, so an agent could drop a task it failed from its score. reward.sh runs
    again on the task's untouched files: quick there, the slowness was the agent's (0); slow there too,
    it is the grader's own (still unscored)."""
    skip_unless_available(backend)
    slow_check = ("import json, os, re, sys\n"
                  "p = os.path.join(sys.argv[1], 'answer.txt')\n"
                  "text = open(p).read() if os.path.exists(p) else ''\n"
                  "re.findall(r'(\\d+)+\\.', text)\n"
                  "print(json.dumps({'answer': float(text.strip() == '42')}))\n")

    def with_check(name: str, check: str):
        folder = tmp_path / name / "task_sabotage"
        clawgym_task(tmp_path / name)
        (folder / "reward" / "check.py").write_text(check)
        (task,) = load_tasks(f"clawgym:{folder}").tasks
        entry = json.loads((folder / "data_entry.json").read_text())
        entry["clawsdk"] = {"verifier": {**task.verifier.model_dump(), "timeout_s": 4.0}}
        (folder / "data_entry.json").write_text(json.dumps(entry))
        (task,) = load_tasks(f"clawgym:{folder}").tasks
        return task

    slowing = {"tool": "write", "args": {"path": "answer.txt", "content": "1" * 40}}
    o, detail = run_one(with_check("slowed", slow_check), ScriptedAgent([slowing]), tmp_path / "slow.db", backend)
    assert (o.kind.value, o.reward) == ("ok", 0.0) and "on the agent's files" in detail, (o, detail)
    always_slow = slow_check.replace("text = open(p).read() if os.path.exists(p) else ''", "text = '1' * 40")
    o, _ = run_one(with_check("own", always_slow), ScriptedAgent([answer()]), tmp_path / "own.db", backend)
    assert o.kind.value == "verifier_timeout" and "untouched files too" in (o.error or ""), o
