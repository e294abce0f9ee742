"""Trainers: TRL SFT and GRPO."""
