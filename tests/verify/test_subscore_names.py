"""Two checks labelled alike (the default label is TYPE:PATH) each keep their sub-score: the store keeps one row
per name, and the second overwrote the first, so `show` gave a verdict of 0.50 above a single check at 0."""

from __future__ import annotations

from clawsdk import Store, load_tasks, run_sync
from tests.conftest import make_task


def test_checks_of_one_label_keep_a_sub_score_each(tmp_path, db):
    checks = [{"type": "text_contains", "path": "done.txt", "text": "done"},
              {"type": "text_contains", "path": "done.txt", "text": "extra"}]
    tasks = load_tasks(str(make_task(tmp_path, "twice", checks=checks))).tasks
    [o] = run_sync(tasks, agent="oracle", db=db, sandbox="local").outcomes
    assert o.reward == 0.5
    with Store(db) as store:
        rows = store.query("SELECT name, score FROM verdict_scores WHERE rollout_id = ? ORDER BY name",
                           [o.rollout_id])
    assert [(r["name"], r["score"]) for r in rows] == [("text_contains:done.txt", 1.0),
                                                        ("text_contains:done.txt #2", 0.0)]
