"""`--agent openclaw --sandbox docker` is refused once, before the run, not as a sandbox_error per rollout.

Each rollout ended sandbox_error (unscored), retried --retries times, and the run said only "nothing scored".
"""

from __future__ import annotations

import pytest

from tests.cli.test_cli_errors import call
from tests.conftest import make_task


@pytest.mark.parametrize("sandbox", ["docker"])
def test_openclaw_under_a_sandbox_it_cannot_run_in_is_refused_before_the_run(tmp_path, capsys, fake_install, sandbox):
    make_task(tmp_path / "tasks", "t1")
    make_task(tmp_path / "tasks", "t2")
    db = tmp_path / "store.db"
    argv = ["run", str(tmp_path / "tasks"), "--agent", "openclaw", "--model", "m", "--base-url",
            "http://127.0.0.1:9/v1", "--agent-opt", f"home={fake_install}", "--sandbox", sandbox,
            "--db", str(db)]
    code, out, err = call(argv, capsys)
    assert "Traceback" not in out + err and code == 2, (code, out, err)
    text = " ".join(err.split())
    assert f"runs under --sandbox bwrap or local, not '{sandbox}'" in text, text
    assert not db.exists()  # refused before the run: nothing recorded, no rollout retried
