"""The hidden check of `fix-failing-test`, copied into each task's hidden files and run there as
`python3 -I difftest.py cases.json` (the agent's workspace is $CLAWSDK_WORKSPACE).

The agent's module runs in a child process that only answers the test calls. This process, which
imports nothing of the agent's, compares each answer with a salted hash of the expected value.
Tests run inside the agent's process could be passed by the module itself (an `os._exit(0)`, or
unittest's asserts patched at import), with no fix at all. The expected values are stored hashed
because the child, running as the same user, can read the hidden files too.

Exit 0 when every call gives the expected value; the lines printed say which did not.
"""

import hashlib
import json
import os
import subprocess
import sys
import tempfile

MARK = "@@clawsdk-difftest@@"
CHILD = f"""
import importlib, json, sys
try:
    mod = importlib.import_module(sys.argv[1])
    calls = json.loads(sys.stdin.read())
    out = []
    for call in calls:
        try:
            out.append(["ok", repr(eval(call, vars(mod)))])
        except Exception as e:
            out.append(["error", "%s: %s" % (type(e).__name__, e)])
except BaseException as e:
    out = "%s: %s" % (type(e).__name__, e)
sys.stdout.write("\\n{MARK}" + json.dumps(out) + "\\n")
"""


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

    spec = json.loads(open(sys.argv[1], encoding="utf-8").read())
    workspace = os.environ["CLAWSDK_WORKSPACE"]
    calls = [c for c, _ in spec["cases"]]
    with tempfile.TemporaryDirectory() as cache:  # a fresh bytecode cache: a stale .pyc would hide the fix
        env = {k: v for k, v in os.environ.items() if k != "CLAWSDK_HIDDEN"} | {"PYTHONPYCACHEPREFIX": cache}
        try:
            child = subprocess.run([sys.executable, "-c", CHILD, spec["module"]], input=json.dumps(calls),
                                   capture_output=True, text=True, cwd=workspace, env=env,
                                   timeout=spec.get("timeout_s", 60))
        except subprocess.TimeoutExpired:
            print(f"{spec['module']}: the calls did not finish in {spec.get('timeout_s', 60)} s")
            return 1
    line = next((ln for ln in reversed(child.stdout.splitlines()) if ln.startswith(MARK)), None)
    if line is None:
        print(f"{spec['module']}: no answers (exit {child.returncode}): {child.stderr.strip()[-500:]}")
        return 1
    answers = json.loads(line[len(MARK):])
    if isinstance(answers, str):
        print(f"could not import {spec['module']}: {answers}")
        return 1
    if not isinstance(answers, list):
        answers = []
    failed = 0
    for (call, want), answer in zip(spec["cases"], answers + [["error", "no answer"]] * len(calls)):
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
