"""Verifiers: the core's checks, rubric judge and hybrid, registered by name."""
