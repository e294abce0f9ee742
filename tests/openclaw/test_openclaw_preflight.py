"""A CLI agent's run is refused once, before it starts, in one line with exit code 2: a --base-url that does not
answer (every rollout used to end an unscored model_error after minutes of retries), or a sandbox it cannot run in.
"""

from __future__ import annotations

from tests.cli.test_cli_errors import call
from tests.conftest import make_task


def test_a_base_url_that_does_not_answer_is_one_line_before_the_run(tmp_path, capsys, fake_install):
    make_task(tmp_path / "tasks", "t1")
    make_task(tmp_path / "tasks", "t2")
    db = tmp_path / "store.db"
    argv = ["run", str(tmp_path / "tasks"), "--agent", "openclaw", "--model", "m", "--base-url",
            "http://127.0.0.1:9/v1", "--agent-opt", f"home={fake_install}", "--sandbox", "local", "--db", str(db)]
    code, out, err = call(argv, capsys)
    assert "Traceback" not in out + err and code == 2, (code, out, err)
    text = " ".join(err.split())
    assert "--base-url http://127.0.0.1:9/v1 cannot be reached" in text, text
    assert len([line for line in err.splitlines() if line.startswith("error:")]) == 1, err
    assert not db.exists()  # refused before the run: nothing recorded, no rollout retried
