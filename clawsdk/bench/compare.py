"""Two runs side by side: paired per-task differences, a significance test, what moved, what flipped.

Tasks are paired by content hash (the same task, not just the same name) and only where both
runs have scored samples. Differences are B - A. The headline test is a sign-flip
permutation test on the weighted mean per-task difference (exact for small benchmarks); the
confidence interval agrees with that test, excluding 0 exactly when p < alpha (its level is
1 - alpha unless `confidence` is given; `estimators.paired_test` says how), and the sign test
gives a distribution-free check.

Per category the pass@1 and score p-values are Holm-adjusted across the categories, and a category
is marked moved (▲/▼) only when its adjusted p is below alpha: unadjusted, two runs of one agent got
a mark in 14% of comparisons over 6 categories. A task whose pass rate crossed `flip_at` is called
improved or regressed only when a per-task test supports it: Fisher's exact test on its passes,
Holm-adjusted across the tasks whose samples could reach p < alpha at all (none at k = 1, where one
sample a side cannot show a per-task change). The others are listed as changed, untested or not
significant.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from clawsdk._text import rounded
from clawsdk.bench.estimators import DEFAULT_BOOTSTRAP, DEFAULT_SEED, fisher_exact, holm, paired_test
from clawsdk.bench.render import _md_table
from clawsdk.bench.results import RunData

METRICS = {"pass@1": lambda t: t.c / t.n, "score": lambda t: t.mean_reward}


def _by_content(run: RunData) -> dict[Any, Any]:
    """A run's scored tasks keyed by content hash; where one content has several ids in the run (a plain run
    keeps them apart), by hash and id, so none of them is dropped in silence."""
    many = {h for h in (t.hash for t in run.tasks) if sum(t.hash == h for t in run.tasks) > 1}
    return {((t.hash, t.id) if t.hash in many else t.hash): t for t in run.tasks if t.n}


def compare_runs(a: RunData, b: RunData, *, n_boot: int = DEFAULT_BOOTSTRAP, seed: int = DEFAULT_SEED,
                 confidence: float | None = None, alpha: float = 0.05, flip_at: float = 0.5) -> dict[str, Any]:
    """`confidence` defaults to 1 - alpha, so each interval excludes 0 exactly when its (unadjusted) p is
    below alpha. `n_boot` is kept for callers and unused (no interval here is a bootstrap)."""
    if confidence is None:
        confidence = 1 - alpha
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
    opts: dict[str, Any] = {"n_boot": n_boot, "seed": seed, "confidence": confidence}

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
    for m in METRICS:  # Holm across the categories, each metric its own family
        adjusted = holm([res[m]["p_permutation"] for res in categories.values()])
        for res, p in zip(categories.values(), adjusted, strict=True):
            res[m]["p_holm"] = p
    for res in categories.values():
        p = res["pass@1"]["p_holm"]
        res["moved"] = None if p is None or p >= alpha else ("up" if res["pass@1"]["diff"] > 0 else "down")

    # one Fisher exact test per task; the family is the tasks whose margins let some outcome reach p < alpha
    # (a test that cannot reject can never be a false one: Tarone's pruning, kept valid under Holm)
    per_task = {h: fisher_exact(ta[h].c, ta[h].n, tb[h].c, tb[h].n) for h in shared}
    testable = [h for h in shared if per_task[h][1] < alpha]
    task_holm = dict(zip(testable, holm([per_task[h][0] for h in testable]), strict=True))

    def row(h: str) -> dict:
        x, y = ta[h], tb[h]
        return {"id": x.id, "category": x.category, "pass_rate_a": x.pass_rate, "pass_rate_b": y.pass_rate,
                "score_a": x.mean_reward, "score_b": y.mean_reward,
                "diff": (y.mean_reward or 0) - (x.mean_reward or 0),
                "p": per_task[h][0], "p_holm": task_holm.get(h)}  # p_holm None: untestable at these samples

    flips: dict[str, list[dict]] = {"improved": [], "regressed": [], "changed": []}
    for h in shared:
        pa, pb = ta[h].pass_rate or 0.0, tb[h].pass_rate or 0.0
        direction = "up" if pa < flip_at <= pb else "down" if pb < flip_at <= pa else None
        if direction is None:
            continue
        supported = task_holm.get(h) is not None and task_holm[h] < alpha
        if supported:
            flips["improved" if direction == "up" else "regressed"].append(row(h))
        else:
            flips["changed"].append({**row(h), "direction": direction})
    return {
        "a": {"run_id": a.run_id, "pins": a.pins(), "complete": a.complete, "k": a.k},
        "b": {"run_id": b.run_id, "pins": b.pins(), "complete": b.complete, "k": b.k},
        "paired_tasks": len(shared),
        "only_a": only_a,
        "only_b": only_b,
        "warnings": warnings,
        "alpha": alpha,
        "confidence": confidence,
        "flip_at": flip_at,
        "overall": test(shared),
        "categories": categories,
        "category_test": {"method": "sign-flip permutation", "adjustment": "holm", "family": len(categories)},
        "flipped": flips,
        "flip_test": {"method": "fisher exact", "adjustment": "holm", "family": len(testable)},
        "tasks": sorted((row(h) for h in shared), key=lambda r: r["diff"]),
    }


def _pp(x: float | None, signed: bool = False, digits: int = 1) -> str:
    """A rate (or a difference of rates) in percent; a value that is not 100 (or 0) never reads 100.0 (or
    0.0): 1,999 of 2,000 reads >99.9, a difference of -0.9995 reads ->99.9."""
    if x is None:
        return "-"
    if not signed:
        return rounded(x, digits, 100)
    if x == 0:
        return f"{0:+.{digits}f}"
    return ("+" if x > 0 else "-") + rounded(abs(x), digits, 100)


def _p(x: float | None) -> str:
    return "-" if x is None else (rounded(x, 3) if x >= 0.001 else "<0.001")


def _holm_note(c: dict) -> str:
    n = len(c["categories"])
    family = f"{n} categor{'y' if n == 1 else 'ies'}"
    return (f"▲/▼: category moved (its permutation p, Holm-adjusted across {family}, < {c['alpha']:g}); "
            f"intervals and p are per category, unadjusted.")


def _changed_label(c: dict) -> str:
    n = c["flip_test"]["family"]
    if n == 0:
        ks = sorted({c["a"].get("k"), c["b"].get("k")} - {None})
        return f"untested at k={'/'.join(str(k) for k in ks) or '?'}: too few samples for a per-task test"
    return f"no per-task support (Fisher exact, Holm-adjusted across {n} testable task{'s' if n != 1 else ''})"


def _flip_label(c: dict) -> str:
    n = c["flip_test"]["family"]
    return (f"pass rate crossed {c['flip_at']:g}, Fisher exact p Holm-adjusted across {n} testable "
            f"task{'s' if n != 1 else ''} < {c['alpha']:g}")


def _rows(c: dict, short: bool = False) -> list[list[str]]:
    cells = _short_cells if short else _metric_cells
    rows = [["all", *cells(c["overall"], c["paired_tasks"], holm=False)]]
    for cat, res in c["categories"].items():
        rows.append([cat + ({"up": " ▲", "down": " ▼"}.get(res["moved"] or "", "")),
                     *cells(res, res["pass@1"]["n"])])
    return rows


def _level(c: dict) -> str:
    return f"{c.get('confidence', 0.95):.0%}"


def _short_cells(res: dict, n: int, holm: bool = True) -> list[str]:
    p, s = res["pass@1"], res["score"]

    def ci(lo: float | None, hi: float | None) -> str:
        return "" if lo is None else f" [{_pp(lo, True, 0)},{_pp(hi, True, 0)}]"

    return [str(n), f"{_pp(p['mean_a'])}→{_pp(p['mean_b'])}",
            f"{_pp(p['diff'], True, 0)}{ci(p['low'], p['high'])}",
            _p(p["p_permutation"]), _p(p.get("p_holm")) if holm else "", f"{p['wins']}/{p['losses']}/{p['ties']}",
            _pp(s["diff"], True)]


def _short_header(c: dict) -> list[str]:
    return ["", "n", "pass@1 A→B", f"Δ [{_level(c)} CI]", "p", "p Holm", "W/L/T", "Δ score"]


def _metric_cells(res: dict, n: int, holm: bool = True) -> list[str]:
    p, s = res["pass@1"], res["score"]
    return [str(n), _pp(p["mean_a"]), _pp(p["mean_b"]), _pp(p["diff"], True),
            f"[{_pp(p['low'], True)}, {_pp(p['high'], True)}]", _p(p["p_permutation"]),
            _p(p.get("p_holm")) if holm else "", _p(p["p_sign"]), f"{p['wins']}/{p['losses']}/{p['ties']}",
            _pp(s["diff"], True), _p(s["p_permutation"]), _p(s.get("p_holm")) if holm else ""]


def _header(c: dict) -> list[str]:
    return ["", "tasks", "pass@1 A", "pass@1 B", "Δ", f"{_level(c)} CI", "p (perm)", "p (Holm)", "p (sign)",
            "B won/lost/tied", "Δ score", "p score", "p score (Holm)"]


def terminal(c: dict, console: Console | None = None) -> None:
    console = console or Console()
    console.print(f"A = {c['a']['run_id']} ({c['a']['pins']['agent']}, {', '.join(c['a']['pins']['models']) or '-'})"
                  f"   B = {c['b']['run_id']} ({c['b']['pins']['agent']}, {', '.join(c['b']['pins']['models']) or '-'})")
    for w in c["warnings"]:
        console.print(Text("warning: " + w, style="yellow"))
    t = Table(title="B - A, paired over tasks (percentage points)", title_justify="left",
              caption="p: sign-flip permutation test on pass@1 (the CI excludes 0 exactly when p < 1 - its level); "
                      "p Holm: adjusted across the categories; W/L/T: tasks where B won, lost, tied; --md has more",
              caption_justify="left")
    t.add_column("", max_width=24)
    for h in _short_header(c)[1:]:
        t.add_column(h, justify="right", no_wrap=True)
    rows = _rows(c, short=True)
    t.add_row(*[Text(x, style="bold") for x in rows[0]])
    t.add_section()
    for r in rows[1:]:
        t.add_row(*r)
    console.print(t)
    console.print(_holm_note(c))
    for kind, style in (("improved", "green"), ("regressed", "red")):
        flips = c["flipped"][kind]
        if flips:
            console.print(Text(f"{kind} ({len(flips)}): {_flip_label(c)}", style=style))
            for f in flips:
                console.print(f"  {f['id']}  {_pp(f['pass_rate_a'])}% -> {_pp(f['pass_rate_b'])}%"
                              f"  (p {_p(f['p_holm'])})")
    if not (c["flipped"]["improved"] or c["flipped"]["regressed"]):
        console.print("no task flipped")
    changed = c["flipped"].get("changed") or []
    if changed:
        console.print(Text(f"changed ({len(changed)}): pass rate crossed {c['flip_at']:g}, {_changed_label(c)}",
                           style="dim"))
        for f in changed:
            console.print(f"  {f['id']}  {_pp(f['pass_rate_a'])}% -> {_pp(f['pass_rate_b'])}%")


def markdown(c: dict) -> str:
    out = [f"# Comparison: {c['a']['run_id']} (A) vs {c['b']['run_id']} (B)", ""]
    for side in ("a", "b"):
        p = c[side]["pins"]
        out.append(f"- **{side.upper()}**: run `{p['run_id']}`, agent {p['agent']}, model "
                   f"{', '.join(p['models']) or '-'}, benchmark {p['benchmark'] or '-'}, config `{p['config_hash'][:12]}`")
    out += [""] + [f"> warning: {w}" for w in c["warnings"]] + [""]
    out.append(_md_table(_header(c), _rows(c)))
    out += ["", f"The CI holds every shift the permutation test does not reject, widened by MOVER (Newcombe's "
            f"method 10 for 0/1 values) where that does not contradict the test: it excludes 0 exactly when "
            f"p (perm) < {1 - c.get('confidence', 0.95):.2g}.",
            _holm_note(c), ""]
    for kind in ("improved", "regressed"):
        flips = c["flipped"][kind]
        out.append(f"## {kind.capitalize()} ({len(flips)})")
        out.append("")
        if flips:
            out.append(f"{_flip_label(c)[0].upper()}{_flip_label(c)[1:]}.")
            out.append("")
            out.append(_md_table(["task", "category", "pass rate A", "pass rate B", "Δ score", "p (Holm)"],
                                 [[f["id"], f["category"] or "-", _pp(f["pass_rate_a"]), _pp(f["pass_rate_b"]),
                                   _pp(f["diff"], True), _p(f["p_holm"])] for f in flips]))
        else:
            out.append("none")
        out.append("")
    changed = c["flipped"].get("changed") or []
    if changed:
        out.append(f"## Changed ({len(changed)}): {_changed_label(c)}")
        out.append("")
        out.append(f"Pass rate crossed {c['flip_at']:g}; no per-task test calls it a change.")
        out.append("")
        head = ["task", "category", "pass rate A", "pass rate B", "Δ score", "p (Fisher)", "p (Holm)"]
        out.append(_md_table(head,
                             [[f["id"], f["category"] or "-", _pp(f["pass_rate_a"]), _pp(f["pass_rate_b"]),
                               _pp(f["diff"], True), _p(f["p"]), _p(f["p_holm"])] for f in changed]))
        out.append("")
    return "\n".join(out)
