"""Programs and the bugs a mutation operator puts into them, for `fix-failing-test`.

A template is (program, operator): a small function and one kind of mistake in it (off by
one, wrong comparison, swapped operands, missing case, wrong default, ...). Names, constants
and test inputs are the parameters. The expected test values come from running the correct
program, and a mutation only counts when the tests catch it (`catching_cases`), so every
generated task fails untouched and passes once the bug is fixed.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Cases = Callable[[random.Random, dict[str, str]], list[tuple]]


@dataclass(frozen=True)
class Program:
    id: str
    names: dict[str, tuple[str, ...]]  # placeholder -> choices (identifiers, or constants as text)
    source: str  # str.format template over the placeholders
    mutations: dict[str, tuple[str, str]]  # operator -> (correct fragment, buggy fragment)
    cases: Cases  # argument tuples; the expected values are computed from the correct program


OPERATORS = ("off-by-one", "wrong-comparison", "wrong-operator", "swapped-operands", "missing-case",
             "wrong-default", "wrong-variable", "wrong-constant", "wrong-argument", "missing-step")


def _ints(r: random.Random, n: int, lo: int = -20, hi: int = 60) -> list[int]:
    return [r.randint(lo, hi) for _ in range(n)]


def _clamp_cases(r, p):
    out = []
    for _ in range(3):
        lo = r.randint(-10, 0)
        hi = lo + r.randint(5, 20)
        out += [(r.randint(-50, 50), lo, hi), (lo - r.randint(1, 9), lo, hi), (hi + r.randint(1, 9), lo, hi)]
    return out


def _grade_cases(r, p):
    a, b, c = (int(p[k]) for k in ("a", "b", "c"))
    return [(a,), (b,), (c,), (b + 1,), (c - 1,), (r.randint(0, c - 1),), (r.randint(a, 100),)]


WORDS = ("harbor", "meadow", "copper", "lantern", "orbit", "cedar", "quartz", "willow", "falcon", "ember")

PROGRAMS: tuple[Program, ...] = (
    Program(
        "clamp",
        {"fn": ("clamp", "bound", "limit_to", "clip"), "x": ("x", "value", "v", "n"),
         "lo": ("lo", "low", "minimum"), "hi": ("hi", "high", "maximum")},
        'def {fn}({x}, {lo}, {hi}):\n    """{x} limited to the range [{lo}, {hi}]."""\n'
        "    if {x} < {lo}:\n        return {lo}\n    if {x} > {hi}:\n        return {hi}\n    return {x}\n",
        {"wrong-comparison": ("if {x} > {hi}:", "if {x} < {hi}:"),
         "missing-case": ("    if {x} > {hi}:\n        return {hi}\n    return {x}\n", "    return {x}\n"),
         "wrong-variable": ("{lo}:\n        return {lo}", "{lo}:\n        return {hi}")},
        _clamp_cases,
    ),
    Program(
        "mean",
        {"fn": ("mean", "average", "avg"), "xs": ("xs", "values", "nums", "data")},
        'def {fn}({xs}):\n    """The arithmetic mean of {xs}; 0.0 for an empty list."""\n'
        "    if not {xs}:\n        return 0.0\n    return sum({xs}) / len({xs})\n",
        {"off-by-one": ("/ len({xs})", "/ (len({xs}) - 1)"),
         "missing-case": ("    if not {xs}:\n        return 0.0\n    return sum", "    return sum"),
         "wrong-operator": ("sum({xs}) / len", "sum({xs}) * len")},
        lambda r, p: [(_ints(r, r.randint(2, 6), 1, 90),) for _ in range(3)] + [([],)],
    ),
    Program(
        "count_between",
        {"fn": ("count_between", "count_in_range", "how_many_in"), "xs": ("xs", "values", "readings"),
         "lo": ("lo", "start", "low"), "hi": ("hi", "stop", "high"), "n": ("n", "count", "total"),
         "v": ("v", "x", "item")},
        'def {fn}({xs}, {lo}, {hi}):\n    """How many values in {xs} lie in the half-open range [{lo}, {hi})."""\n'
        "    {n} = 0\n    for {v} in {xs}:\n        if {lo} <= {v} < {hi}:\n            {n} += 1\n    return {n}\n",
        {"wrong-comparison": ("{lo} <= {v} < {hi}", "{lo} < {v} < {hi}"),
         "off-by-one": ("    {n} = 0\n", "    {n} = 1\n"),
         "wrong-operator": ("{n} += 1", "{n} -= 1")},
        lambda r, p: [(xs + [lo, lo + 7], lo, lo + 7) for xs, lo in
                      ((_ints(r, r.randint(3, 7)), r.randint(-5, 20)) for _ in range(3))],
    ),
    Program(
        "last_n",
        {"fn": ("last_n", "tail", "most_recent"), "items": ("items", "xs", "entries", "log"),
         "k": ("n", "k", "count")},
        'def {fn}({items}, {k}):\n    """The last {k} of {items}, oldest first; none when {k} is 0 or less."""\n'
        "    if {k} <= 0:\n        return []\n    return {items}[-{k}:]\n",
        {"off-by-one": ("[-{k}:]", "[-{k} - 1:]"),
         "missing-case": ("    if {k} <= 0:\n        return []\n    return {items}", "    return {items}"),
         "wrong-comparison": ("if {k} <= 0:", "if {k} < 0:")},
        lambda r, p: [(_ints(r, 6, 0, 9), r.randint(1, 4)) for _ in range(3)] + [([1, 2], 0)],
    ),
    Program(
        "join_words",
        {"fn": ("join_words", "join_names", "glue"), "words": ("words", "parts", "names"),
         "sep": ("sep", "separator", "joiner"), "w": ("w", "word", "part")},
        'def {fn}({words}, {sep}=", "):\n    """The non-empty {words} joined with {sep} (a comma and a space '
        'by default)."""\n    return {sep}.join({w} for {w} in {words} if {w})\n',
        {"wrong-default": ('{sep}=", "', '{sep}=","'),
         "missing-case": ("for {w} in {words} if {w})", "for {w} in {words})")},
        lambda r, p: [(r.sample(WORDS, 3) + [""] + r.sample(WORDS, 1),), (r.sample(WORDS, 2), " / "),
                      (["", r.choice(WORDS)],)],
    ),
    Program(
        "percent",
        {"fn": ("percent", "as_percent", "share"), "part": ("part", "done", "hits"),
         "whole": ("whole", "total", "tries"), "digits": ("digits", "places", "ndigits")},
        'def {fn}({part}, {whole}, {digits}=1):\n    """{part} as a percentage of {whole}, rounded to {digits} '
        'decimals."""\n    return round(100 * {part} / {whole}, {digits})\n',
        {"wrong-default": ("{digits}=1", "{digits}=0"),
         "swapped-operands": ("100 * {part} / {whole}", "100 * {whole} / {part}"),
         "wrong-operator": ("100 * {part}", "100 + {part}")},
        lambda r, p: [(pt, w) for pt, w in ((r.randint(1, 99), r.choice((3, 7, 9, 11, 13)))
                                            for _ in range(12)) if pt % w][:3] + [(1, 3, 2)],
    ),
    Program(
        "is_leap",
        {"fn": ("is_leap", "leap_year", "is_leap_year"), "year": ("year", "y", "yr")},
        'def {fn}({year}):\n    """Whether {year} is a leap year in the Gregorian calendar."""\n'
        "    if {year} % 400 == 0:\n        return True\n    if {year} % 100 == 0:\n        return False\n"
        "    return {year} % 4 == 0\n",
        {"missing-case": ('"""\n    if {year} % 400 == 0:\n        return True\n    if', '"""\n    if'),
         "wrong-comparison": ("return {year} % 4 == 0", "return {year} % 4 != 0"),
         "wrong-constant": ("% 100 == 0", "% 10 == 0")},
        lambda r, p: [(r.choice((1600, 2000, 2400)),), (1900,), (r.randint(1, 500) * 4 + 1,), (2024,), (1970,),
                      (r.randint(480, 520) * 4,)],
    ),
    Program(
        "running_total",
        {"fn": ("running_total", "cumulative", "prefix_sums"), "xs": ("xs", "amounts", "steps"),
         "out": ("out", "totals", "result"), "acc": ("acc", "running", "so_far"), "v": ("v", "x", "amount")},
        'def {fn}({xs}):\n    """Running totals: element i is the sum of the first i + 1 values of {xs}."""\n'
        "    {out} = []\n    {acc} = 0\n    for {v} in {xs}:\n        {acc} += {v}\n        {out}.append({acc})\n"
        "    return {out}\n",
        {"off-by-one": ("        {acc} += {v}\n        {out}.append({acc})", "        {out}.append({acc})\n        "
                        "{acc} += {v}"),
         "wrong-operator": ("{acc} += {v}", "{acc} -= {v}"),
         "wrong-constant": ("    {acc} = 0\n", "    {acc} = 1\n")},
        lambda r, p: [(_ints(r, r.randint(2, 6), 1, 30),) for _ in range(3)],
    ),
    Program(
        "find_index",
        {"fn": ("find_index", "index_of", "position"), "xs": ("xs", "items", "haystack"),
         "target": ("target", "needle", "wanted"), "i": ("i", "idx", "pos"), "v": ("v", "x", "item")},
        'def {fn}({xs}, {target}):\n    """The index of the first {target} in {xs}, or -1 when it is not there."""\n'
        "    for {i}, {v} in enumerate({xs}):\n        if {v} == {target}:\n            return {i}\n    return -1\n",
        {"wrong-default": ("    return -1\n", "    return 0\n"),
         "wrong-comparison": ("if {v} == {target}", "if {v} != {target}"),
         "off-by-one": ("return {i}\n", "return {i} + 1\n")},
        lambda r, p: [(xs, r.choice(xs)) for xs in (r.sample(range(50), 6) for _ in range(2))] + [([3, 4], 9)],
    ),
    Program(
        "pad_left",
        {"fn": ("pad_left", "right_align", "zero_pad"), "text": ("text", "s", "label"),
         "width": ("width", "size", "n"), "fill": ("fill", "pad", "char")},
        'def {fn}({text}, {width}, {fill}="0"):\n    """{text} right-aligned in {width} characters, filled on '
        'the left with {fill}."""\n    if len({text}) >= {width}:\n        return {text}\n'
        "    return {fill} * ({width} - len({text})) + {text}\n",
        {"wrong-default": ('{fill}="0"', '{fill}=" "'),
         "swapped-operands": ("{fill} * ({width} - len({text})) + {text}", "{text} + {fill} * ({width} - len({text}))"),
         "off-by-one": ("({width} - len({text}))", "({width} - len({text}) - 1)")},
        lambda r, p: [(str(r.randint(1, 999)), r.randint(5, 8)), (r.choice(WORDS), 9, "."), ("12345", 3)],
    ),
    Program(
        "grade",
        {"fn": ("grade", "letter_grade", "band"), "score": ("score", "points", "mark"),
         "a": ("90", "85", "80"), "b": ("75", "70"), "c": ("60", "55", "50")},
        'def {fn}({score}):\n    """The letter for a score out of 100: A from {a}, B from {b}, C from {c}, else F."""\n'
        '    if {score} >= {a}:\n        return "A"\n    if {score} >= {b}:\n        return "B"\n'
        '    if {score} >= {c}:\n        return "C"\n    return "F"\n',
        {"wrong-comparison": ("if {score} >= {b}:", "if {score} > {b}:"),
         "missing-case": ('    if {score} >= {c}:\n        return "C"\n    return "F"', '    return "F"')},
        _grade_cases,
    ),
    Program(
        "safe_div",
        {"fn": ("safe_div", "ratio", "divide"), "a": ("a", "num", "top"), "b": ("b", "den", "bottom"),
         "default": ("default", "fallback", "otherwise")},
        'def {fn}({a}, {b}, {default}=0.0):\n    """{a} divided by {b}, or {default} when {b} is 0."""\n'
        "    if {b} == 0:\n        return {default}\n    return {a} / {b}\n",
        {"swapped-operands": ("return {a} / {b}", "return {b} / {a}"),
         "missing-case": ("    if {b} == 0:\n        return {default}\n    return", "    return"),
         "wrong-default": ("{default}=0.0", "{default}=None")},
        lambda r, p: [(r.randint(1, 99), r.randint(2, 9)) for _ in range(2)] + [(5, 0), (3, 0, -1.0)],
    ),
    Program(
        "count_words",
        {"fn": ("count_words", "word_count", "n_words"), "text": ("text", "line", "sentence")},
        'def {fn}({text}):\n    """How many whitespace-separated words {text} has."""\n    return len({text}.split())\n',
        {"wrong-argument": (".split())", '.split(" "))')},
        lambda r, p: [(" ".join(r.sample(WORDS, r.randint(2, 5))) + "  " + r.choice(WORDS),), ("",),
                      (r.choice(WORDS) + "\t" + r.choice(WORDS),)],
    ),
    Program(
        "dedupe",
        {"fn": ("dedupe", "unique", "distinct"), "items": ("items", "xs", "tags"),
         "seen": ("seen", "done", "known"), "out": ("out", "result", "kept"), "x": ("x", "item", "tag")},
        'def {fn}({items}):\n    """{items} without repeats, keeping the first of each, in order."""\n'
        "    {seen} = set()\n    {out} = []\n    for {x} in {items}:\n        if {x} not in {seen}:\n"
        "            {seen}.add({x})\n            {out}.append({x})\n    return {out}\n",
        {"wrong-comparison": ("if {x} not in {seen}", "if {x} in {seen}"),
         "missing-step": ("{seen}:\n            {seen}.add({x})\n            {out}", "{seen}:\n            {out}")},
        lambda r, p: [([r.choice(WORDS[:4]) for _ in range(6)],), (r.sample(WORDS, 3),)],
    ),
)

BY_ID = {p.id: p for p in PROGRAMS}
TEMPLATES: tuple[str, ...] = tuple(f"{p.id}:{op}" for p in PROGRAMS for op in p.mutations)


def pick_names(rng: random.Random, program: Program) -> dict[str, str]:
    """One name per placeholder, no two placeholders of a program with the same identifier."""
    out: dict[str, str] = {}
    for key, choices in program.names.items():
        free = [c for c in choices if c not in out.values()] or list(choices)
        out[key] = rng.choice(free)
    return out


def run(source: str, fn: str, cases: list[tuple]) -> list[Any]:
    """What fn returns on each case (an exception's type name when it raises)."""
    scope: dict[str, Any] = {}
    exec(compile(source, f"<{fn}>", "exec"), scope)  # noqa: S102 - our own generated program, never user input
    out = []
    for args in cases:
        try:
            out.append(scope[fn](*[list(a) if isinstance(a, list) else a for a in args]))
        except Exception as e:  # a crash is one way a bug shows
            out.append(f"raises {type(e).__name__}")
    return out


@dataclass
class Instance:
    """One program with its names chosen: correct and buggy source, the edit that fixes it, test cases."""

    program: Program
    names: dict[str, str]
    correct: str
    buggy: str
    good: str
    bad: str
    cases: list[tuple]
    expected: list[Any]

    @property
    def fn(self) -> str:
        return self.names["fn"]

    def fix_in(self, module: str) -> tuple[str, str]:
        """(old, new) for an edit of module that fixes this bug: the buggy fragment alone when it occurs
        once in the module, else from the function's `def` line (unique: no two functions share a name)."""
        if module.count(self.bad) == 1:
            return self.bad, self.good
        prefix = self.buggy[: self.buggy.index(self.bad)]
        return prefix + self.bad, prefix + self.good


def instance(rng: random.Random, program: Program, operator: str | None, tries: int = 20) -> Instance:
    """The program with fresh names and cases; with an operator, its bug, with cases that catch it."""
    names = pick_names(rng, program)
    correct = program.source.format(**names)
    good, bad = (program.mutations[operator][0].format(**names), program.mutations[operator][1].format(**names)) \
        if operator else ("", "")
    buggy = correct.replace(good, bad) if operator else correct
    if operator and (correct.count(good) != 1 or buggy.count(bad) != 1):
        raise AssertionError(f"{program.id}:{operator}: the fragment must occur once in the program")
    for _ in range(tries):
        cases = program.cases(rng, names)
        expected = run(correct, names["fn"], cases)
        if not operator or run(buggy, names["fn"], cases) != expected:
            return Instance(program, names, correct, buggy, good, bad, cases, expected)
    raise AssertionError(f"{program.id}:{operator}: the test cases never catch the bug")


def held_out(inst: Instance, seed: str, tries: int = 8) -> tuple[list[tuple], list[Any]]:
    """More cases from the same generator, none of them in the tests, for the hidden check: a module that
    answers the tests' calls from a table built off their asserts, fixing nothing, fails these. They are
    drawn from their own generator (`seed`), so the task the agent sees does not change; the first draw
    that catches the bug is taken (a bug at a boundary only the tests touch may have none)."""
    rng = random.Random(seed)
    best: tuple[list[tuple], list[Any]] = ([], [])
    for _ in range(tries):
        fresh = {repr(c): c for c in inst.program.cases(rng, inst.names) if c not in inst.cases}
        cases = list(fresh.values())
        if not cases:
            continue
        expected = run(inst.correct, inst.fn, cases)
        if inst.bad and run(inst.buggy, inst.fn, cases) != expected:
            return cases, expected
        best = best if best[0] else (cases, expected)
    return best

