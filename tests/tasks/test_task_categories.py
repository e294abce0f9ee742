"""The documented rule that gives a task without a category one, marked as inferred."""

from __future__ import annotations

from clawsdk.tasks.categories import CATEGORIES, MIN_HITS, fill_missing_category, infer_category


def test_the_rule_picks_the_category_with_most_keyword_and_file_hits():
    got = infer_category("Fix the bug in slugify.py so the unit test passes", ["src/slugify.py", "tests/t.py"])
    assert got is not None and got[0] == "software development"
    assert set(got[1]["software development"]) >= {"bug", ".py"}
    mail = infer_category("Draft replies to the emails in inbox/ and add the meeting to the calendar", ["a.eml"])
    assert mail is not None and mail[0] == "productivity & collaboration"


def test_too_little_evidence_leaves_the_task_without_a_category():
    assert infer_category("Do the thing.") is None
    assert MIN_HITS == 2 and infer_category("Please plan it.") is None  # one hit is a guess


def test_a_given_category_is_kept_and_an_inferred_one_is_marked():
    given = {"instruction": "Fix the bug in the python script", "category": "content & domain", "provenance": {}}
    fill_missing_category(given)
    assert given["category"] == "content & domain" and "category_inferred" not in given["provenance"]
    empty = {"instruction": "Fix the bug in the python script", "category": None, "workspace": [{"path": "a.py"}],
             "provenance": {"source": "clawgym"}}
    fill_missing_category(empty)
    assert empty["category"] == "software development" and empty["category"] in CATEGORIES
    assert empty["provenance"] == {"source": "clawgym",
                                   "category_inferred": {"rule": "keywords-v1", "hits": ["bug", "python", "script",
                                                                                         ".py"]}}


def test_an_inferred_category_is_shown_as_such_and_leaves_the_hash_as_it_was():
    from clawsdk.tasks.model import Task, category_label

    base = {"id": "t", "instruction": "Fix the bug in the python script", "workspace": [{"path": "a.py", "text": ""}]}
    bare = Task.model_validate(base)
    data = {**base, "provenance": {}}
    fill_missing_category(data)
    inferred = Task.model_validate(data)
    assert inferred.category == "software development"
    assert category_label(inferred) == "software development (inferred)"
    assert inferred.hash == bare.hash  # the guess is not part of what the task is
    given = Task.model_validate({**base, "category": "software development"})
    assert category_label(given) == "software development" and given.hash != bare.hash


def test_one_pass_matches_every_keyword_the_rule_names():
    from clawsdk.tasks.categories import _said

    # each keyword, in any case, is found as a whole word; a longer word that starts with it is not
    for words, _ in CATEGORIES.values():
        for w in words:
            assert w in _said(f"Then {w.upper()}, please."), w
            assert w not in _said(f"Then {w}zz and x-{w}."), w
    assert infer_category("unit test and the tests")[1]["software development"] == ["test", "tests", "unit test"]
