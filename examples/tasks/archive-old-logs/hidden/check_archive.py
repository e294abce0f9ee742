"""Run archive_logs.sh against a scratch log folder with known file ages."""
import gzip
import os
import shutil
import subprocess
import sys
import tempfile
import time

SCRIPT = os.path.join(os.getcwd(), "archive_logs.sh")
DAY = 86400
now = time.time()

# name -> (age in days, should be archived)
FILES = {
    "api-today.log": (0.1, False),
    "api-2024-03-10.log": (3, False),
    "checkout-2024-03-07.log": (6, False),
    "checkout-2024-03-01.log": (10, True),
    "worker 2.log": (30, True),
    "search-2024-01-31.log": (40, True),
    "notes.txt": (40, False),
    "debug.log.bak": (40, False),
}
failures = []


def fail(msg):
    failures.append(msg)


def run(*args):
    return subprocess.run(["bash", SCRIPT] + list(args), capture_output=True, text=True, timeout=30)


if not os.path.isfile(SCRIPT):
    print("archive_logs.sh not found")
    sys.exit(1)

tmp = tempfile.mkdtemp(prefix="archive-check-")
try:
    logdir = os.path.join(tmp, "shop logs")
    os.makedirs(os.path.join(logdir, "nginx"))
    os.makedirs(os.path.join(logdir, "old.log"))  # a folder whose name ends in .log
    for name, (age, _) in FILES.items():
        path = os.path.join(logdir, name)
        with open(path, "w") as f:
            f.write("content of %s\n" % name * 3)
        os.utime(path, (now - age * DAY, now - age * DAY))
    nested = os.path.join(logdir, "nginx", "access-2024-01-01.log")
    with open(nested, "w") as f:
        f.write("nginx\n")
    os.utime(nested, (now - 60 * DAY, now - 60 * DAY))
    os.utime(os.path.join(logdir, "old.log"), (now - 60 * DAY, now - 60 * DAY))

    r = run(logdir, "7")
    if r.returncode != 0:
        fail("exit status %d (stderr: %s)" % (r.returncode, r.stderr.strip()[:200]))
    archive = os.path.join(logdir, "archive")
    for name, (age, archived) in FILES.items():
        src = os.path.join(logdir, name)
        gz = os.path.join(archive, name + ".gz")
        if archived:
            if os.path.exists(src):
                fail("%s (%s days old) was not removed" % (name, age))
            if not os.path.isfile(gz):
                fail("archive/%s.gz missing" % name)
            else:
                try:
                    with gzip.open(gz, "rt") as f:
                        if f.read() != "content of %s\n" % name * 3:
                            fail("archive/%s.gz has the wrong content" % name)
                except OSError as e:
                    fail("archive/%s.gz is not gzip: %s" % (name, e))
            if "archived %s" % name not in r.stdout.splitlines():
                fail("stdout lacks 'archived %s'" % name)
        else:
            if not os.path.isfile(src):
                fail("%s (%s days old) should have been left alone" % (name, age))
            if os.path.exists(gz):
                fail("%s should not be archived" % name)
    if not os.path.isfile(nested):
        fail("a log in a subfolder was touched")
    if not os.path.isdir(os.path.join(logdir, "old.log")):
        fail("the folder old.log was touched")
    extra = sorted(set(os.listdir(archive)) - {n + ".gz" for n, (_, a) in FILES.items() if a}) if os.path.isdir(archive) else []
    if extra:
        fail("unexpected files in archive/: %s" % extra)

    r2 = run(logdir, "7")
    if r2.returncode != 0:
        fail("second run exited %d" % r2.returncode)
    if any(line.startswith("archived") for line in r2.stdout.splitlines()):
        fail("second run archived again: %s" % r2.stdout.strip()[:200])

    # a fresh folder without archive/ and a DAYS of 0
    logdir2 = os.path.join(tmp, "fresh")
    os.makedirs(logdir2)
    p = os.path.join(logdir2, "x.log")
    with open(p, "w") as f:
        f.write("x\n")
    os.utime(p, (now - 2 * DAY, now - 2 * DAY))
    r3 = run(logdir2, "0")
    if r3.returncode != 0 or not os.path.isfile(os.path.join(logdir2, "archive", "x.log.gz")):
        fail("DAYS=0 on a folder without archive/ did not archive a 2-day-old log")

    for args in ([logdir, "seven"], [logdir, "-3"], [os.path.join(tmp, "missing"), "7"], [logdir]):
        r4 = run(*args)
        if r4.returncode != 2:
            fail("args %s: exit %d, expected 2" % (args[-1:], r4.returncode))
        elif not r4.stderr.strip():
            fail("args %s: no usage message on stderr" % (args[-1:],))
finally:
    shutil.rmtree(tmp, ignore_errors=True)

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("ok")
