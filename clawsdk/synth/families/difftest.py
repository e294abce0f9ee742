"""The hidden check of `fix-failing-test`, in two commands (a `command` check with `agent_run`):

- `agent_run(module, calls)`, the agent's side: the agent's module answers the test calls in a process
  of its own, before the hidden files exist, so nothing it runs can read them;
- `python3 -I difftest.py cases.json`, copied into the hidden files: it reads those answers on stdin and,
  importing nothing of the agent's, compares each with a salted hash of the expected value.

Tests run inside the agent's process could be passed by the module itself (an `os._exit(0)`, or
unittest's asserts patched at import), with no fix at all.

Exit 0 when every call gives the expected value; the lines printed say which did not.
"""

import hashlib
import json
import shlex
import sys

MARK = "@@clawsdk-difftest@@"
CHILD = f"""
import importlib, json, sys
try:
    mod = importlib.import_module(sys.argv[1])
    out = []
    for call in json.loads(sys.argv[2]):
        try:
            out.append(["ok", repr(eval(call, vars(mod)))])
        except Exception as e:
            out.append(["error", "%s: %s" % (type(e).__name__, e)])
except BaseException as e:
    out = "%s: %s" % (type(e).__name__, e)
sys.stdout.write("\\n{MARK}" + json.dumps(out) + "\\n")
"""


def agent_run(module: str, calls: list[str]) -> str:
    """The check's `agent_run`: the module answers `calls` with a fresh bytecode cache (a stale .pyc
    would hide the fix)."""
    return (f'PYTHONPYCACHEPREFIX="$(mktemp -d)" python3 -c {shlex.quote(CHILD)} '
            f"{shlex.quote(module)} {shlex.quote(json.dumps(calls))}")


def normal(value) -> str:
    """The text a value is compared by: numbers to 6 places (as assertAlmostEqual), the rest by repr."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return repr(round(float(value), 6) + 0.0)
    if isinstance(value, (list, tuple)):
        inner = ", ".join(normal(v) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner},)"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{normal(k)}: {normal(v)}" for k, v in value.items()) + "}"
    return repr(value)


def digest(salt: str, value) -> str:
    return hashlib.sha256((salt + normal(value)).encode()).hexdigest()


def main() -> int:
    import ast

    with open(sys.argv[1], encoding="utf-8") as f:
        spec = json.load(f)
    calls = [c for c, _ in spec["cases"]]
    line = next((ln for ln in reversed(sys.stdin.read().splitlines()) if ln.startswith(MARK)), None)
    if line is None:
        print(f"{spec['module']}: no answers (the agent_run's output has none)")
        return 1
    try:
        answers = json.loads(line[len(MARK):])
    except (ValueError, RecursionError):
        answers = []
    if isinstance(answers, str):
        print(f"could not import {spec['module']}: {answers}")
        return 1
    if not isinstance(answers, list):
        answers = []
    failed = 0
    padded = answers + [["error", "no answer"]] * len(calls)  # a missing answer is an error; not strict
    for (call, want), answer in zip(spec["cases"], padded, strict=False):
        kind, text = answer if isinstance(answer, list) and len(answer) == 2 else ("error", repr(answer))
        try:
            got = ast.literal_eval(text) if kind == "ok" else None
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            got, kind = None, "error"
        text = str(text)
        if kind != "ok" or digest(spec["salt"], got) != want:
            failed += 1
            print(f"FAIL {call} -> {text[:200]}")
    print(f"{len(calls) - failed}/{len(calls)} calls give the expected value")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
