"""Compare episode.synced.srt with the expected cues (tolerant of trailing spaces and CRLF)."""
import os
import sys


def cues(path):
    with open(path, encoding="utf-8-sig") as f:
        text = f.read().replace("\r\n", "\n")
    blocks = [b for b in text.strip().split("\n\n") if b.strip()]
    return [[line.rstrip() for line in b.strip("\n").split("\n")] for b in blocks]


try:
    got = cues("episode.synced.srt")
except OSError:
    print("episode.synced.srt is missing")
    sys.exit(1)
want = cues(os.path.join(os.environ["CLAWSDK_HIDDEN"], "expected_episode.synced.srt"))
if len(got) != len(want):
    print("%d cues, expected %d" % (len(got), len(want)))
    sys.exit(1)
for g, w in zip(got, want):
    if g != w:
        print("cue differs:\n  got:      %r\n  expected: %r" % (g, w))
        sys.exit(1)
print("ok: %d cues" % len(got))
