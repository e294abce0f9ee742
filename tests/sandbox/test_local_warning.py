"""Choosing the `local` sandbox says what it exposes; an isolating backend says nothing of the kind."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from sandbox_backends import skip_unless_available

from clawsdk.cli import cli
from tests.conftest import make_task


@pytest.mark.parametrize("backend", ["local", "bwrap"])
def test_run_with_local_warns_what_it_exposes(backend, tmp_path, db):
    skip_unless_available(backend)
    make_task(tmp_path / "tasks", "alpha")
    r = CliRunner().invoke(cli, ["run", str(tmp_path / "tasks"), "--sandbox", backend, "--db", str(db), "--json"],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    said = " ".join(r.stderr.split())
    if backend == "local":
        assert "isolates nothing" in said and "file system" in said and "hidden verifier files" in said
        assert "network" in said and ("as root" in said or "as you" in said)
    else:
        assert "isolates nothing" not in said
