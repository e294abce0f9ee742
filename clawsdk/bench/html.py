"""A report as one self-contained HTML page: tables plus matplotlib PNGs embedded as base64.

matplotlib is imported here only, through its object API (`Figure`), so no global backend
is chosen and nothing opens a window. Without matplotlib the page still has every table and
says how to get the plots.
"""

from __future__ import annotations

import base64
import html
import io
import logging
import math
from typing import Any

from clawsdk.bench.render import (
    _COST_ROWS,
    COST_NOTE,
    TASK_COLUMNS,
    _metric_columns,
    completeness,
    cost_title,
    ending_rows,
    num,
    pins_rows,
    subscore_rows,
    subscores_to_show,
    task_rows,
    tasks_cell,
    warnings,
)

log = logging.getLogger(__name__)

SUBSCORES_PLOTTED = 20

_CSS = """
body { font-family: system-ui, -apple-system, Segoe UI, sans-serif; margin: 2rem auto; max-width: 1100px;
       color: #1d232a; padding: 0 1rem; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.15rem; margin-top: 2rem; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: .5rem 0; font-size: .9rem; }
th, td { padding: .25rem .6rem; border-bottom: 1px solid #eee; text-align: right; }
th:first-child, td:first-child { text-align: left; }
table.pins td { text-align: left; } table.pins td:first-child { color: #666; }
.status { padding: .5rem .8rem; border-radius: 4px; }
.complete { background: #e8f6ec; } .partial, .warning { background: #fff4d6; font-weight: 600; }
.plots { display: flex; flex-wrap: wrap; gap: 1rem; } .plots figure { margin: 0; }
figcaption { font-size: .8rem; color: #555; }
tr.total td { font-weight: 600; border-top: 2px solid #ccc; }
.unscored { color: #a05a00; }
"""


def _png(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _err(est: dict) -> tuple[float, float, float]:
    """(value, minus, plus) in percent; NaN where there is no value, which matplotlib leaves out:
    a figure with no scored sample is not drawn as 0%."""
    if est.get("value") is None:
        return math.nan, math.nan, math.nan
    v = est["value"]
    lo = est["low"] if est.get("low") is not None else v
    hi = est["high"] if est.get("high") is not None else v
    return 100 * v, 100 * (v - lo), 100 * (hi - v)


def plots(r: dict) -> list[tuple[str, str, str]]:
    """(name, caption, base64 PNG) for each plot; empty when matplotlib is missing."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        return []
    out: list[tuple[str, str, str]] = []

    # 1. pass@k and pass^k against k, with CIs
    fig = Figure(figsize=(5.2, 3.4))
    ax = fig.add_subplot()
    ks = r["ks"]
    for key, label, color in (("pass@k", "pass@k", "#2a7ab0"), ("pass^k", "pass^k", "#c0504d")):
        vals = [_err(r["overall"][key][str(k)]) for k in ks]
        ys = [v[0] for v in vals]
        ax.plot(ks, ys, marker="o", label=label, color=color)
        ax.fill_between(ks, [v[0] - v[1] for v in vals], [v[0] + v[2] for v in vals], color=color, alpha=0.15)
    ax.set_xlabel("k")
    ax.set_ylabel("%")
    ax.set_ylim(-2, 102)
    ax.set_xticks(ks)
    ax.legend()
    ax.set_title("pass@k and pass^k (95% CI)")
    out.append(("pass_at_k", "pass@k (at least one of k passes) and pass^k (all k pass) against k", _png(fig)))

    # 2. categories: pass@1 and mean score with CIs
    cats = list(r["categories"])
    if cats:
        fig = Figure(figsize=(6.4, 0.55 * len(cats) + 1.4))
        ax = fig.add_subplot()
        ys = list(range(len(cats)))
        for off, key, label, color in ((-0.2, "pass@1", "pass@1", "#2a7ab0"),
                                       (0.2, "mean_score", "mean score", "#6aa84f")):
            vals = [_err(r["categories"][c][key]) for c in cats]
            ax.barh([y + off for y in ys], [v[0] for v in vals], height=0.38, label=label, color=color,
                    xerr=[[v[1] for v in vals], [v[2] for v in vals]], capsize=3)
        ax.set_yticks(ys)
        ax.set_yticklabels(cats)
        ax.invert_yaxis()
        ax.set_xlim(0, 105)
        ax.set_xlabel("%")
        ax.legend(loc="lower right", fontsize=8)
        ax.set_title("by category (95% CI)")
        out.append(("categories", "pass@1 and mean score per category", _png(fig)))

    # 3. per-task mean scores, sorted
    tasks = [t for t in r["tasks"] if t["mean_score"] is not None]
    if tasks:
        tasks.sort(key=lambda t: t["mean_score"])
        fig = Figure(figsize=(6.4, 3.2))
        ax = fig.add_subplot()
        ax.bar(range(len(tasks)), [100 * t["mean_score"] for t in tasks], color="#6aa84f", width=0.85)
        ax.scatter(range(len(tasks)), [100 * t["pass_rate"] for t in tasks], color="#2a7ab0", s=12, zorder=3,
                   label="pass rate")
        ax.set_ylim(0, 105)
        ax.set_xlabel("tasks, sorted by mean score")
        ax.set_ylabel("%")
        ax.set_title("per-task mean score (bars) and pass rate (dots)")
        if len(tasks) <= 30:
            ax.set_xticks(range(len(tasks)))
            ax.set_xticklabels([t["id"] for t in tasks], rotation=70, fontsize=7, ha="right")
        else:
            ax.set_xticks([])
        ax.legend(fontsize=8)
        out.append(("tasks", "each task's mean score over its scored samples", _png(fig)))

    # 4. endings
    if r["failure_kinds"]:
        kinds = list(r["failure_kinds"])
        fig = Figure(figsize=(5.2, 0.45 * len(kinds) + 1.2))
        ax = fig.add_subplot()
        colors = ["#e69138" if k in r["unscored_kinds"] else "#6d9eeb" for k in kinds]
        ax.barh(kinds, [r["failure_kinds"][k] for k in kinds], color=colors)
        ax.invert_yaxis()
        ax.set_xlabel("rollouts")
        ax.set_title("endings (orange: unscored, excluded)")
        out.append(("endings", "how rollouts ended; infrastructure failures are unscored", _png(fig)))

    # 5. sub-scores: those that tell tasks apart first, with the lowest and highest means kept
    if r["subscores"]:
        subs = subscores_to_show(r["subscores"], SUBSCORES_PLOTTED)
        more = len(r["subscores"]) - len(subs)
        fig = Figure(figsize=(6.4, 0.35 * len(subs) + 1.2))
        ax = fig.add_subplot()
        vals = [_err(e) for _, e in subs]
        ax.barh([n[:40] for n, _ in subs], [v[0] for v in vals], color="#8e7cc3",
                xerr=[[v[1] for v in vals], [v[2] for v in vals]], capsize=2)
        for y, v in enumerate(vals):  # a bar at 0% is invisible: its value says it is there
            ax.text(min(v[0] + v[2], 100) + 1, y, f"{v[0]:.0f}%", va="center", fontsize=7)
        ax.invert_yaxis()
        ax.set_xlim(0, 112)
        ax.set_xlabel("%")
        ax.tick_params(axis="y", labelsize=7)
        ax.set_title("sub-scores (most varied across tasks first" + (f"; {more} more in the table)" if more else ")"))
        out.append(("subscores", "mean of each sub-score over the tasks that have it; sorted by how much it "
                    "differs between tasks, the lowest and highest means always shown", _png(fig)))
    return out


def _table(header: list[str], rows: list[list[str]], cls: str = "", total_last: bool = False) -> str:
    h = "".join(f"<th>{html.escape(c)}</th>" for c in header)
    body = []
    for i, row in enumerate(rows):
        tr = ' class="total"' if total_last and i == len(rows) - 1 else ""
        body.append(f"<tr{tr}>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>")
    c = f' class="{cls}"' if cls else ""
    return f"<table{c}><thead><tr>{h}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def page(r: dict, *, title: str | None = None) -> str:
    p = r["pins"]
    title = title or f"Benchmark report: {p['benchmark'] or p['run_id']}"
    parts = [f"<h1>{html.escape(title)}</h1>"]
    parts.append(_table(["", ""], [[k, v] for k, v in pins_rows(r)], "pins"))
    parts.append(f'<p class="status {r["status"]}">{html.escape(completeness(r))}</p>')
    for w in warnings(r):
        parts.append(f'<p class="status warning">{html.escape(w)}</p>')
    figs = plots(r)
    if figs:
        parts.append('<h2>Plots</h2><div class="plots">')
        for name, caption, b64 in figs:
            parts.append(f'<figure><img data-plot="{name}" alt="{html.escape(caption)}" '
                         f'src="data:image/png;base64,{b64}"><figcaption>{html.escape(caption)}</figcaption></figure>')
        parts.append("</div>")
    else:
        parts.append("<p><em>Plots need matplotlib: <code>pip install matplotlib</code>.</em></p>")
    cols = _metric_columns(r)
    rows = [[c, f"{b['tasks_scored']}/{b['tasks']}", *[f(b) for _, f in cols]] for c, b in r["categories"].items()]
    o = r["overall"]
    rows.append(["all", tasks_cell(r, o, overall=True), *[f(o) for _, f in cols]])
    parts.append("<h2>Scores</h2><p>Percent; 95% confidence intervals over tasks in brackets. "
                 "Unscored rollouts (infrastructure failures) are excluded, never counted as zeros.</p>")
    parts.append(_table(["category", "tasks", *[n for n, _ in cols]], rows, total_last=True))
    if r["subscores"]:
        parts.append("<h2>Sub-scores</h2>")
        parts.append(_table(["sub-score", "tasks", "mean", "spread"], subscore_rows(r["subscores"])))
    parts.append("<h2>Endings</h2>")
    parts.append(_table(["failure kind", "rollouts", ""], [list(x) for x in ending_rows(r)]))
    cost_head = cost_title(r)
    parts.append(f"<h2>{html.escape(cost_head[0].upper() + cost_head[1:])}</h2>"
                 f"<p>{html.escape(COST_NOTE)}</p>")
    parts.append(_table(["", "mean", "median", "total"],
                        [[label, num(r["cost"][k]["mean"]), num(r["cost"][k]["median"]), num(r["cost"][k]["total"])]
                         for k, label in _COST_ROWS]))
    parts.append("<h2>Tasks</h2>")
    parts.append(_table(TASK_COLUMNS, task_rows(r)))
    body = "\n".join(parts)
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            f"<style>{_CSS}</style></head><body>\n{body}\n</body></html>\n")
