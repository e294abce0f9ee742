"""clawsdk's ClawGym score equals what the task's own reward.sh prints at /root/.openclaw/workspace."""

from __future__ import annotations

import os
import tempfile

import anyio
import pytest

from clawsdk.plugins import get_registry
from clawsdk.runtime.recorder import Recorder
from clawsdk.runtime.rollout import attempt_rollout
from clawsdk.sandbox.base import SandboxConfig
from clawsdk.tasks.sources import load_tasks
from clawsdk_plugins.agents import ScriptedAgent
from tests.sandbox.sandbox_backends import skip_unless_available
from tests.formats.formats_helpers import CLAWGYM, MOUNT, expected_outputs, openclaw_mount, reference_score

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not CLAWGYM.is_dir(),
                                reason="the reference run needs root (it writes /root/.openclaw) and the sample")

# scores of the handful that give credit untouched, and one with hand-written outputs
FAST = ("task_0091", "task_0119", "task_0829", "task_1232")

RFC_OUTPUTS = {
    "webcache/rfc-index.xml": "<rfc-index></rfc-index>\n",
    "data/rfcs.jsonl": '{"rfc_number": 9000, "title": "QUIC TLS transport", "authors": ["A"], "year": 2021, '
                       '"current_status": "PROPOSED STANDARD", "abstract": "QUIC over TLS"}\n',
    "reports/top_rfcs.csv": "rfc_number,title,year,current_status,score,matched_keywords\n",
    "reports/summary.md": "# Summary\n\nTotal RFCs parsed: 1\n\n## Repro\n\nbash scripts/run.sh input/filters.yaml\n",
    "scripts/run.sh": "#!/usr/bin/env bash\necho run\n",
}


def _ours(task, files: dict[str, str], sandbox: str = "local", root: str | None = None):
    calls = [{"tool": "write", "args": {"path": p, "content": c}} for p, c in files.items()]
    registry = get_registry()
    make = registry.get("sandboxes", sandbox)
    recorder = Recorder(None, f"ref-{task.id}")
    result = anyio.run(lambda: attempt_rollout(task, ScriptedAgent(calls), lambda: make(SandboxConfig(root=root)),
                                               recorder, registry))
    assert result.kind.value == "ok", result.error
    return result.verdict


def _compare(task_ids, modify) -> list[tuple]:
    loaded = load_tasks(f"clawgym:{CLAWGYM}")
    assert not loaded.errors
    tasks = {t.id: t for t in loaded.tasks}
    rows = []
    with openclaw_mount():
        # ours first, with nothing at /root/.openclaw: the local sandbox must never reach for it
        assert not MOUNT.exists()
        ours = {}
        for tid in task_ids:
            files = modify(tasks[tid])
            ours[tid] = (files, _ours(tasks[tid], files))
        assert not MOUNT.exists(), "the local sandbox touched the host's /root/.openclaw/workspace"
        for tid in task_ids:
            files, verdict = ours[tid]
            ref = reference_score(CLAWGYM / tid, files)
            rows.append((tid, verdict.score, ref, verdict))
    return rows


def _assert_equal(rows):
    bad = [(tid, ours, ref) for tid, ours, ref, _ in rows if float(ref) != ours]
    assert not bad, f"clawsdk score != reward.sh output: {bad}"


def test_untouched_and_modified_workspaces_score_what_reward_sh_prints():
    rows = _compare(FAST, lambda t: {})
    _assert_equal(rows)
    by_id = {r[0]: r for r in rows}
    assert by_id["task_0091"][1] == 0.0
    assert by_id["task_0119"][1] > 0  # the real data gives credit untouched: reported, not hidden
    # sub-scores from check.py's dict are kept, and their mean is the score
    verdict = by_id["task_0119"][3]
    assert len(verdict.subscores) > 5
    assert abs(sum(s.score for s in verdict.subscores) / len(verdict.subscores) - verdict.score) < 1e-9
    assert "scenarios_loaded" in {s.name for s in verdict.subscores}

    modified = _compare(["task_0091"], lambda t: RFC_OUTPUTS)
    _assert_equal(modified)
    assert modified[0][1] > 0.3  # several checks now pass
    named = {s.name: s.score for s in modified[0][3].subscores}
    assert named["rfcs_jsonl_structure_valid"] == 1.0 and named["manifest_present"] == 0.0


@pytest.mark.slow
def test_every_sample_task_matches_reward_sh_untouched_and_with_outputs_written():
    ids = sorted(p.name for p in CLAWGYM.iterdir() if (p / "data_entry.json").is_file())
    _assert_equal(_compare(ids, lambda t: {}))
    rows = _compare(ids, lambda t: expected_outputs(t.instruction))
    _assert_equal(rows)
    assert sum(1 for r in rows if r[1] > 0) >= 10  # the edits really change scores


def test_isolating_sandbox_runs_the_scripts_unchanged_at_the_mount():
    skip_unless_available("bwrap")  # in CI, a failure
    task = next(t for t in load_tasks(f"clawgym:{CLAWGYM}/task_0091").tasks)
    # under /tmp itself: pytest's own temp folders are closed to the sandbox's unprivileged user
    with tempfile.TemporaryDirectory() as root:
        verdict = _ours(task, RFC_OUTPUTS, sandbox="bwrap", root=root)
    assert verdict.score > 0.3, verdict.detail
    with openclaw_mount():
        assert float(reference_score(CLAWGYM / "task_0091", RFC_OUTPUTS)) == verdict.score
