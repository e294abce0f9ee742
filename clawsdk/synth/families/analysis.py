"""Analysis & reasoning: reconciling two CSVs, rolling up sales."""

from __future__ import annotations

import csv
import datetime as dt
import io
from collections import defaultdict

from clawsdk.synth.families import pools
from clawsdk.synth.families.base import Family, Spec, csv_check, dump_json, json_check, read, write


def to_csv(rows: list[list]) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue()


class CsvReconcile(Family):
    name = "csv-reconcile"
    category = "analysis & reasoning"
    subcategory = "finance"
    summary = "reconcile a bank statement against a ledger into a JSON report"

    def build(self, rng, level, template="default"):
        n = (8, 18, 35)[level - 1] + rng.randint(0, 5)
        prefix = rng.choice(("INV", "PO", "TX", "REF", "ORD"))
        refs = rng.sample(range(100, 9999), k=n)
        start = dt.date(2024, rng.randint(1, 12), 1)
        bank, ledger = [], []
        missing_in_ledger, missing_in_bank, mismatches = [], [], []
        matched = 0
        for r in refs:
            ref = f"{prefix}-{r:04d}"
            day = start + dt.timedelta(days=rng.randint(0, 27))
            amount = round(rng.uniform(5, 5000), 2)
            payee = f"{rng.choice(pools.COMPANIES)} {rng.choice(('Ltd', 'GmbH', 'Inc', 'LLC'))}"
            fate = rng.choices(("match", "no_ledger", "no_bank", "mismatch"), (6, 1, 1, 1))[0]
            if fate != "no_bank":
                bank.append([day.isoformat(), f"Payment {payee}", f"{amount:.2f}", ref])
            if fate != "no_ledger":
                lamount = amount
                if fate == "mismatch":
                    lamount = round(amount + rng.choice((-1, 1)) * rng.choice((0.1, 1, 10, 100, 0.01)), 2)
                    if lamount <= 0:
                        lamount = round(amount + 1, 2)
                shown_ref = ref.lower() if level == 3 and rng.random() < 0.3 else ref
                shown_amount = f"${lamount:,.2f}" if level == 3 and rng.random() < 0.5 else f"{lamount:.2f}"
                ledger.append([shown_ref, (day - dt.timedelta(days=rng.randint(0, 2))).isoformat(), shown_amount,
                               payee])
            if fate == "match":
                matched += 1
            elif fate == "no_ledger":
                missing_in_ledger.append(ref)
            elif fate == "no_bank":
                missing_in_bank.append(ref)
            else:
                mismatches.append({"ref": ref, "bank": amount, "ledger": lamount})
        if not (missing_in_bank or missing_in_ledger or mismatches):
            ref = f"{prefix}-{rng.randint(10000, 99999)}"
            amount = round(rng.uniform(5, 500), 2)
            bank.append([start.isoformat(), "Payment unknown", f"{amount:.2f}", ref])
            missing_in_ledger.append(ref)
        rng.shuffle(bank)
        rng.shuffle(ledger)
        expected = {"matched": matched, "missing_in_ledger": sorted(missing_in_ledger),
                    "missing_in_bank": sorted(missing_in_bank),
                    "amount_mismatches": sorted(mismatches, key=lambda m: m["ref"])}
        files = {"bank.csv": to_csv([["date", "description", "amount", "reference"], *bank]),
                 "ledger.csv": to_csv([["reference", "date", "amount", "payee"], *ledger])}
        instruction = """
Reconcile bank.csv (our bank statement) against ledger.csv (our books). Entries are the same
payment when their reference matches. Write reconciliation.json with:
  "matched"            - how many references are in both files with the same amount
  "missing_in_ledger"  - references in the bank statement but not in the ledger, sorted
  "missing_in_bank"    - references in the ledger but not in the bank statement, sorted
  "amount_mismatches"  - for references in both with different amounts, objects
                         {"ref": ..., "bank": <amount>, "ledger": <amount>} sorted by ref,
                         amounts as numbers
Dates may differ by a day or two between the files; that is fine.
"""
        if level == 3:
            instruction += ("The ledger was typed by hand: references may be in lower case (report them in upper "
                            "case) and amounts may carry a $ sign and thousands separators.\n")
        solution = [read("bank.csv"), read("ledger.csv"), write("reconciliation.json", dump_json(expected))]
        return Spec(instruction, files, json_check("reconciliation.json", "expected.json", tolerance=0.005),
                    solution, hidden={"expected.json": dump_json(expected)}, tags=["csv", "finance", "json"])


class SalesRollup(Family):
    name = "sales-rollup"
    category = "analysis & reasoning"
    subcategory = "data analysis"
    summary = "roll up sales rows into revenue per region and month"

    def build(self, rng, level, template="default"):
        n = (15, 40, 80)[level - 1] + rng.randint(0, 10)
        regions = rng.sample(pools.REGIONS, k=1 + level)
        products = rng.sample(pools.PRODUCTS, k=3 + level)
        prices = {p: round(rng.uniform(1, 200), 2) for p in products}
        year = rng.randint(2019, 2024)
        months = rng.sample(range(1, 13), k=level + 1)
        rows, totals = [], defaultdict(lambda: [0, 0.0])
        for i in range(n):
            region, product = rng.choice(regions), rng.choice(products)
            date = dt.date(year, rng.choice(months), rng.randint(1, 28))
            units = rng.randint(1, 40)
            status = "refunded" if level >= 2 and rng.random() < 0.15 else "paid"
            row = [f"S{i + 1:05d}", date.isoformat(), region, product, units, f"{prices[product]:.2f}"]
            if level >= 2:
                row.append(status)
            rows.append(row)
            if status == "paid":
                key = (region, f"{date:%Y-%m}")
                totals[key][0] += units
                totals[key][1] += units * prices[product]
        header = ["order_id", "date", "region", "product", "units", "unit_price"] + (["status"] if level >= 2 else [])
        out = [["region", "month", "units", "revenue"]]
        for (region, month) in sorted(totals):
            units, revenue = totals[(region, month)]
            out.append([region, month, units, f"{revenue:.2f}"])
        instruction = """
sales.csv has one row per order. Write summary.csv with the header row region,month,units,revenue
and one row per region and calendar month (YYYY-MM) that has orders: the total units and the
revenue (units x unit_price summed, rounded to 2 decimals). Sort by region, then month.
"""
        if level >= 2:
            instruction += "Only count orders whose status is paid; refunded orders do not count.\n"
        checks = csv_check("summary.csv", "expected.csv", tolerance=0.011)
        expected = to_csv(out)
        solution = [read("sales.csv"), write("summary.csv", expected)]
        return Spec(instruction, {"sales.csv": to_csv([header, *rows])}, checks, solution,
                    hidden={"expected.csv": expected}, tags=["csv", "aggregation"])


FAMILIES = (CsvReconcile(), SalesRollup())
