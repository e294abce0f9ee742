"""YAML reads yes/no/on/off/true/false as booleans, and a boolean where a number belongs was taken as 1 or 0:
`timeout_s: yes` gave every rollout one second, each ending charged to the agent as an agent_timeout."""

from __future__ import annotations

import re

import pytest

from clawsdk import load_task
from clawsdk.errors import TaskFormatError

TASK_YAML = """\
id: flags
instruction: Write done.txt containing done.
limits: {limits}
verifier:
  type: {verifier}
"""
CHECKS = "checks\n  checks:\n    - {{type: file_exists, path: done.txt, weight: {weight}}}"
RUBRIC = "rubric\n  judge: openai:gpt\n  criteria: [{{name: tidy, description: tidy, weight: 1}}]\n  retries: {retries}"


@pytest.mark.parametrize("limits, verifier, field", [
    ("{timeout_s: yes}", CHECKS.format(weight=1), "limits.timeout_s: is true"),
    ("{max_tool_calls: on}", CHECKS.format(weight=1), "limits.max_tool_calls: is true"),
    ("{}", CHECKS.format(weight="no"), "verifier.checks[0].weight: is false"),
    ("{}", RUBRIC.format(retries="off"), "retries: is false"),
])
def test_a_boolean_where_a_number_belongs_is_refused_with_its_field(tmp_path, limits, verifier, field):
    (tmp_path / "task.yaml").write_text(TASK_YAML.format(limits=limits, verifier=verifier))
    with pytest.raises(TaskFormatError, match=re.escape(f"{field} where a number belongs")):
        load_task(tmp_path)


def test_numbers_still_load_quoted_or_not(tmp_path):
    (tmp_path / "task.yaml").write_text(TASK_YAML.format(limits="{timeout_s: 30, max_tool_calls: '7'}",
                                                         verifier=CHECKS.format(weight=0.5)))
    task = load_task(tmp_path)
    assert (task.limits.timeout_s, task.limits.max_tool_calls) == (30.0, 7)
