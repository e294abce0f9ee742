"""Which sub-scores a report shows first: those that tell tasks apart, and always both ends."""

from __future__ import annotations

from clawsdk.bench.html import SUBSCORES_PLOTTED
from clawsdk.bench.render import subscore_rows, subscores_to_show


def est(value: float, spread: float, n: int = 4) -> dict:
    return {"value": value, "low": max(0.0, value - spread), "high": min(1.0, value + spread), "n": n,
            "spread": spread}


SUBSCORES = {
    **{f"zero/{i:02d}": est(0.0, 0.0, n=9) for i in range(20)},  # the most common: all at 0%
    **{f"full/{i}": est(1.0, 0.0) for i in range(5)},
    "mixed/wide": est(0.5, 0.5),
    "mixed/some": est(0.25, 0.43),
    "mixed/little": est(0.9, 0.2),
}


def test_the_most_varied_come_first_and_both_ends_are_kept():
    shown = subscores_to_show(SUBSCORES, 12)
    names = [n for n, _ in shown]
    assert len(names) == 12
    assert names[:3] == ["mixed/wide", "mixed/some", "mixed/little"]
    assert any(n.startswith("full/") for n in names) and any(n.startswith("zero/") for n in names)
    # every sub-score, in the same order, when there is room
    assert [n for n, _ in subscores_to_show(SUBSCORES, 100)][:3] == names[:3]
    assert len(subscores_to_show(SUBSCORES, 100)) == len(SUBSCORES)


def test_the_report_tables_list_every_sub_score_most_varied_first_with_its_spread():
    rows = subscore_rows(SUBSCORES)
    assert len(rows) == len(SUBSCORES)
    assert rows[0] == ["mixed/wide", "4", rows[0][2], "50"] and rows[1][0] == "mixed/some"
    assert rows[-1][3] == "0"
    assert len(subscores_to_show(SUBSCORES, SUBSCORES_PLOTTED)) == SUBSCORES_PLOTTED
