"""The workspace tests' cases and extra ones they don't cover. Standard library only.

Run as `python3 -I hidden_test.py`, with the answers of the check's `agent_run` on stdin: there the
agent's slugify answered the calls, before this file existed, so its code could not read the expected
slugs. This process loads none of the agent's code: tests run in the agent's process could be passed
by its code alone (an os._exit(0) in textutils, or unittest's asserts patched at import).
"""

import json
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
CUTS = range(1, 40)  # a cut never ends (or starts) with a hyphen, nor doubles one


def main() -> int:
    try:
        pairs = json.loads(sys.stdin.read().strip().splitlines()[-1])
        answers = {json.dumps(args): got for args, got in pairs}
    except (ValueError, TypeError, IndexError, RecursionError):
        print("no answers from slugify (agent_run printed none)")
        return 1
    missing = object()
    failed = [f"slugify{tuple(args)} = {got!r}, expected {want!r}" for args, want in EXPECTED
              if (got := answers.get(json.dumps(args), missing)) != want]
    for n in CUTS:
        s = answers.get(json.dumps([CUT, n]), missing)
        if not isinstance(s, str) or len(s) > n or s.startswith("-") or s.endswith("-") or "--" in s:
            failed.append(f"slugify({CUT!r}, max_length={n}) = {'no answer' if s is missing else repr(s)}")
    print("\n".join(failed) or f"all {len(EXPECTED) + len(CUTS)} calls give the expected slug")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
