"""Families are spaces of kinds of work: templates that differ in their abstracted solutions, and splits
by parameters, templates and families that share nothing with training."""

from __future__ import annotations

import anyio
import pytest

from clawsdk.runtime.validate import validate_tasks
from clawsdk.synth.distinct import abstract, abstract_solution, distinctness
from clawsdk.synth.families import FAMILIES, resolve_families
from clawsdk.synth.splits import make_splits

# (templates, abstract solutions, templates no other template shares a solution with), at level 1.
# The one-template versions of fix-failing-test and rename-by-rule had 1 template and 8 and 2 abstract
# solutions (sales-rollup, the one report family before table-report, 1). table-report writes its answer, so
# its abstract solutions differ by the report's shape (columns, decimals) and no template owns one.
MINIMUMS = {"fix-failing-test": (30, 30, 30), "rename-by-rule": (10, 10, 10), "table-report": (30, 15, 0)}


def test_abstraction_removes_parameters_and_keeps_structure():
    assert abstract("    return max(lo, min(x, hi))") == abstract("    return max(low, min(value, high))")
    assert abstract("if x > hi:") != abstract("if x >= hi:")
    assert abstract("mv 'docs/Delta Sync 2020-01-02.txt' docs/2020/delta-sync.txt") == \
        abstract("mv 'inbox/Quarterly Budget Review 2023-04-12.pdf' inbox/2023/quarterly-budget-review.pdf")


@pytest.mark.parametrize("family", sorted(MINIMUMS))
def test_structured_families_hold_many_kinds_of_work(family):
    tasks = [FAMILIES[family].task(1, i, 1) for i in range(300)]
    report = distinctness(tasks)[family]
    templates, solutions, separable = MINIMUMS[family]
    assert report["templates"] >= templates
    assert report["solutions"] >= solutions
    assert report["separable"] >= separable
    # two tasks of one template differ in parameters only: one abstract solution for both (expenses has one
    # measured column; in orders, units or amount is a parameter that changes the answer's shape)
    f = FAMILIES[family]
    template = "expenses:sum" if family == "table-report" else f.templates(1)[0]
    a, b = f.task(2, 0, 1, template), f.task(2, 1, 1, template)
    assert a.hash != b.hash and abstract_solution(a) == abstract_solution(b)


def test_every_task_records_its_template_and_a_forced_template_is_kept():
    for f in FAMILIES.values():
        t = f.task(3, 0, 1)
        assert t.provenance["template"].startswith(f.name + "/")
        assert t.provenance["template"].split("/", 1)[1] in f.templates(1)
    f = FAMILIES["fix-failing-test"]
    t = f.task(3, 0, 2, "mean:off-by-one")
    assert t.provenance["template"] == "fix-failing-test/mean:off-by-one"
    assert "mean:off-by-one" in t.provenance["bugs"]
    with pytest.raises(LookupError, match="mean:off-by-one"):
        f.task(3, 0, 1, "no:such")


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(MINIMUMS))
def test_every_template_is_valid_untouched_fails_reference_passes(family):
    f = FAMILIES[family]
    tasks = [f.task(4, 0, level, tp) for tp in f.templates(1) for level in ((1, 3) if family == "rename-by-rule"
                                                                            else (1,))]
    results = anyio.run(lambda: validate_tasks(tasks, concurrency=4))
    assert not [(t.id, r.problem) for t, r in zip(tasks, results, strict=True) if not r.ok]


def test_splits_hold_out_parameters_templates_and_families_with_nothing_shared():
    train_f = resolve_families("fix-failing-test,rename-by-rule")
    held_f = resolve_families("log-summary,config-convert")
    s = make_splits(train_f, held_f, n_train=60, n_heldout=64, seed=1)
    assert len(s.train) == 60 and all(len(v) == 64 for v in s.heldout().values())
    assert not s.problems()
    train_templates = {t.provenance["template"] for t in s.train}
    assert train_templates == set(s.train_templates)
    assert {t.provenance["template"] for t in s.seen_params} <= train_templates
    assert not {t.provenance["template"] for t in s.unseen_templates} & train_templates
    assert {t.provenance["family"] for t in s.unseen_templates} == {"fix-failing-test", "rename-by-rule"}
    assert {t.provenance["family"] for t in s.unseen_families} == {"log-summary", "config-convert"}
    again = make_splits(train_f, held_f, n_train=60, n_heldout=64, seed=1)
    assert [t.hash for t in again.unseen_templates] == [t.hash for t in s.unseen_templates]
    # the check sees a leak: a training task put into a held-out split
    s.unseen_families.append(s.train[0])
    assert any("is a training task" in p for p in s.problems())
    with pytest.raises(ValueError, match="log-summary"):
        make_splits(train_f + held_f[:1], held_f, n_train=4, n_heldout=4, seed=1)
