"""The trainer contract: `Trainer` turns exported data into a checkpoint recorded in the store.

Trainers are plugins (`register_trainers`); the built-ins are TRL SFT and GRPO
(clawsdk_plugins.trainers: sft, grpo). `clawsdk train` finds them through the registry.
"""

from clawsdk.train.base import Trainer, TrainResult, resolve_weights

__all__ = ["TrainResult", "Trainer", "resolve_weights"]
