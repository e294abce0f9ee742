"""Load: 1,000 concurrent rollouts against a real local model server that answers after 1 s."""

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO


@pytest.mark.slow
def test_a_thousand_concurrent_rollouts_finish_with_no_lock_errors_and_bounded_memory(tmp_path):
    # in a process of its own, measured by its own memory map (VmHWM): peak RSS is a process's whole life,
    # and in the suite's process it counted whatever earlier tests had loaded (2,025 MB in one CI run,
    # 274 MB for the load alone); ru_maxrss even carries the parent's across fork and exec (1,826 MB)
    code = ("import importlib.util, json, sys\nfrom pathlib import Path\n"
            f"spec = importlib.util.spec_from_file_location('load_bench', {str(REPO / 'benchmarks' / 'load.py')!r})\n"
            "load = importlib.util.module_from_spec(spec)\nsys.modules['load_bench'] = load\n"
            "spec.loader.exec_module(load)\n"
            f"print(json.dumps(load.run_load(1000, 1.0, Path({str(tmp_path / 'load.db')!r}))))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    r = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"load: {r}")
    assert r["ok"] == 1000 and r["kinds"] == ["ok"]
    assert r["locked"] == 0
    assert r["events"] == 1000 * 7  # 2 model calls, 1 tool call, its result, 1 check: all recorded
    assert r["peak_mb"] < 1000, "memory grew with the number of rollouts"
