"""Harbor task folders: read, written back with the same hash, and run under bwrap and docker with the right endings.

The fixtures (tests/fixtures/harbor, our own) are: an image of its own built from the sandbox image
(hello-image), a solution with a helper it names by /solution/ (primes), a "solution" that writes the reward
files itself (prewrites-reward), sub-scores in reward.json (subscores), a test.sh that writes no reward
(missing-reward) and a docker-compose task (compose, refused at load).
"""

from __future__ import annotations

import logging
import tomllib

import pytest
from clawsdk_plugins.sources.harbor import HarborSource, load_task, rewards_of

from clawsdk import Store, run_sync
from clawsdk.tasks.model import Task
from clawsdk.tasks.sources import load_tasks
from tests.conftest import FIXTURES
from tests.sandbox.sandbox_backends import skip_unless_available

HARBOR = FIXTURES / "harbor"


def _tasks() -> dict[str, Task]:
    loaded = load_tasks(f"harbor:{HARBOR}")
    return {t.id: t for t in loaded.tasks}


def test_a_harbor_folder_maps_to_a_task_and_a_compose_task_is_refused_in_one_line():
    loaded = load_tasks(f"harbor:{HARBOR}")
    (error,) = loaded.errors
    assert error.path.endswith("compose/environment/docker-compose.yaml")
    assert "docker-compose task (several containers) is not supported" in error.message
    tasks = {t.id: t for t in loaded.tasks}
    assert sorted(tasks) == ["breaks-the-tests", "hello-image", "missing-reward", "prewrites-reward", "primes",
                             "subscores"]
    hello = tasks["hello-image"]
    assert hello.instruction.startswith("For each name in /app/names.txt")
    assert (hello.category, hello.difficulty, hello.tags) == ("content & domain", "easy", ["files", "image"])
    assert hello.limits.timeout_s == 120 and hello.verifier.model_dump()["timeout_s"] == 60
    env = hello.environment
    assert env.dockerfile.startswith("FROM clawsdk-sandbox:latest") and [f.path for f in env.context] == ["names.txt"]
    assert (env.workdir, env.tests_dir, env.logs_dir) == ("/app", "/tests", "/logs")
    assert (env.cpus, env.memory_mb, env.storage_mb) == (1, 2048, 1024)
    # what the Dockerfile copies into the workdir is the workspace too (the workspace is mounted there)
    assert {f.path: f.data for f in hello.workspace} == {"names.txt": b"Ada\nLin\n"}
    assert [f.path for f in tasks["primes"].hidden] == ["check_primes.py", "test.sh"]
    (call,) = tasks["primes"].solution
    assert call.tool == "exec" and "bash /tmp/.clawsdk-solution/solve.sh" in call.args["command"]
    assert hello.network is None  # no-network in both phases: the default, so the hash is as without it


def test_network_modes_map_and_a_public_network_is_never_given(tmp_path, caplog):
    folder = tmp_path / "net"
    folder.mkdir()
    (folder / "instruction.md").write_text("Fetch it.\n")
    (folder / "tests").mkdir()
    (folder / "tests" / "test.sh").write_text("echo 1 > /logs/verifier/reward.txt\n")
    (folder / "task.toml").write_text('[environment]\nnetwork_mode = "public"\n[agent]\nnetwork_mode = "allowlist"\n'
                                      'allowed_hosts = ["PyPI.org."]\n')
    with caplog.at_level(logging.WARNING):
        task = load_task(folder)
    assert task.network.agent.model_dump() == {"mode": "allowlist", "hosts": ["pypi.org"]}
    assert task.network.verifier.mode == "none"  # public asked, none given, and said
    assert any("verifier phase asks for a public network" in r.getMessage() for r in caplog.records)
    assert task.metadata["harbor"]["warnings"]


@pytest.mark.parametrize("name", ["hello-image", "primes", "prewrites-reward", "subscores", "missing-reward"])
def test_harbor_to_clawsdk_to_harbor_keeps_the_hash(tmp_path, name):
    task = _tasks()[name]
    written, errors = HarborSource().export([task], tmp_path)
    assert (written, errors) == (1, [])
    again = load_task(tmp_path / name)
    assert again.hash == task.hash
    config = tomllib.loads((tmp_path / name / "task.toml").read_text())
    assert config["agent"]["timeout_sec"] == task.limits.timeout_s and (tmp_path / name / "tests/test.sh").is_file()


def test_clawsdk_task_to_harbor_to_clawsdk_keeps_the_hash(tmp_path):
    task = Task.model_validate({
        "id": "native-report", "instruction": "Write report.txt with the total of data.csv.",
        "category": "analysis & reasoning", "tags": ["csv"],
        "workspace": [{"path": "data.csv", "text": "a\n1\n2\n"}, {"path": "sub/notes.md", "text": "# n\n"}],
        "hidden": [{"path": "test.sh", "text": 'grep -qx 3 /app/report.txt && r=1 || r=0; echo $r > '
                                             '/logs/verifier/reward.txt\n', "executable": True}],
        "solution": [{"tool": "read", "args": {"path": "data.csv"}},
                     {"tool": "write", "args": {"path": "report.txt", "content": "3\n"}}],
        "verifier": {"type": "harbor", "timeout_s": 30},
        "limits": {"timeout_s": 90, "max_tool_calls": 50},
        "network": {"agent": {"mode": "allowlist", "hosts": ["example.org"]}},
        "environment": {"workdir": "/app", "tests_dir": "/tests", "logs_dir": "/logs"},
    })
    HarborSource().export([task], tmp_path)
    folder = tmp_path / "native-report"
    assert load_task(folder).hash == task.hash
    # a Harbor reader gets a runnable task: the workspace copied in by the Dockerfile, solve.sh from the calls
    dockerfile = (folder / "environment" / "Dockerfile").read_text()
    assert "COPY clawsdk-workspace/ /app/" in dockerfile
    assert (folder / "environment/clawsdk-workspace/sub/notes.md").read_text() == "# n\n"
    assert "notes" not in (folder / "task.toml").read_text()  # the workspace is not carried twice
    assert "base64 -d > report.txt" in (folder / "solution" / "solve.sh").read_text()
    config = tomllib.loads((folder / "task.toml").read_text())
    assert config["agent"]["network_mode"] == "allowlist" and config["agent"]["allowed_hosts"] == ["example.org"]


def test_a_task_harbor_cannot_score_is_refused_not_written(tmp_path):
    task = Task(id="checks", instruction="x", verifier={"checks": [{"type": "file_exists", "path": "a"}]})
    written, (error,) = HarborSource().export([task], tmp_path)
    assert written == 0 and "no Harbor form" in error.message and not (tmp_path / "checks").exists()


def test_rewards_are_read_as_harbor_reads_them():
    assert rewards_of("reward.txt", "0.75\n")[0] == 0.75
    score, subs, _ = rewards_of("reward.json", '{"reward": 0.5, "style": 1, "tests": 0}')
    assert score == 0.5 and {s.name: s.score for s in subs} == {"style": 1.0, "tests": 0.0}
    assert rewards_of("reward.json", '{"a": 1, "b": 0}')[0] == 0.5  # no "reward": the mean
    for name, text in (("reward.txt", ""), ("reward.txt", "pass"), ("reward.json", '{"reward": NaN}'),
                       ("reward.json", '{"reward": "1"}')):
        with pytest.raises(Exception, match=r"empty|not a number|not a finite number"):
            rewards_of(name, text)


ENDINGS = {  # task -> (ending, reward)
    "primes": ("ok", 1.0),
    "prewrites-reward": ("ok", 0.0),  # the reward the "solution" wrote was gone before the tests ran
    "subscores": ("ok", 0.5),
    "missing-reward": ("verifier_error", None),  # unscored, never a 0
    # an empty reward on the agent's files (its json.py ended the check), one on the untouched task: a 0
    "breaks-the-tests": ("ok", 0.0),
}


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["bwrap", "docker"])
def test_harbor_tasks_run_with_the_right_endings(backend, tmp_path):
    skip_unless_available(backend)
    db = tmp_path / "store.db"
    result = run_sync(list(_tasks().values()), agent="oracle", sandbox=backend, db=db, run_id="h", retries=0)
    with Store(db) as store:
        rows = {r["task_id"]: r for r in store.rollouts("h")}
        got = {t: (r["failure_kind"], r["reward"]) for t, r in rows.items()}
        subs = {s["name"]: s["score"] for s in store.verdict(rows["subscores"]["id"])["subscores"]}
    expected = dict(ENDINGS)
    if backend == "docker":  # its image built from the sandbox image, FROM a local image, once per content
        expected["hello-image"] = ("ok", 1.0)
        assert not result.task_errors
    else:  # bwrap builds no image: said once, and nothing of it runs
        (refused,) = result.task_errors
        assert refused.task_id == "hello-image" and "builds no images" in refused.message
    assert got == expected
    assert subs == {"name": 1.0, "port": 0.0}
    assert not rows["missing-reward"]["scored"]
    assert "wrote no reward" in rows["missing-reward"]["error"]
    with Store(db) as store:
        detail = store.verdict(rows["breaks-the-tests"]["id"])["detail"]
    assert "wrote a reward that cannot be read (reward.txt is empty) on the agent's files; on the task's " \
           "untouched files it did, in a fresh sandbox (reward 0)" in detail


def test_the_harbor_source_passes_the_task_source_kit():
    from clawsdk.testing import check_task_source

    check_task_source(HarborSource(), HARBOR / "primes", broken=HARBOR / "compose", name="harbor").assert_ok()
