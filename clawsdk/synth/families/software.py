"""Software development: fixing a failing unit test, bumping a version from commits."""

from __future__ import annotations

from clawsdk.synth.families import pools
from clawsdk.synth.families.base import Family, Spec, edit, exec_, read, write

# name -> (correct source, (buggy line, fixed line), test-case maker(rng) -> list of (args, expected))
FUNCTIONS = {
    "clamp": (
        "def clamp(x, lo, hi):\n    \"\"\"x limited to the range [lo, hi].\"\"\"\n    return max(lo, min(x, hi))\n",
        ("    return max(lo, min(x, lo))\n", "    return max(lo, min(x, hi))\n"),
        lambda r: [((v, lo, lo + w), max(lo, min(v, lo + w)))
                   for v, lo, w in ((r.randint(-50, 50), r.randint(-10, 0), r.randint(5, 20)) for _ in range(3))]
                  + [((100, 0, 10), 10)],
    ),
    "mean": (
        "def mean(xs):\n    \"\"\"The arithmetic mean of a non-empty list.\"\"\"\n    return sum(xs) / len(xs)\n",
        ("    return sum(xs) / (len(xs) - 1)\n", "    return sum(xs) / len(xs)\n"),
        lambda r: [((xs,), sum(xs) / len(xs)) for xs in ([r.randint(1, 90) for _ in range(r.randint(2, 6))]
                                                      for _ in range(3))],
    ),
    "slugify": (
        "def slugify(text):\n    \"\"\"Lower-case words joined by hyphens.\"\"\"\n"
        "    return \"-\".join(text.lower().split())\n",
        ("    return \"-\".join(text.split())\n", "    return \"-\".join(text.lower().split())\n"),
        lambda r: [((t,), "-".join(t.lower().split())) for t in
                   (f"{r.choice(pools.WORDS).capitalize()} {r.choice(pools.TOPICS).upper()}  {r.choice(pools.WORDS)}"
                    for _ in range(3))],
    ),
    "count_words": (
        "def count_words(text):\n    \"\"\"How many whitespace-separated words the text has.\"\"\"\n"
        "    return len(text.split())\n",
        ("    return len(text.split(\" \"))\n", "    return len(text.split())\n"),
        lambda r: [((t,), len(t.split())) for t in
                   (" ".join(r.choice(pools.WORDS) for _ in range(r.randint(2, 6))) + "  " + r.choice(pools.WORDS)
                    for _ in range(3))],
    ),
    "is_leap": (
        "def is_leap(year):\n    \"\"\"Whether the Gregorian year is a leap year.\"\"\"\n"
        "    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)\n",
        ("    return year % 4 == 0 and year % 100 != 0\n",
         "    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)\n"),
        lambda r: [((y,), y % 4 == 0 and (y % 100 != 0 or y % 400 == 0))
                   for y in (r.choice((1600, 2000, 2400)), r.randint(1900, 2100), 1900, r.randint(1, 500) * 4)],
    ),
    "last_n": (
        "def last_n(items, n):\n    \"\"\"The last n items (none when n is 0).\"\"\"\n"
        "    return items[-n:] if n else []\n",
        ("    return items[-n - 1:] if n else []\n", "    return items[-n:] if n else []\n"),
        lambda r: [((xs, k), xs[-k:] if k else []) for xs, k in
                   (([r.randint(0, 9) for _ in range(6)], r.randint(1, 4)) for _ in range(3))] + [(([1, 2], 0), [])],
    ),
    "percent": (
        "def percent(part, whole):\n    \"\"\"part as a percentage of whole, rounded to one decimal.\"\"\"\n"
        "    return round(100 * part / whole, 1)\n",
        ("    return round(100 * part / whole)\n", "    return round(100 * part / whole, 1)\n"),
        lambda r: [((p, w), round(100 * p / w, 1)) for p, w in
                   ((r.randint(1, 99), r.choice((3, 7, 9, 11, 13))) for _ in range(9)) if p % w][:3],
    ),
    "initials": (
        "def initials(name):\n    \"\"\"Upper-case initials of each part of a name, e.g. 'ada lovelace' -> 'AL'.\"\"\"\n"
        "    return \"\".join(part[0].upper() for part in name.split())\n",
        ("    return \"\".join(part[0] for part in name.split())\n",
         "    return \"\".join(part[0].upper() for part in name.split())\n"),
        lambda r: [((f"{a.lower()} {b.lower()}",), (a[0] + b[0]).upper()) for a, b in
                   (pools.person(r) for _ in range(3))],
    ),
}
BUGGY = list(FUNCTIONS)


def _bugged(name: str) -> str:
    src, (bad, good), _ = FUNCTIONS[name]
    assert good in src
    return src.replace(good, bad)


class FixFailingTest(Family):
    name = "fix-failing-test"
    category = "software development"
    subcategory = "debugging"
    summary = "find and fix the bug that makes a module's unit tests fail"

    def build(self, rng, level):
        module = f"{rng.choice(pools.TOPICS)}_{rng.choice(('utils', 'helpers', 'tools', 'lib'))}"
        n_funcs = (2, 4, 6)[level - 1]
        names = rng.sample(BUGGY, k=n_funcs)
        bugs = set(rng.sample(names, k=1 if level < 3 else 2))
        src = "\"\"\"Small helpers used across the project.\"\"\"\n"
        fixed = src
        for n in names:
            body = FUNCTIONS[n][0]
            src += "\n\n" + (_bugged(n) if n in bugs else body)
            fixed += "\n\n" + body
        tests = ["import unittest", "", f"from {module} import {', '.join(sorted(names))}", "", "",
                 f"class {module.title().replace('_', '')}Test(unittest.TestCase):"]
        for n in names:
            cases = FUNCTIONS[n][2](rng)
            tests.append(f"    def test_{n}(self):")
            for args, want in cases:
                call = f"{n}({', '.join(repr(a) for a in args)})"
                op = "assertAlmostEqual" if isinstance(want, float) else "assertEqual"
                tests.append(f"        self.{op}({call}, {want!r})")
            tests.append("")
        tests += ["", 'if __name__ == "__main__":', "    unittest.main()", ""]
        test_src = "\n".join(tests)
        test_path = f"tests/test_{module}.py"
        workspace = {f"{module}.py": src, test_path: test_src, "README.md":
                     f"# {module}\n\nRun the tests with `python3 -m unittest discover -s tests`\n"}
        run_tests = "python3 -B -m unittest discover -s tests 2>&1 | tail -n 20"
        instruction = f"""
The unit tests in {test_path} fail. Find the bug in {module}.py and fix it so that all the
tests pass. Do not change the tests; they describe the intended behaviour.
"""
        if level == 3:
            instruction = instruction.replace("the bug", "the bugs")
        hidden_test = test_src.replace("unittest.main()", "unittest.main(verbosity=0)")
        checks = [{"type": "command", "name": "the unit tests pass", "weight": 3,
                   # a fresh bytecode cache: a stale .pyc of the same size and second would hide the fix
                   "run": f'PYTHONPATH="$CLAWSDK_WORKSPACE" PYTHONPYCACHEPREFIX="$CLAWSDK_HIDDEN/.pycache" '
                          f'python3 "$CLAWSDK_HIDDEN/test_{module}.py"'}]
        solution = [exec_(run_tests), read(test_path), read(f"{module}.py")]
        for n in names:
            if n in bugs:
                bad, good = FUNCTIONS[n][1]
                solution.append(edit(f"{module}.py", bad, good))
        solution.append(exec_(run_tests))
        return Spec(instruction, workspace, checks, solution, hidden={f"test_{module}.py": hidden_test},
                    tags=["python", "unittest", "debugging"])


KINDS = ("feat", "fix", "perf", "docs", "chore", "refactor", "test")


class SemverBump(Family):
    name = "semver-bump"
    category = "software development"
    subcategory = "release engineering"
    summary = "bump a version and write a changelog section from conventional commits"

    def build(self, rng, level):
        version = (rng.randint(0, 4), rng.randint(0, 20), rng.randint(0, 30))
        n = (4, 8, 12)[level - 1] + rng.randint(0, 3)
        commits = []
        for _ in range(n):
            kind = rng.choices(KINDS, (3, 4, 1, 2, 2, 1, 1))[0]
            scope = rng.choice(pools.TOPICS) if level == 3 and rng.random() < 0.6 else None
            text = f"{rng.choice(pools.VERBS)} {rng.choice(pools.TOPICS)} {rng.choice(pools.WORDS)}"
            commits.append((kind, scope, text, False))
        if not any(k in ("feat", "fix", "perf") for k, *_ in commits):
            commits[0] = ("fix", None, commits[0][2], False)
        if level >= 2 and rng.random() < 0.3:
            i = rng.randrange(n)
            k, s, t, _ = commits[i]
            commits[i] = ("feat" if k not in ("feat", "fix") else k, s, t, True)
        major, minor, patch = version
        if any(b for *_, b in commits):
            new = (major + 1, 0, 0)
        elif any(k == "feat" for k, *_ in commits):
            new = (major, minor + 1, 0)
        else:
            new = (major, minor, patch + 1)
        sha = lambda: "".join(rng.choice("0123456789abcdef") for _ in range(7))  # noqa: E731
        log_lines = []
        for k, s, t, b in commits:
            head = k + (f"({s})" if s else "") + ("!" if b else "")
            log_lines.append(f"{sha()} {head}: {t}")
        old_v, new_v = ".".join(map(str, version)), ".".join(map(str, new))
        workspace = {"VERSION": old_v + "\n", "commits.txt": "\n".join(log_lines) + "\n"}
        checks = [{"type": "text_equals", "name": f"VERSION is {new_v}", "path": "VERSION", "text": new_v}]
        instruction = f"""
commits.txt lists the commits since release {old_v}, newest last, in Conventional Commits
style ("type(scope): text"; a "!" after the type or scope marks a breaking change). Bump the
version in VERSION following semantic versioning: a breaking change bumps the major version,
otherwise a feat bumps the minor version, otherwise (fix, perf) the patch version.
"""
        solution = [read("VERSION"), read("commits.txt"), write("VERSION", new_v + "\n")]
        if level >= 2:
            def bullet(k, s, t, b):
                return "- " + (f"**{s}:** " if s else "") + t + (" (BREAKING)" if b else "")

            feats = [bullet(*c) for c in commits if c[0] == "feat"]
            fixes = [bullet(*c) for c in commits if c[0] in ("fix", "perf")]
            section = f"## {new_v}\n"
            if feats:
                section += "\n### Features\n\n" + "\n".join(feats) + "\n"
            if fixes:
                section += "\n### Fixes\n\n" + "\n".join(fixes) + "\n"
            old_log = (f"# Changelog\n\n## {old_v}\n\n### Fixes\n\n- {rng.choice(pools.VERBS)} "
                       f"{rng.choice(pools.TOPICS)}\n")
            workspace["CHANGELOG.md"] = old_log
            expected = old_log.replace("# Changelog\n\n", "# Changelog\n\n" + section + "\n", 1)
            checks.append({"type": "text_equals", "name": "CHANGELOG.md has the new section", "path": "CHANGELOG.md",
                           "expected_file": "CHANGELOG.expected.md", "weight": 2})
            instruction += f"""
Then add a section for the new version at the top of CHANGELOG.md (right under "# Changelog",
above the {old_v} section), in the same layout as the existing one: "## <version>", then
"### Features" listing the feat commits and "### Fixes" listing the fix and perf commits, in
commit order, one "- text" bullet each (leave out a heading with no entries; other types are
not listed). Separate headings and lists with one blank line, and end the section with a
blank line.
"""
            if level == 3:
                instruction += ('A commit with a scope is listed as "- **scope:** text", and a breaking one gets '
                                '" (BREAKING)" after its text.\n')
            else:
                instruction += 'A breaking commit gets " (BREAKING)" after its text.\n'
            solution += [read("CHANGELOG.md"), edit("CHANGELOG.md", "# Changelog\n\n",
                                                     "# Changelog\n\n" + section + "\n")]
            return Spec(instruction, workspace, checks, solution, hidden={"CHANGELOG.expected.md": expected},
                        tags=["semver", "changelog", "git"])
        return Spec(instruction, workspace, checks, solution, tags=["semver"])


FAMILIES = (FixFailingTest(), SemverBump())
