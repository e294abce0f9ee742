"""Trainers: TRL SFT and GRPO."""

from clawsdk.train.base import resolve_weights as resolve_base  # the old `clawsdk_plugins.trainers` name

__all__ = ["resolve_base"]
