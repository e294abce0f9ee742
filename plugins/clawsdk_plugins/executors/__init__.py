"""Executors: in-process (local) and Ray."""
