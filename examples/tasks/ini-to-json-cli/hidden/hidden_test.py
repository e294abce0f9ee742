"""Black-box tests of ini2json.py. Standard library only.

Run as `python3 -I hidden_test.py`, with the output of the check's `agent_run` on stdin: there the agent's
converter ran on the sample (before this folder existed, so it could not read the expected output) and
on a missing and an invalid file. This process loads none of the agent's code.
"""
import json
import os
import sys

HIDDEN = os.path.dirname(os.path.abspath(__file__))


def parsed(text):
    try:
        return json.loads(text)
    except (TypeError, ValueError, RecursionError):
        return "(not JSON)"


def check(got, expected):
    failures = []
    for name in ("stdout", "output_file"):
        r = got[name]
        if r["exit"] != 0:
            failures.append(f"{name}: exit {r['exit']}: {str(r['stderr']).strip()[-300:]}")
            continue
        data = parsed(r["stdout"] if name == "stdout" else r["file"])
        if data != expected:
            failures.append(f"{name}: the JSON differs from the expected: {str(data)[:300]}")
        elif not (data["cache"]["enabled"] is True and data["Paths"]["flag"] is False
                  and type(data["cache"]["ttl_seconds"]) is int):  # 1 == True: equality alone misses these
            failures.append(f"{name}: booleans or integers of the wrong type")
    for name in ("missing", "invalid"):
        r = got[name]
        if r["exit"] != 1 or not str(r["stderr"]).strip():
            failures.append(f"{name} input file: exit {r['exit']} (expected 1 and a message on stderr)")
    return failures


def main() -> int:
    with open(os.path.join(HIDDEN, "sample_expected.json")) as f:
        expected = json.load(f)
    try:
        got = json.loads(sys.stdin.read().strip().splitlines()[-1])
        failures = check(got, expected)
    except (ValueError, IndexError, KeyError, TypeError, RecursionError) as e:
        failures = [f"no usable results from agent_run: {type(e).__name__}: {e}"]
    print("\n".join(failures) or "all hidden tests pass")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
