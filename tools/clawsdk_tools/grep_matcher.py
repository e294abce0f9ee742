"""grep's matcher, run inside the sandbox (`python3 -I -c <this file>`, its request as JSON on stdin).

The pattern is the agent's and so are the files: Python's re can backtrack without end ((a+)+$ against a
line of a's), so the matching runs behind the sandbox's boundary, killed at the task's tool time limit,
never in the runner. Standard library only, so any python3 in the sandbox runs it.

Request: {"pattern", "flags", "paths" (relative to the workspace, the working folder), "limit",
"max_bytes"}. Answer: {"matches": ["path:line:text", ...], "too_large": [[path, size], ...]}, or {"error": why}. A path whose
real location is outside the working folder is skipped (what the sandbox shows is all it could reach; under
`local` this keeps grep in the workspace).
"""

import json
import os
import re
import sys


def main() -> None:
    request = json.load(sys.stdin)
    try:  # compiling is the agent's work too: a pattern can take minutes to compile
        rx = re.compile(request["pattern"], request.get("flags", 0))
    except re.error as e:
        json.dump({"error": f"invalid regular expression: {e}"}, sys.stdout)
        return
    limit, max_bytes = request["limit"], request["max_bytes"]
    root = os.path.realpath(".")
    out, too_large = [], []
    for path in request["paths"]:
        real = os.path.realpath(path)
        if real != root and not real.startswith(root + os.sep):
            continue
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
        except OSError:
            continue
        try:
            with os.fdopen(fd, "rb") as f:
                data = f.read(max_bytes + 1)
        except OSError:
            continue
        if len(data) > max_bytes:
            too_large.append([path, os.path.getsize(path)])
            continue
        if b"\x00" in data[:8192]:
            continue
        for n, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            if rx.search(line):
                out.append(f"{path}:{n}:{line[:500]}")
                if len(out) >= limit:
                    break
        if len(out) >= limit:
            break
    json.dump({"matches": out, "too_large": too_large}, sys.stdout)


if __name__ == "__main__":
    main()
