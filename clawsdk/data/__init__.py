"""From the store to training data: selection, export (SFT, preference, RL) and lineage."""

from clawsdk.data.export import (
    FORMAT_VERSION,
    Export,
    export_preferences,
    export_rl,
    export_sft,
    load_hf,
    load_rows,
)
from clawsdk.data.select import Selection, SelectionResult, load_candidates, select
from clawsdk.data.trajectory import PromptStyle, Trajectory, trajectory_from_events

__all__ = [
    "FORMAT_VERSION",
    "Export",
    "PromptStyle",
    "Selection",
    "SelectionResult",
    "Trajectory",
    "export_preferences",
    "export_rl",
    "export_sft",
    "load_candidates",
    "load_hf",
    "load_rows",
    "select",
    "trajectory_from_events",
]
