"""Trainer plugins: `trl-sft` (sft.py) and `trl-grpo` (grpo.py); common.py holds what they
share. The trainers' CLI is core (`clawsdk train`, clawsdk/cli/train_cmd.py) and finds them through the
registry. This module registers them.
"""

from __future__ import annotations

from clawsdk.hookspecs import hookimpl
from clawsdk_plugins.trainers.grpo import TrlGrpoTrainer
from clawsdk_plugins.trainers.sft import TrlSftTrainer

__all__ = ["TrlGrpoTrainer", "TrlSftTrainer", "register_trainers"]


@hookimpl
def register_trainers(register):
    register("trl-sft", TrlSftTrainer)
    register("trl-grpo", TrlGrpoTrainer)
