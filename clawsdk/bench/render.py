"""A report as a terminal table (rich) or Markdown."""

from __future__ import annotations

from typing import Any

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from clawsdk._text import rounded

SUBSCORES_SHOWN = 12


def pct(est: dict | None, ci: bool = True) -> str:
    if not est or est.get("value") is None:
        return "-"
    v = rounded(est["value"], 1, 100)
    if ci and est.get("low") is not None and est.get("n", 0) > 1:
        v += f" [{rounded(est['low'], 1, 100)}, {rounded(est['high'], 1, 100)}]"
    return v


def num(x: float | None, digits: int = 1) -> str:
    if x is None:
        return "-"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.{digits}f}"


def status_line(r: dict) -> str:
    """Whether the run is complete (else what is missing and how to finish it), and the warnings that go
    with its figures whatever its status (`warnings`)."""
    base = completeness(r)
    notes = warnings(r)
    return " ".join([base if not notes or base.endswith(".") else base + ".", *notes])


def warnings(r: dict) -> list[str]:
    """What a reader must know before reading the figures: attempts thrown away by retries (with the pass@1
    that counts each as a failure), a run that chose the tasks it is scored on."""
    out = []
    if r.get("selection_biased"):
        flags = {"runs": "--runs", "reference_runs": "--reference-run"}
        which = " and ".join(flags.get(k, k) for k in r.get("selection_biased_by") or ["runs"])
        out.append(f"SELECTION BIAS: run {r['pins']['run_id']} is one of the runs this benchmark was built "
                   f"from (`bench build {which}`): this run chose the tasks it is scored on: its figure is "
                   f"biased upward; score a fresh run.")
    discarded = r.get("discarded_attempts") or {}
    n = sum(discarded.values())
    if n:
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(discarded.items()))
        line = (f"RETRIED: {n} earlier attempt{' was' if n == 1 else 's were'} retried: {kinds} "
                f"({r.get('attempts', 0)} attempts in all); the scores keep each sample's last attempt.")
        worst = r.get("pass@1_worst_case")
        if worst and worst.get("value") is not None:
            line += (f" Counting each retried attempt of a scored sample as a failure, pass@1 would be "
                     f"{pct(worst)} (reported: {pct(r['overall']['pass@1'])}).")
        out.append(line)
    return out


def completeness(r: dict) -> str:
    """complete, or PARTIAL with what is missing and how to resume."""
    if r["status"] == "complete":
        return f"complete: every task has its {r['k']} scored sample(s)"
    skipped = len(r.get("skipped_tasks") or [])
    why = f"{r['unscored']} unscored by infrastructure failures, {r.get('pending', 0)} not finished"
    if r.get("partly_verified"):
        why += (f"; {r['partly_verified']} of the unscored are hybrids whose judged part had no judge model "
                f"(set CLAWSDK_JUDGE): their automated part is in the sub-scores")
    if r.get("run_status") == "interrupted":
        why += "; the run was interrupted"
    parts = [f"{r['missing_samples']} sample(s) missing ({why})"] if r["missing_samples"] else []
    if skipped:
        parts.append(f"{skipped} task file(s) could not be read and were skipped (`clawsdk tasks validate` "
                     f"says why)")
    line = f"PARTIAL: {'; '.join(parts)}; scores cover only what was scored. "
    run_id = r["pins"]["run_id"]
    if r["pins"]["benchmark"]:
        line += f"Resume with `clawsdk bench run BENCHMARK --run-id {run_id}` and the same options"
        # a fixed file changes the benchmark, which this run id cannot score
        return line + ("; fixed task files make another benchmark: run it under a new --run-id" if skipped else "")
    line += (f"`clawsdk run TASKS --run-id {run_id}` with the same options resumes samples not finished"
             + (", and adds the task files fixed since" if skipped else ""))
    if r["unscored"]:
        line += f"; add --retry-unscored to run the {r['unscored']} unscored again"
    return line


def tasks_cell(r: dict, block: dict, overall: bool = False) -> str:
    """Scored of all tasks; overall, the task files that could not be read count among all."""
    skipped = len(r.get("skipped_tasks") or []) if overall else 0
    return f"{block['tasks_scored']}/{block['tasks'] + skipped}" + (f" ({skipped} unreadable)" if skipped else "")


def pins_rows(r: dict) -> list[tuple[str, str]]:
    p = r["pins"]
    b = p["bootstrap"]
    return [
        ("run", p["run_id"]),
        ("benchmark", f"{p['benchmark']} ({p['benchmark_hash'][:12]})" if p["benchmark"] else "(tasks of the run)"),
        ("agent", str(p["agent"])),
        ("model", ", ".join(p["models"]) or "-"),
        ("model params", ", ".join(f"{k}={v}" for k, v in sorted(p["model_params"].items())) or "-"),
        ("judge model", _judge(p)),
        ("seeds", ", ".join(f"{k}={v}" for k, v in p["seeds"].items()) or "-"),
        ("samples/task", str(p["samples_per_task"])),
        ("config hash", p["config_hash"][:16]),
        ("CIs", f"{int(100 * b['confidence'])}% over tasks: Wilson over the tasks' values (Kish's effective n "
                f"when weighted)"),
        ("clawsdk", p["clawsdk_version"]),
    ]


def short(est: dict | None) -> str:
    """A compact value [low-high] for narrow terminals."""
    if not est or est.get("value") is None:
        return "-"
    v = rounded(est["value"], 1, 100)
    if est.get("low") is not None and est.get("n", 0) > 1:
        low, high = _bound(est["low"]), _bound(est["high"])
        v += f" [{low}{', ' if high[0] in '<>' else '-'}{high}]"  # "99.7->99.9" reads as an arrow
    return v


def _bound(x: float) -> str:
    """A bound of a compact interval: whole points, or one decimal where whole points would round it to 0 or
    100 when it is not (a bound of 99.7 read 100); never shown as 100 or 0 when it is not."""
    text = rounded(x, 0, 100)
    return rounded(x, 1, 100) if text[0] in "<>" else text


def ending_rows(r: dict) -> list[tuple[str, str, str]]:
    rows = [(k, str(v), "unscored (excluded)" if k in r["unscored_kinds"] else "scored")
            for k, v in r["failure_kinds"].items()]
    if r.get("pending"):
        rows.append(("(not finished)", str(r["pending"]), "not run yet, or interrupted"))
    return rows


def _judge(p: dict) -> str:
    pinned, used = p.get("judge_model"), p.get("judges_used") or []
    if not pinned and not used:
        return "-"
    text = pinned or ", ".join(used)
    if pinned and used and used != [pinned]:
        text += f" (scored by: {', '.join(used)})"
    return text


def _metric_columns(r: dict, compact: bool = False) -> list[tuple[str, Any]]:
    """(header, cell function); compact: CIs on pass@1 and mean score only, narrowly written."""
    main = short if compact else pct
    rest = (lambda e: pct(e, ci=False)) if compact else pct
    cols: list[tuple[str, Any]] = [("pass@1", lambda b: main(b["pass@1"])),
                                   ("mean score", lambda b: main(b["mean_score"]))]
    for k in r["ks"]:
        if k == 1:
            continue
        cols.append((f"pass@{k}", lambda b, k=k: _of(b, k, rest(b["pass@k"][str(k)]))))
        cols.append((f"pass^{k}", lambda b, k=k: _of(b, k, rest(b["pass^k"][str(k)]))))
    return cols


def _of(block: dict, k: int, cell: str) -> str:
    """A pass@k or pass^k cell, with how many tasks it covers when some have fewer than k scored samples:
    those are left out, and they are often the hard ones."""
    est = block["pass@k"][str(k)]
    if not est.get("short") or cell == "-":
        return cell
    return f"{cell} ({est['n']} of {block['tasks_scored']} tasks)"


def category_note(r: dict) -> str | None:
    """Why a report has no per-category breakdown, when it has none."""
    if list(r["categories"]) == ["(none)"]:
        return ("No per-category breakdown: none of these tasks has a category. The task files give none, and "
                "where a ClawGym loader infers one (docs/formats.md) the instruction said too little.")
    return None


def subscores_to_show(subscores: dict[str, dict], limit: int) -> list[tuple[str, dict]]:
    """At most `limit` sub-scores, those that differ most between tasks first, and always both ends:
    the lowest and the highest means are kept, so a list of many 0% ones cannot hide the 100% ones."""
    def mean(e: dict) -> float:
        return e["value"] if e.get("value") is not None else 0.0

    items = list(subscores.items())
    if len(items) > limit:
        by_mean = sorted(items, key=lambda kv: (mean(kv[1]), kv[0]))
        ends = limit // 3
        keep = {n for n, _ in by_mean[: ends // 2 + ends % 2]} | {n for n, _ in by_mean[len(by_mean) - ends // 2:]}
        by_spread = sorted(items, key=lambda kv: (-kv[1].get("spread", 0.0), -kv[1]["n"], kv[0]))
        for n, _ in by_spread:
            if len(keep) >= limit:
                break
            keep.add(n)
        items = [kv for kv in items if kv[0] in keep]
    return sorted(items, key=lambda kv: (-kv[1].get("spread", 0.0), -mean(kv[1]), kv[0]))


def subscore_rows(subscores: dict[str, dict]) -> list[list[str]]:
    """Every sub-score, most varied across tasks first: name, tasks, mean (CI), spread (sd, points)."""
    return [[n, str(e["n"]), pct(e), "-" if e.get("spread") is None else f"{100 * e['spread']:.0f}"]
            for n, e in subscores_to_show(subscores, len(subscores))]


def terminal(r: dict, console: Console | None = None) -> None:
    console = console or Console()
    pins = Table.grid(padding=(0, 2))
    for k, v in pins_rows(r):
        pins.add_row(Text(k, style="dim"), v)
    console.print(pins)
    style = "green" if r["status"] == "complete" else "bold yellow"
    console.print(Text(completeness(r), style=style))
    for w in warnings(r):
        console.print(Text(w, style="bold yellow"))

    cols = _metric_columns(r, compact=True)
    table = Table(title="scores (%; 95% CI over tasks in brackets)", title_justify="left")
    # on a terminal long names are cut to keep the table on screen; in a file or pipe they stay whole
    cut = console.is_terminal
    table.add_column("category", no_wrap=True, max_width=28 if cut else None, overflow="ellipsis")
    table.add_column("tasks", justify="right")
    for name, _ in cols:
        table.add_column(name, justify="right")
    for cat, b in r["categories"].items():
        table.add_row(cat, f"{b['tasks_scored']}/{b['tasks']}", *[f(b) for _, f in cols])
    table.add_section()
    o = r["overall"]
    table.add_row(Text("all", style="bold"), tasks_cell(r, o, overall=True), *[f(o) for _, f in cols])
    console.print(table)
    if note := category_note(r):
        console.print(Text(note, style="dim"))

    parts = []
    if r["subscores"]:
        shown = subscores_to_show(r["subscores"], SUBSCORES_SHOWN)
        more = len(r["subscores"]) - len(shown)
        sub = Table(title="sub-scores (mean over the tasks that have them, %)", title_justify="left",
                    caption=f"{more} more in the Markdown/HTML report" if more else None)
        sub.add_column("sub-score", max_width=48 if cut else None, overflow="ellipsis", no_wrap=True)
        sub.add_column("tasks", justify="right")
        sub.add_column("mean", justify="right")
        for name, e in shown:
            sub.add_row(name, str(e["n"]), short(e))
        parts.append(sub)
    kinds = Table(title="endings", title_justify="left")
    kinds.add_column("failure kind")
    kinds.add_column("rollouts", justify="right")
    kinds.add_column("")
    for k, v, note in ending_rows(r):
        kinds.add_row(k, v, note)
    parts.append(kinds)
    cost = Table(title=cost_title(r), title_justify="left")
    for col in ("", "mean", "median", "total"):
        cost.add_column(col, justify="right" if col else "left")
    for key, label in _COST_ROWS:
        s = r["cost"][key]
        cost.add_row(label, num(s["mean"]), num(s["median"]), num(s["total"]))
    parts.append(cost)
    console.print(Group(*parts))


_COST_ROWS = (("model_calls", "turns (model calls)"), ("tool_calls", "tool calls"),
              ("prompt_tokens", "prompt tokens"),
              ("completion_tokens", "completion tokens"),
              ("duration_s", "time (s)"))


def cost_title(r: dict) -> str:
    """Every cost column sums every attempt of a rollout, retries included: what the run cost."""
    c = r["cost"]
    title = "cost per rollout, every attempt included"
    if c.get("attempts") and c["attempts"] != c["rollouts"]:
        title += f" ({c['attempts']} attempts for {c['rollouts']} rollouts)"
    return title


#: said under the cost table (Markdown, HTML)
COST_NOTE = ("Every column sums all the attempts of a rollout, retries included. An earlier attempt's time "
             "is the span of its recorded events (its sandbox start before the first one is not recorded).")


TASK_COLUMNS = ["task", "category", "weight", "scored", "passed", "mean score", "unscored",
                "retried attempts"]


def task_rows(r: dict) -> list[list[str]]:
    def kinds(d: dict | None) -> str:
        return ", ".join(f"{k} {v}" for k, v in (d or {}).items()) or "-"

    return [[t["id"], t["category"] or "-", f"{t['weight']:g}", str(t["n"]), str(t["passed"]),
             pct({"value": t["mean_score"]}, ci=False), kinds(t["unscored"]),
             kinds(t.get("discarded_attempts"))] for t in r["tasks"]]


def _md_table(header: list[str], rows: list[list[str]], align: list[str] | None = None) -> str:
    align = align or ["l"] + ["r"] * (len(header) - 1)
    sep = ["---:" if a == "r" else "---" for a in align]
    esc = [[c.replace("|", "\\|") for c in row] for row in rows]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(sep) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in esc]
    return "\n".join(lines)


def markdown(r: dict, *, title: str | None = None) -> str:
    p = r["pins"]
    out = [f"# {title or 'Benchmark report: ' + (p['benchmark'] or p['run_id'])}", ""]
    out.append(_md_table(["", ""], [[k, f"`{v}`" if k in ("config hash", "run") else v] for k, v in pins_rows(r)],
                         ["l", "l"]))
    out += ["", f"**{completeness(r)}**", ""]
    for w in warnings(r):
        out += [f"**{w}**", ""]
    out += ["## Scores", "",
            "Percent; 95% confidence intervals over tasks in brackets. Unscored rollouts "
            "(infrastructure failures) are excluded, never counted as zeros.", ""]
    cols = _metric_columns(r)
    rows = [[cat, f"{b['tasks_scored']}/{b['tasks']}", *[f(b) for _, f in cols]] for cat, b in r["categories"].items()]
    o = r["overall"]
    rows.append(["**all**", tasks_cell(r, o, overall=True), *[f"**{f(o)}**" for _, f in cols]])
    out.append(_md_table(["category", "tasks", *[n for n, _ in cols]], rows))
    if note := category_note(r):
        out += ["", note]
    if r["subscores"]:
        out += ["", "## Sub-scores", ""]
        out.append(_md_table(["sub-score", "tasks", "mean", "spread"], subscore_rows(r["subscores"])))
    out += ["", "## Endings", ""]
    out.append(_md_table(["failure kind", "rollouts", ""], [list(x) for x in ending_rows(r)]))
    out += ["", f"## {cost_title(r)[0].upper()}{cost_title(r)[1:]}", "", COST_NOTE, ""]
    out.append(_md_table(["", "mean", "median", "total"],
                         [[label, num(r["cost"][k]["mean"]), num(r["cost"][k]["median"]), num(r["cost"][k]["total"])]
                          for k, label in _COST_ROWS]))
    out += ["", "## Tasks", ""]
    out.append(_md_table(TASK_COLUMNS, task_rows(r)))
    return "\n".join(out) + "\n"
