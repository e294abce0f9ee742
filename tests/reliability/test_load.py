"""Load: 1,000 concurrent rollouts against a real local model server that answers after 1 s."""

import importlib.util
import sys

import pytest

from tests.conftest import REPO


@pytest.mark.slow
def test_a_thousand_concurrent_rollouts_finish_with_no_lock_errors_and_bounded_memory(tmp_path):
    spec = importlib.util.spec_from_file_location("load_bench", REPO / "benchmarks" / "load.py")
    load = importlib.util.module_from_spec(spec)
    sys.modules["load_bench"] = load
    spec.loader.exec_module(load)
    r = load.run_load(1000, 1.0, tmp_path / "load.db")
    print(f"load: {r}")
    assert r["ok"] == 1000 and r["kinds"] == ["ok"]
    assert r["locked"] == 0
    assert r["events"] == 1000 * 7  # 2 model calls, 1 tool call, its result, 1 check: all recorded
    assert r["peak_mb"] < 2000, "memory grew with the number of rollouts"
