"""Task.hash is computed once per content, and a changed task never keeps its old hash."""

from __future__ import annotations

import pickle

from clawsdk.tasks.model import File, Limits, Task


def _task(**kw) -> Task:
    base = {"id": "t1", "instruction": "write a.txt", "workspace": [File(path="in.txt", text="1")]}
    return Task(**{**base, **kw})


def test_copy_with_new_content_gets_the_new_contents_hash():
    t = _task()
    before = t.hash  # cache it first: a cache that a copy carries over would show here
    changed = t.model_copy(update={"instruction": "write b.txt"})
    assert changed.hash == _task(instruction="write b.txt").hash != before
    files = t.model_copy(update={"workspace": [File(path="in.txt", text="2")]})
    assert files.hash == _task(workspace=[File(path="in.txt", text="2")]).hash != before
    limits = t.model_copy(update={"limits": Limits(timeout_s=5)})
    assert limits.hash != before
    assert t.model_copy(update={"id": "other", "metadata": {"k": 1}}).hash == before  # not part of the hash
    assert t.model_copy(deep=True).hash == before
    assert t.hash == before


def test_assigning_a_field_changes_the_hash_and_back():
    t = _task()
    before = t.hash
    t.instruction = "something else"
    assert t.hash == _task(instruction="something else").hash != before
    t.instruction = "write a.txt"
    assert t.hash == before


def test_hash_is_computed_once(monkeypatch):
    t = _task()
    calls = []
    real = Task.model_dump
    monkeypatch.setattr(Task, "model_dump", lambda self, **kw: calls.append(1) or real(self, **kw))
    first = t.hash
    assert [t.hash for _ in range(5)] == [first] * 5
    assert len(calls) == 1


def test_a_cached_hash_changes_neither_equality_nor_pickling():
    a, b = _task(), _task()
    _ = a.hash  # a has its hash cached, b not
    assert a == b
    back = pickle.loads(pickle.dumps(a))
    assert back == a and back.hash == a.hash
