"""The ids of runs and rollouts: a rollout's id is fixed by its run, task and sample, so a rerun of the same run
id finds the rollouts it already has (resume), and every writer (the runner, `serve`, the proxy) names one
rollout the same way."""

from __future__ import annotations

import datetime as dt
import hashlib
import secrets


def rollout_id(run_id: str, task_id: str, sample: int) -> str:
    digest = hashlib.sha256(f"{run_id}\x00{task_id}\x00{sample}".encode()).hexdigest()
    return "r" + digest[:15]


def new_run_id() -> str:
    return dt.datetime.now().strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(3)
