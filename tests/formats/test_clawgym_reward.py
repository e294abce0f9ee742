"""clawsdk's ClawGym score equals what the task's own reward.sh prints at /root/.openclaw/workspace."""

from __future__ import annotations

import os
import tempfile

import anyio
import pytest
from clawsdk_plugins.agents.builtin import ScriptedAgent

from clawsdk.plugins import get_registry
from clawsdk.runtime.rollout import attempt_rollout
from clawsdk.sandbox.base import SandboxConfig
from clawsdk.store.recorder import Recorder
from clawsdk.tasks.sources import load_tasks
from tests.conftest import needs_shared_data
from tests.formats.formats_helpers import (
    CLAWGYM,
    MOUNT,
    SAMPLE_CLAWGYM,
    expected_outputs,
    openclaw_mount,
    reference_score,
)
from tests.sandbox.sandbox_backends import skip_unless_available

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the reference run needs root (it writes /root/.openclaw)")

# task_0001 gives 0 untouched; task_0002 gives credit for the untouched inputs
FAST = ("task_0001", "task_0002")

STOCK_OUTPUTS = {
    "reports/reorder.csv": ("sku,name,on_hand,reorder_level,order_qty\nA-100,Hex bolts M6,40,100,160\n"
                            "B-200,Cable ties,15,50,90\nC-300,Duct tape,8,20,40\n"),
    "reports/summary.md": "# Reorder\n\nItems to reorder: 3\nTotal units: 280\n",  # the total is 290
    "scripts/reorder.sh": "#!/usr/bin/env bash\npython3 scripts/reorder.py\n",
}

# the real samples: scores of the handful that give credit untouched, and one with hand-written outputs
SAMPLE_FAST = ("task_0091", "task_0119", "task_0829", "task_1232")

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


def _compare(data, task_ids, modify) -> list[tuple]:
    loaded = load_tasks(f"clawgym:{data}")
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
            ref = reference_score(data / tid, files)
            rows.append((tid, verdict.score, ref, verdict))
    return rows


def _assert_equal(rows):
    bad = [(tid, ours, ref) for tid, ours, ref, _ in rows if float(ref) != ours]
    assert not bad, f"clawsdk score != reward.sh output: {bad}"


def _automated(data) -> list[str]:
    return sorted(t.id for t in load_tasks(f"clawgym:{data}").tasks if t.verifier.type == "clawgym")


def test_untouched_and_modified_workspaces_score_what_reward_sh_prints():
    rows = _compare(CLAWGYM, FAST, lambda t: {})
    _assert_equal(rows)
    by_id = {r[0]: r for r in rows}
    assert by_id["task_0001"][1] == 0.0
    assert by_id["task_0002"][1] > 0  # credit untouched: reported, not hidden
    # sub-scores from check.py's dict are kept, and their mean is the score
    verdict = by_id["task_0002"][3]
    assert len(verdict.subscores) > 5
    assert abs(sum(s.score for s in verdict.subscores) / len(verdict.subscores) - verdict.score) < 1e-9
    assert {s.name: s.score for s in verdict.subscores}["inputs_intact"] == 1.0

    # check.py names the workspace by its absolute mount path: rewritten for the local sandbox
    modified = _compare(CLAWGYM, ["task_0001"], lambda t: STOCK_OUTPUTS)
    _assert_equal(modified)
    assert modified[0][1] == pytest.approx(0.7)  # 7 of 10 checks
    named = {s.name: s.score for s in modified[0][3].subscores}
    assert named["reorder_rows_correct"] == 1.0 and named["summary_total"] == 0.0
    assert named["manifest_present"] == 0.0


def test_every_fixture_task_matches_reward_sh_untouched_and_with_outputs_written():
    ids = _automated(CLAWGYM)
    _assert_equal(_compare(CLAWGYM, ids, lambda t: {}))
    _assert_equal(_compare(CLAWGYM, ids, lambda t: expected_outputs(t.instruction)))


@needs_shared_data
def test_sample_untouched_and_modified_workspaces_score_what_reward_sh_prints():
    rows = _compare(SAMPLE_CLAWGYM, SAMPLE_FAST, lambda t: {})
    _assert_equal(rows)
    by_id = {r[0]: r for r in rows}
    assert by_id["task_0091"][1] == 0.0
    assert by_id["task_0119"][1] > 0  # the real data gives credit untouched: reported, not hidden
    verdict = by_id["task_0119"][3]
    assert len(verdict.subscores) > 5
    assert abs(sum(s.score for s in verdict.subscores) / len(verdict.subscores) - verdict.score) < 1e-9
    assert "scenarios_loaded" in {s.name for s in verdict.subscores}

    modified = _compare(SAMPLE_CLAWGYM, ["task_0091"], lambda t: RFC_OUTPUTS)
    _assert_equal(modified)
    assert modified[0][1] > 0.3  # several checks now pass
    named = {s.name: s.score for s in modified[0][3].subscores}
    assert named["rfcs_jsonl_structure_valid"] == 1.0 and named["manifest_present"] == 0.0


@pytest.mark.slow
@needs_shared_data
def test_every_sample_task_matches_reward_sh_untouched_and_with_outputs_written():
    ids = sorted(p.name for p in SAMPLE_CLAWGYM.iterdir() if (p / "data_entry.json").is_file())
    _assert_equal(_compare(SAMPLE_CLAWGYM, ids, lambda t: {}))
    rows = _compare(SAMPLE_CLAWGYM, ids, lambda t: expected_outputs(t.instruction))
    _assert_equal(rows)
    assert sum(1 for r in rows if r[1] > 0) >= 10  # the edits really change scores


def test_isolating_sandbox_runs_the_scripts_unchanged_at_the_mount():
    skip_unless_available("bwrap")  # in CI, a failure
    task = next(t for t in load_tasks(f"clawgym:{CLAWGYM}/task_0001").tasks)
    # under /tmp itself: pytest's own temp folders are closed to the sandbox's unprivileged user
    with tempfile.TemporaryDirectory() as root:
        verdict = _ours(task, STOCK_OUTPUTS, sandbox="bwrap", root=root)
    assert verdict.score == pytest.approx(0.7), verdict.detail
    with openclaw_mount():
        assert float(reference_score(CLAWGYM / "task_0001", STOCK_OUTPUTS)) == verdict.score
