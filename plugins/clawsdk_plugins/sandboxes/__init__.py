"""Sandboxes: local, bwrap, docker (its container pool and per-task images)."""
