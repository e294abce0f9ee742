"""The end_turn note says what happened to each thing taken out: the workspace's unreadable entries were
removed, what the agent left in HOME (~/.cache, ~/.openclaw/state under OpenClaw) was moved aside; it
gave the workspace's reason ("FIFOs, sockets and devices") for both."""

from __future__ import annotations

import anyio

from clawsdk.runtime.rollout import _end_turn


class FakeSandbox:
    async def end_turn(self):
        return ["out.fifo", "~/.cache", "~/.openclaw/state"]


class FakeRecorder:
    def __init__(self):
        self.notes = []

    async def record(self, event):
        self.notes.append((event.kind, event.payload()))


def test_the_note_tells_removed_workspace_entries_from_what_moved_out_of_home():
    rec = FakeRecorder()
    anyio.run(_end_turn, FakeSandbox(), rec)
    ((kind, note),) = rec.notes
    assert kind == "note" and note["removed"] == ["out.fifo", "~/.cache", "~/.openclaw/state"] and note["count"] == 3
    why = note["why"]
    assert "FIFOs, sockets, devices" in why and "removed" in why and "~/ paths" in why and "moved aside" in why
    assert not why.startswith("FIFOs, sockets and devices the agent left")
