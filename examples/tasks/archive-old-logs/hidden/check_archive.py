"""Judge what archive_logs.sh did to a scratch log folder with known file ages. Standard library only.

Run as `python3 -I check_archive.py`, with the output of the check's `agent_run` on stdin: there the
agent's script ran (before this file existed) and the resulting folders were described. This process
loads none of the agent's code.
"""
import json
import sys

ARCHIVED = {  # name -> archived at DAYS=7 (older than 7 days, a regular *.log file)
    "api-today.log": False,
    "api-2024-03-10.log": False,
    "checkout-2024-03-07.log": False,
    "checkout-2024-03-01.log": True,
    "worker 2.log": True,
    "search-2024-01-31.log": True,
    "notes.txt": False,
    "debug.log.bak": False,
}


def judge(got):
    if not got["found"]:
        return ["archive_logs.sh not found"]
    failures = []
    first = got["first"]
    if first["exit"] != 0:
        failures.append("exit status %s (stderr: %s)" % (first["exit"], str(first["stderr"]).strip()[:200]))
    for name, archived in ARCHIVED.items():
        state = got["files"][name]
        if archived:
            if state["left"]:
                failures.append("%s was not removed" % name)
            if state["gz"] is None:
                failures.append("archive/%s.gz missing" % name)
            elif state["gz"] != "content of %s\n" % name * 3:
                failures.append("archive/%s.gz has the wrong content" % name)
            if "archived %s" % name not in str(first["stdout"]).splitlines():
                failures.append("stdout lacks 'archived %s'" % name)
        else:
            if not state["left"]:
                failures.append("%s should have been left alone" % name)
            if state["gz"] is not None:
                failures.append("%s should not be archived" % name)
    if not got["nested"]:
        failures.append("a log in a subfolder was touched")
    if not got["old.log"]:
        failures.append("the folder old.log was touched")
    extra = sorted(set(got["archive"]) - {n + ".gz" for n, a in ARCHIVED.items() if a})
    if extra:
        failures.append("unexpected files in archive/: %s" % extra[:10])
    again = got["again"]
    if again["exit"] != 0:
        failures.append("second run exited %s" % again["exit"])
    if any(line.startswith("archived") for line in str(again["stdout"]).splitlines()):
        failures.append("second run archived again: %s" % str(again["stdout"]).strip()[:200])
    if got["fresh"]["exit"] != 0 or not got["fresh_gz"]:
        failures.append("DAYS=0 on a folder without archive/ did not archive a 2-day-old log")
    for label, r in got["bad"].items():
        if r["exit"] != 2:
            failures.append("%s: exit %s, expected 2" % (label, r["exit"]))
        elif not str(r["stderr"]).strip():
            failures.append("%s: no usage message on stderr" % label)
    return failures


def main():
    try:
        failures = judge(json.loads(sys.stdin.read().strip().splitlines()[-1]))
    except (ValueError, IndexError, KeyError, TypeError, AttributeError, RecursionError) as e:
        failures = ["no usable description from agent_run: %s: %s" % (type(e).__name__, e)]
    print("\n".join(failures) or "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
