"""weekly-meeting-schedule's partial credit counts meetings, not rule checks: a schedule written without
reading the calendars (one meeting a day at 10:00) satisfied 93% of the individual checks, most of which
hold by chance, and scored 0.95 without passing (found by a read-only audit with cheap agents)."""

from __future__ import annotations

import json
from pathlib import Path

from clawsdk_plugins.agents.builtin import ScriptedAgent

from clawsdk import run_sync
from clawsdk.tasks.sources import load_tasks

TASK = Path(__file__).resolve().parents[2] / "examples" / "tasks" / "weekly-meeting-schedule"
REFERENCE = {"Sprint kickoff": ("Wed", 13), "Ana/Dev 1:1": ("Wed", 14), "Client demo": ("Thu", 9),
             "Hiring sync": ("Thu", 11), "Design review": ("Fri", 9), "Retro": ("Fri", 11)}


def score(tmp_path: Path, schedule: dict, name: str) -> float:
    content = json.dumps({k: {"day": d, "start": f"{h:02d}:00"} for k, (d, h) in schedule.items()})
    agent = ScriptedAgent([{"tool": "write", "args": {"path": "schedule.json", "content": content}}])
    [o] = run_sync(load_tasks(str(TASK)).tasks, agent=agent, db=tmp_path / f"{name}.db", sandbox="local").outcomes
    assert o.kind.value == "ok"
    return o.reward


def test_a_schedule_written_blind_scores_the_meetings_it_places_right_by_chance(tmp_path):
    order = ["Sprint kickoff", "Design review", "Client demo", "Ana/Dev 1:1", "Hiring sync", "Retro"]  # meetings.md's
    blind = {k: (["Mon", "Tue", "Wed", "Thu", "Fri"][i % 5], 10) for i, k in enumerate(order)}
    assert abs(score(tmp_path, blind, "blind") - 2 / 6) < 1e-3  # it was 0.95


def test_one_meeting_misplaced_costs_that_meeting(tmp_path):
    assert score(tmp_path, REFERENCE, "ref") == 1.0
    moved = REFERENCE | {"Ana/Dev 1:1": ("Thu", 13)}  # Dev is on call from 13:00 on Thursday
    assert abs(score(tmp_path, moved, "moved") - 5 / 6) < 1e-3
