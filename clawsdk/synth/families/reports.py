"""Analysis & reasoning: a grouped report over one of several table schemas.

A template is (schema, aggregation): orders, tickets, expenses, requests or shipments, reported
as a sum, count, mean, maximum, top three, filtered sum or per-month sum. The grouping column,
the measured column, the filter value and the rows are the parameters.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict

from clawsdk.synth.families import pools
from clawsdk.synth.families.analysis import to_csv
from clawsdk.synth.families.base import Family, Spec, csv_check, read, write

# schema -> (file, id column, date column, {categorical column: values}, {numeric column: (lo, hi, decimals)})
SCHEMAS = {
    "orders": ("orders.csv", "order_id", "date", {"region": pools.REGIONS, "product": pools.PRODUCTS},
               {"units": (1, 40, 0), "amount": (5, 900, 2)}),
    "tickets": ("tickets.csv", "ticket_id", "opened", {"team": ("core", "billing", "mobile", "infra", "web"),
                                                      "priority": ("low", "normal", "high", "urgent")},
                {"hours": (0, 30, 1), "replies": (0, 12, 0)}),
    "expenses": ("expenses.csv", "expense_id", "date", {"employee": pools.FIRST[:12],
                                                       "category": ("travel", "meals", "software", "hardware",
                                                                    "training")},
                 {"amount": (3, 2500, 2)}),
    "requests": ("requests.csv", "request_id", "day", {"endpoint": ("/login", "/search", "/cart", "/pay", "/api/items"),
                                                      "method": ("GET", "POST", "PUT")},
                 {"latency_ms": (3, 2000, 0), "bytes": (100, 90000, 0)}),
    "shipments": ("shipments.csv", "shipment_id", "shipped", {"carrier": ("DHL", "UPS", "FedEx", "Posti", "GLS"),
                                                             "destination": pools.REGIONS},
                  {"weight_kg": (0, 80, 2), "cost": (4, 400, 2)}),
}
AGGREGATIONS = ("sum", "count", "mean", "max", "top3", "filtered-sum", "monthly-sum")


def _fmt(x: float, decimals: int) -> str:
    return f"{x:.{decimals}f}" if decimals else str(round(x))


class TableReport(Family):
    name = "table-report"
    category = "analysis & reasoning"
    subcategory = "reporting"
    summary = "a grouped report (sum, count, mean, max, top 3, filtered, per month) over one of five table schemas"

    def templates(self, level):
        return tuple(f"{s}:{a}" for s in SCHEMAS for a in AGGREGATIONS)

    def build(self, rng, level, template="default"):
        schema, agg = template.split(":")
        file, id_col, date_col, cats, nums = SCHEMAS[schema]
        group = rng.choice(sorted(cats))
        other = next(c for c in sorted(cats) if c != group) if len(cats) > 1 else group
        measure = rng.choice(sorted(nums))
        lo, hi, dec = nums[measure]
        n = (15, 40, 80)[level - 1] + rng.randint(0, 10)
        values = {c: rng.sample(list(v), k=min(len(v), 2 + level)) for c, v in cats.items()}
        year = rng.randint(2019, 2025)
        months = sorted(rng.sample(range(1, 13), k=2 + level))
        rows = []
        for i in range(n):
            day = dt.date(year, rng.choice(months), rng.randint(1, 28))
            x = round(rng.uniform(lo, hi), dec) if dec else rng.randint(lo, hi)
            shown = "" if level >= 2 and rng.random() < 0.1 else _fmt(x, dec)
            rows.append({id_col: f"{schema[0].upper()}{i + 1:05d}", date_col: day.isoformat(),
                         **{c: rng.choice(values[c]) for c in sorted(cats)}, measure: shown,
                         **{m: _fmt(round(rng.uniform(*nums[m][:2]), nums[m][2]), nums[m][2])
                            for m in sorted(nums) if m != measure}})
        keep = rows
        wanted = rng.choice(values[other])
        if agg == "filtered-sum":
            keep = [r for r in rows if r[other] == wanted]
        counted = [r for r in keep if r[measure] != ""]
        groups: dict = defaultdict(list)
        for r in (keep if agg == "count" else counted):
            k = (r[group], r[date_col][:7]) if agg == "monthly-sum" else (r[group],)
            groups[k].append(float(r[measure]) if r[measure] != "" else 0.0)
        col = {"sum": f"total_{measure}", "count": "rows", "mean": f"mean_{measure}", "max": f"max_{measure}",
               "top3": f"total_{measure}", "filtered-sum": f"total_{measure}", "monthly-sum": f"total_{measure}"}[agg]
        out_dec = 2 if agg == "mean" else dec
        value = {"count": len, "mean": lambda v: sum(v) / len(v), "max": max}.get(agg, sum)
        table = [(*k, value(v)) for k, v in groups.items()]
        if agg == "top3":
            table = sorted(table, key=lambda t: (-round(t[-1], 6), t[0]))[:3]
        else:
            table.sort(key=lambda t: t[:-1])
        header = [group, "month", col] if agg == "monthly-sum" else [group, col]
        expected = to_csv([header, *[[*t[:-1], _fmt(t[-1], 0 if agg == "count" else out_dec)] for t in table]])
        columns = [id_col, date_col, *sorted(cats), measure, *[m for m in sorted(nums) if m != measure]]
        workspace = {file: to_csv([columns, *[[r[c] for c in columns] for r in rows]])}
        how = {
            "sum": f"the total {measure} of each {group}",
            "count": f"how many rows each {group} has",
            "mean": f"the mean {measure} of each {group}, rounded to 2 decimals",
            "max": f"the largest {measure} of each {group}",
            "top3": f"the three {group} values with the largest total {measure}, largest first (ties by name)",
            "filtered-sum": f"the total {measure} of each {group}, counting only rows whose {other} is {wanted}",
            "monthly-sum": f"the total {measure} of each {group} in each calendar month (YYYY-MM, from {date_col})",
        }[agg]
        order = "" if agg == "top3" else f" Sort the rows by {', then '.join(header[:-1])}."
        per = "three rows" if agg == "top3" else f"one row per {group}" + (" and month" if agg == "monthly-sum" else "")
        instruction = f"""
{file} has one row per {schema[:-1]}. Write report.csv with the header row {",".join(header)}
and {per}: {how}.{order}
"""
        if dec and agg != "count":
            instruction += f"Write {col} with {out_dec} decimals.\n"
        if level >= 2:
            instruction += (f"Some rows have no {measure}; they still count as rows.\n" if agg == "count" else
                            f"Some rows have no {measure}: leave them out.\n")
        checks = csv_check("report.csv", "expected.csv", tolerance=0.011)
        return Spec(instruction, workspace, checks, [read(file), write("report.csv", expected)],
                    hidden={"expected.csv": expected}, tags=["csv", "aggregation", "report"], template=template)


FAMILIES = (TableReport(),)
