"""Software development: fixing a failing unit test (program x mutation templates), bumping a version."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from clawsdk.synth.families import bugs, difftest, pools
from clawsdk.synth.families.base import Family, Spec, edit, exec_, read, write

DIFFTEST = Path(difftest.__file__).read_text(encoding="utf-8")


class FixFailingTest(Family):
    name = "fix-failing-test"
    category = "software development"
    subcategory = "debugging"
    summary = "find and fix the bug that makes a module's unit tests fail"

    def templates(self, level):
        return bugs.TEMPLATES

    def build(self, rng, level, template="default"):
        module = f"{rng.choice(pools.TOPICS)}_{rng.choice(('utils', 'helpers', 'tools', 'lib'))}"
        first, operator = template.split(":")
        n_funcs = (2, 4, 6)[level - 1]
        others = rng.sample([p for p in bugs.PROGRAMS if p.id != first], k=n_funcs - 1)
        programs = [bugs.BY_ID[first], *others]
        rng.shuffle(programs)
        ops = {first: operator}
        if level == 3:  # a second bug, of another kind, in another function
            second = rng.choice(others)
            ops[second.id] = rng.choice([o for o in second.mutations if o != operator] or list(second.mutations))
        while True:  # function names clash rarely (a few share a pool word); draw again
            made = [bugs.instance(rng, p, ops.get(p.id)) for p in programs]
            fns = [m.fn for m in made]
            if len(set(fns)) == len(fns):
                break
        buggy = "\"\"\"Small helpers used across the project.\"\"\"\n" + "".join("\n\n" + m.buggy for m in made)
        tests = ["import unittest", "", f"from {module} import {', '.join(sorted(fns))}", "", "",
                 f"class {module.title().replace('_', '')}Test(unittest.TestCase):"]
        for m in made:
            tests.append(f"    def test_{m.fn}(self):")
            for args, want in zip(m.cases, m.expected, strict=True):
                call = f"{m.fn}({', '.join(repr(a) for a in args)})"
                op = "assertAlmostEqual" if isinstance(want, float) else "assertEqual"
                tests.append(f"        self.{op}({call}, {want!r})")
            tests.append("")
        tests += ["", 'if __name__ == "__main__":', "    unittest.main()", ""]
        test_src = "\n".join(tests)
        test_path = f"tests/test_{module}.py"
        workspace = {f"{module}.py": buggy, test_path: test_src, "README.md":
                     f"# {module}\n\nRun the tests with `python3 -m unittest discover -s tests`\n"}
        run_tests = "python3 -B -m unittest discover -s tests 2>&1 | tail -n 20"
        instruction = f"""
The unit tests in {test_path} fail. Find the bug in {module}.py and fix it so that all the
tests pass. Do not change the tests; they describe the intended behaviour.
"""
        if level == 3:
            instruction = instruction.replace("the bug", "the bugs")
        # the test calls answered by the agent's module before the hidden files exist, compared in a
        # process that imports nothing of the agent's (difftest.py says why); expected values hashed
        salt = hashlib.sha256(buggy.encode()).hexdigest()[:16]
        # the tests' calls, and as many the tests do not show: a module that answers the shown calls from a
        # table of their asserts fixes nothing, and fails those
        calls = [(m.fn, args, want) for m in made for args, want in zip(m.cases, m.expected, strict=True)]
        calls += [(m.fn, args, want) for m in made
                  for args, want in zip(*bugs.held_out(m, f"{salt}:{m.fn}"), strict=True)]
        cases = [[f"{fn}({', '.join(repr(a) for a in args)})", difftest.digest(salt, want)]
                 for fn, args, want in calls]
        hidden = {"difftest.py": DIFFTEST, "cases.json": json.dumps({"module": module, "salt": salt,
                                                                      "cases": cases}, indent=1) + "\n"}
        checks = [{"type": "command", "name": "the unit tests pass", "weight": 3,
                   "agent_run": difftest.agent_run(module, [call for call, _ in cases]),
                   "run": 'python3 -I "$CLAWSDK_HIDDEN/difftest.py" "$CLAWSDK_HIDDEN/cases.json"'}]
        solution = [exec_(run_tests), read(test_path), read(f"{module}.py")]
        solution += [edit(f"{module}.py", *m.fix_in(buggy)) for m in made if m.bad]
        solution.append(exec_(run_tests))
        return Spec(instruction, workspace, checks, solution, hidden=hidden,
                    tags=["python", "unittest", "debugging"], template=template,
                    detail={"bugs": [f"{p}:{o}" for p, o in sorted(ops.items())]})


KINDS = ("feat", "fix", "perf", "docs", "chore", "refactor", "test")


class SemverBump(Family):
    name = "semver-bump"
    category = "software development"
    subcategory = "release engineering"
    summary = "bump a version and write a changelog section from conventional commits"

    def build(self, rng, level, template="default"):
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

        def sha() -> str:
            return "".join(rng.choice("0123456789abcdef") for _ in range(7))

        log_lines = []
        for k, s, t, b in commits:
            head = k + (f"({s})" if s else "") + ("!" if b else "")
            log_lines.append(f"{sha()} {head}: {t}")
        old_v, new_v = ".".join(map(str, version)), ".".join(map(str, new))
        workspace = {"VERSION": old_v + "\n", "commits.txt": "\n".join(log_lines) + "\n"}
        instruction = f"""
commits.txt lists the commits since release {old_v}, newest last, in Conventional Commits
style ("type(scope): text"; a "!" after the type or scope marks a breaking change). Bump the
version in VERSION following semantic versioning: a breaking change bumps the major version,
otherwise a feat bumps the minor version, otherwise (fix, perf) the patch version.
"""
        solution = [read("VERSION"), read("commits.txt"), write("VERSION", new_v + "\n")]
        # at every level the changelog section too, and the version counts only beside it: a version alone is
        # nearly a guess (a minor bump was right in 73% of the tasks that asked for nothing else)

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
        checks = [{"type": "text_equals", "name": "CHANGELOG.md has the new section", "path": "CHANGELOG.md",
                   "expected_file": "CHANGELOG.expected.md", "weight": 2},
                  {"type": "text_equals", "name": f"VERSION is {new_v}", "path": "VERSION", "text": new_v,
                   "only_with": "CHANGELOG.md has the new section"}]
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


FAMILIES = (FixFailingTest(), SemverBump())
