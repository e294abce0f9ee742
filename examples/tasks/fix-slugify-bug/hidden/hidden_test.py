"""The workspace tests' cases and extra ones they don't cover. Standard library only.

Run as `python3 -I hidden_test.py`. The agent's slugify answers the calls in a process of its own;
this one, which loads none of the agent's code, checks the answers. Tests run in the agent's
process could be passed by its code alone (an os._exit(0) in textutils, or unittest's asserts
patched at import).
"""

import json
import os
import subprocess
import sys

CUT = "Why our CI takes 45 minutes - and how we fixed it"
EXPECTED = [  # (arguments, the slug): tests/test_slug.py's cases first
    (["Hello World"], "hello-world"),
    (["Cr\u00e8me br\u00fbl\u00e9e for beginners"], "creme-brulee-for-beginners"),
    (["Hello,  World!"], "hello-world"),
    (["Q&A: what's new in 3.12?"], "q-a-what-s-new-in-3-12"),
    (["Ten things I learned from running a bakery for ten years", 30], "ten-things-i-learned-from"),
    (["Supercalifragilisticexpialidocious", 10], "supercalif"),
    ([""], ""),
    (["!!! ???"], ""),
    (["  --Rust vs. Go--  "], "rust-vs-go"),
    (["Alpha beta gamma", 16], "alpha-beta-gamma"),  # exactly 16 characters: the last word stays
    (["Alpha beta gamma", 15], "alpha-beta"),
    (["word " * 20], "-".join(["word"] * 10)),  # the default max_length
    (["\u201cSmart\u201d quotes \u2014 and dashes\u2026"], "smart-quotes-and-dashes"),
    (["\u00c5ngstr\u00f6m units, 5 \u00c5"], "angstrom-units-5-a"),
]
CUTS = [[CUT, n] for n in range(1, 40)]  # a cut never ends (or starts) with a hyphen, nor doubles one
MARK = "@@slugify-answers@@"
CHILD = f"""
import json, sys
from textutils import slugify
out = []
for args in json.loads(sys.stdin.read()):
    try:
        out.append(slugify(*args))
    except Exception as e:
        out.append("error: %r" % e)
sys.stdout.write("\\n{MARK}" + json.dumps(out) + "\\n")
"""


def main() -> int:
    calls = [args for args, _ in EXPECTED] + CUTS
    workspace = os.environ.get("CLAWSDK_WORKSPACE", os.getcwd())
    try:
        child = subprocess.run([sys.executable, "-c", CHILD], input=json.dumps(calls), capture_output=True,
                               text=True, cwd=workspace, timeout=60)
    except subprocess.TimeoutExpired:
        print("slugify did not answer within 60 s")
        return 1
    line = next((ln for ln in reversed(child.stdout.splitlines()) if ln.startswith(MARK)), None)
    answers = json.loads(line[len(MARK):]) if line else None
    if not isinstance(answers, list) or len(answers) != len(calls):
        print(f"no answers from slugify (exit {child.returncode}): {child.stderr.strip()[-500:]}")
        return 1
    failed = [f"slugify{tuple(args)} = {got!r}, expected {want!r}"
              for (args, want), got in zip(EXPECTED, answers) if got != want]
    for (_, n), s in zip(CUTS, answers[len(EXPECTED):]):
        if not isinstance(s, str) or len(s) > n or s.startswith("-") or s.endswith("-") or "--" in s:
            failed.append(f"slugify({CUT!r}, max_length={n}) = {s!r}")
    print("\n".join(failed) or f"all {len(calls)} calls give the expected slug")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
