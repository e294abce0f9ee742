"""Two runs side by side: paired per-task differences, a significance test, what moved, what flipped.

Tasks are paired by content hash (the same task, not just the same name) and only where both
runs have scored samples. Differences are B - A. The headline test is a sign-flip
permutation test on the weighted mean per-task difference (exact for small benchmarks);
a paired bootstrap gives the confidence interval and the sign test a distribution-free check.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from clawsdk.bench.estimators import DEFAULT_BOOTSTRAP, DEFAULT_SEED, paired_test
from clawsdk.bench.render import _md_table
from clawsdk.bench.results import RunData

METRICS = {"pass@1": lambda t: t.c / t.n, "score": lambda t: t.mean_reward}


def _by_content(run: RunData) -> dict[Any, Any]:
    """A run's scored tasks keyed by content hash; where one content has several ids in the run (a plain run
    keeps them apart), by hash and id, so none of them is dropped in silence."""
    many = {h for h in (t.hash for t in run.tasks) if sum(t.hash == h for t in run.tasks) > 1}
    return {((t.hash, t.id) if t.hash in many else t.hash): t for t in run.tasks if t.n}


def compare_runs(a: RunData, b: RunData, *, n_boot: int = DEFAULT_BOOTSTRAP, seed: int = DEFAULT_SEED,
                 confidence: float = 0.95, alpha: float = 0.05, flip_at: float = 0.5) -> dict[str, Any]:
    ta, tb = _by_content(a), _by_content(b)
    shared = sorted(set(ta) & set(tb), key=lambda h: ta[h].id)
    if not shared:
        raise ValueError(f"runs {a.run_id} and {b.run_id} have no scored task in common (tasks are paired by "
                         "content hash); compare runs of the same benchmark")
    warnings = []
    if a.manifest and b.manifest and a.manifest.hash != b.manifest.hash:
        warnings.append(f"different benchmarks: {a.manifest.label} vs {b.manifest.label}; only shared tasks compared")
    for d in (a, b):
        if not d.complete:
            warnings.append(f"run {d.run_id} is partial ({d.missing_samples} sample(s) missing)")
    if a.k != b.k:
        warnings.append(f"different samples per task: {a.k} vs {b.k}")
    only_a = sorted(ta[h].id for h in set(ta) - set(tb))
    only_b = sorted(tb[h].id for h in set(tb) - set(ta))
    if only_a or only_b:
        warnings.append(f"{len(only_a)} task(s) only in A and {len(only_b)} only in B are left out")
    opts = {"n_boot": n_boot, "seed": seed, "confidence": confidence}

    def weight(h: str) -> float:
        return ta[h].weight  # the same benchmark gives both the same weight

    def test(hashes: list[str]) -> dict:
        w = [weight(h) for h in hashes]
        return {m: paired_test([f(ta[h]) for h in hashes], [f(tb[h]) for h in hashes], w, **opts).as_dict()
                for m, f in METRICS.items()}

    cats: dict[str, list[str]] = {}
    for h in shared:
        cats.setdefault(ta[h].category or "(none)", []).append(h)
    categories = {c: test(hs) for c, hs in sorted(cats.items())}
    for res in categories.values():
        p = res["pass@1"]["p_permutation"]
        res["moved"] = None if p is None or p >= alpha else ("up" if res["pass@1"]["diff"] > 0 else "down")

    def row(h: str) -> dict:
        x, y = ta[h], tb[h]
        return {"id": x.id, "category": x.category, "pass_rate_a": x.pass_rate, "pass_rate_b": y.pass_rate,
                "score_a": x.mean_reward, "score_b": y.mean_reward,
                "diff": (y.mean_reward or 0) - (x.mean_reward or 0)}

    flips = {"improved": [], "regressed": []}
    for h in shared:
        pa, pb = ta[h].pass_rate or 0.0, tb[h].pass_rate or 0.0
        if pa < flip_at <= pb:
            flips["improved"].append(row(h))
        elif pb < flip_at <= pa:
            flips["regressed"].append(row(h))
    return {
        "a": {"run_id": a.run_id, "pins": a.pins(), "complete": a.complete},
        "b": {"run_id": b.run_id, "pins": b.pins(), "complete": b.complete},
        "paired_tasks": len(shared),
        "only_a": only_a,
        "only_b": only_b,
        "warnings": warnings,
        "alpha": alpha,
        "flip_at": flip_at,
        "overall": test(shared),
        "categories": categories,
        "flipped": flips,
        "tasks": sorted((row(h) for h in shared), key=lambda r: r["diff"]),
    }


def _pp(x: float | None, signed: bool = False) -> str:
    if x is None:
        return "-"
    return f"{100 * x:+.1f}" if signed else f"{100 * x:.1f}"


def _p(x: float | None) -> str:
    return "-" if x is None else (f"{x:.3f}" if x >= 0.001 else "<0.001")


def _rows(c: dict, short: bool = False) -> list[list[str]]:
    cells = _short_cells if short else _metric_cells
    rows = [["all", *cells(c["overall"], c["paired_tasks"])]]
    for cat, res in c["categories"].items():
        rows.append([cat + ({"up": " ▲", "down": " ▼"}.get(res["moved"] or "", "")),
                     *cells(res, res["pass@1"]["n"])])
    return rows


def _short_cells(res: dict, n: int) -> list[str]:
    p, s = res["pass@1"], res["score"]
    def ci(lo: float | None, hi: float | None) -> str:
        return "" if lo is None else f" [{100 * lo:+.0f},{100 * hi:+.0f}]"

    return [str(n), f"{_pp(p['mean_a'])}→{_pp(p['mean_b'])}", f"{100 * p['diff']:+.0f}{ci(p['low'], p['high'])}",
            _p(p["p_permutation"]), f"{p['wins']}/{p['losses']}/{p['ties']}", _pp(s["diff"], True)]


_SHORT_HEADER = ["", "n", "pass@1 A→B", "Δ [95% CI]", "p", "W/L/T", "Δ score"]


def _metric_cells(res: dict, n: int) -> list[str]:
    p, s = res["pass@1"], res["score"]
    return [str(n), _pp(p["mean_a"]), _pp(p["mean_b"]), _pp(p["diff"], True),
            f"[{_pp(p['low'], True)}, {_pp(p['high'], True)}]", _p(p["p_permutation"]), _p(p["p_sign"]),
            f"{p['wins']}/{p['losses']}/{p['ties']}", _pp(s["diff"], True), _p(s["p_permutation"])]


_HEADER = ["", "tasks", "pass@1 A", "pass@1 B", "Δ", "95% CI", "p (perm)", "p (sign)", "B won/lost/tied",
           "Δ score", "p score"]


def terminal(c: dict, console: Console | None = None) -> None:
    console = console or Console()
    console.print(f"A = {c['a']['run_id']} ({c['a']['pins']['agent']}, {', '.join(c['a']['pins']['models']) or '-'})"
                  f"   B = {c['b']['run_id']} ({c['b']['pins']['agent']}, {', '.join(c['b']['pins']['models']) or '-'})")
    for w in c["warnings"]:
        console.print(Text("warning: " + w, style="yellow"))
    t = Table(title="B - A, paired over tasks (percentage points)", title_justify="left",
              caption="p: sign-flip permutation test on pass@1; W/L/T: tasks where B won, lost, tied; --md has more", caption_justify="left")
    t.add_column("", max_width=24)
    for h in _SHORT_HEADER[1:]:
        t.add_column(h, justify="right", no_wrap=True)
    rows = _rows(c, short=True)
    t.add_row(*[Text(x, style="bold") for x in rows[0]])
    t.add_section()
    for r in rows[1:]:
        t.add_row(*r)
    console.print(t)
    console.print(f"▲/▼: category moved (permutation p < {c['alpha']}).")
    for kind, style in (("improved", "green"), ("regressed", "red")):
        flips = c["flipped"][kind]
        if flips:
            console.print(Text(f"{kind} ({len(flips)}): pass rate crossed {c['flip_at']:g}", style=style))
            for f in flips:
                console.print(f"  {f['id']}  {_pp(f['pass_rate_a'])}% -> {_pp(f['pass_rate_b'])}%")
    if not any(c["flipped"].values()):
        console.print("no task flipped")


def markdown(c: dict) -> str:
    out = [f"# Comparison: {c['a']['run_id']} (A) vs {c['b']['run_id']} (B)", ""]
    for side in ("a", "b"):
        p = c[side]["pins"]
        out.append(f"- **{side.upper()}**: run `{p['run_id']}`, agent {p['agent']}, model "
                   f"{', '.join(p['models']) or '-'}, benchmark {p['benchmark'] or '-'}, config `{p['config_hash'][:12]}`")
    out += [""] + [f"> warning: {w}" for w in c["warnings"]] + [""]
    out.append(_md_table(_HEADER, _rows(c)))
    out += ["", f"▲/▼: category moved (permutation p < {c['alpha']}).", ""]
    for kind in ("improved", "regressed"):
        flips = c["flipped"][kind]
        out.append(f"## {kind.capitalize()} ({len(flips)})")
        out.append("")
        if flips:
            out.append(_md_table(["task", "category", "pass rate A", "pass rate B", "Δ score"],
                                 [[f["id"], f["category"] or "-", _pp(f["pass_rate_a"]), _pp(f["pass_rate_b"]),
                                   _pp(f["diff"], True)] for f in flips]))
        else:
            out.append("none")
        out.append("")
    return "\n".join(out)

