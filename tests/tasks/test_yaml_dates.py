"""An unquoted date in a task.yaml is the text written: as a datetime.date it equalled no answer."""

from __future__ import annotations

from clawsdk_plugins.agents.builtin import ScriptedAgent

from clawsdk import load_task, run_sync, save_task

TASK_YAML = """\
id: dated
instruction: Write the meeting's date to answer.json and to date.txt.
verifier:
  type: checks
  checks:
    - {type: json_equals, path: answer.json, expected: {date: %(date)s, at: %(at)s}}
    - {type: text_equals, path: date.txt, text: %(date)s}
metadata:
  created: %(at)s
"""


def _folder(root, quoted: bool):
    date, at = "2024-01-05", "2024-01-05 10:00:00"
    folder = root / ("quoted" if quoted else "plain")
    folder.mkdir()
    (folder / "task.yaml").write_text(TASK_YAML % ({"date": f'"{date}"', "at": f'"{at}"'} if quoted
                                                   else {"date": date, "at": at}))
    return folder


def test_an_unquoted_date_means_the_string_written(tmp_path):
    # text_equals refused the date ("should be a valid string"); json_equals scored 0 for the right answer
    task = load_task(_folder(tmp_path, quoted=False))
    assert task.verifier.checks[0]["expected"] == {"date": "2024-01-05", "at": "2024-01-05 10:00:00"}
    assert task.metadata["created"] == "2024-01-05 10:00:00"
    agent = ScriptedAgent([
        {"tool": "write", "args": {"path": "answer.json",
                                   "content": '{"date": "2024-01-05", "at": "2024-01-05 10:00:00"}'}},
        {"tool": "write", "args": {"path": "date.txt", "content": "2024-01-05\n"}}])
    [o] = run_sync([task], agent=agent, db=tmp_path / "r.db", retries=0).outcomes
    assert (o.kind.value, o.reward) == ("ok", 1.0), o


def test_it_loads_and_hashes_as_the_quoted_task_does(tmp_path):
    plain, quoted = load_task(_folder(tmp_path, quoted=False)), load_task(_folder(tmp_path, quoted=True))
    assert plain.verifier == quoted.verifier and plain.hash == quoted.hash
    again = load_task(save_task(plain, tmp_path / "saved" / "dated"))
    assert again.hash == plain.hash and again.verifier == plain.verifier
