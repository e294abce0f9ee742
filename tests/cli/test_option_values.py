"""A wrong --agent-opt or --executor-opt value is refused before the run, naming the option; it used to be
recorded as the agent scoring 0 on every task (temperature=hot), or reported as a bug in clawsdk."""

from __future__ import annotations

import pytest

from tests.cli.test_cli_errors import assert_one_line_error, call
from tests.conftest import make_task


@pytest.mark.parametrize("opt,named", [
    (["--agent", "tool-loop", "--agent-opt", "temperature=hot"], "temperature must be a number, not 'hot'"),
    (["--agent", "tool-loop", "--agent-opt", "max_turns=abc"], "max_turns must be a whole number, not 'abc'"),
    (["--agent", "tool-loop", "--agent-opt", "max_tokens=0"], "max_tokens must be a whole number of at least 1"),
    (["--agent", "tool-loop", "--agent-opt", "tools=5"], "tools must be tool names"),
    (["--agent", "scripted", "--agent-opt", "foo=1"], "--agent-opt: agent 'scripted' does not accept these options (foo)"),
    (["--executor-opt", "foo=bar"], "--executor-opt: executor 'local' does not accept these options (foo"),
])
def test_a_wrong_option_is_refused_before_anything_runs(tmp_path, capsys, opt, named):
    make_task(tmp_path / "tasks", "t1")
    db = tmp_path / "store.db"
    argv = ["run", str(tmp_path / "tasks"), "--sandbox", "local", "--db", str(db), *opt]
    code, out, err = call(argv, capsys)
    assert_one_line_error(code, out, err, argv)
    text = " ".join(err.split())
    assert named in text and "a bug in clawsdk" not in text, text
    assert not db.exists()  # nothing ran, nothing recorded as the agent's zero


@pytest.mark.parametrize("opt,named", [
    (["--min-reward", "nan"], "'nan' is not a finite number"),
    (["--max-tool-error-rate", "nan"], "'nan' is not a finite number"),
    (["--failure-kind", "bogus"], "'bogus' is not one of 'ok'"),
])
def test_data_select_refuses_a_filter_that_would_compare_false_with_everything(tmp_path, capsys, opt, named):
    # nan kept or dropped every rollout without a word; an unknown kind matched none
    argv = ["data", "select", "--db", str(tmp_path / "store.db"), *opt]
    code, out, err = call(argv, capsys)
    assert_one_line_error(code, out, err, argv)
    assert named in " ".join(err.split())


def test_a_reward_is_never_shown_as_perfect_or_zero_when_it_is_not():
    from clawsdk.cli.common import fmt_reward

    assert [fmt_reward(v) for v in (1.0, 0.996, 0.994, 0.5, 0.004, 0.0, None)] == [
        "1.00", ">0.99", "0.99", "0.50", "<0.01", "0.00", "-"]


@pytest.mark.parametrize("opt,named", [
    (["--epochs", "0"], "'--epochs': 0.0 is not in the range x>0"),
    (["--epochs", "-1"], "'--epochs': -1.0 is not in the range x>0"),
    (["--max-steps", "0"], "'--max-steps': 0 is not -1 (train by --epochs) or a number of steps of at least 1"),
    (["--lr", "-0.01"], "'--lr': -0.01 is not in the range x>0"),
])
def test_training_that_could_not_learn_is_refused_before_the_model_loads(tmp_path, opt, named):
    """--epochs 0, --max-steps 0 or a negative --lr trained nothing (the saved weights were the base model's) and
    printed `trained ckpt-...`, exit 0; a negative --lr failed in torch without naming the option."""
    from click.testing import CliRunner

    from clawsdk.cli import cli

    out = tmp_path / "out"
    res = CliRunner().invoke(cli, ["train", "sft", "-d", str(tmp_path / "no-such-dataset"), "-o", str(out), *opt])
    assert res.exit_code == 2 and named in res.output, res.output
    assert not out.exists()
