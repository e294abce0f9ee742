#!/usr/bin/env bash
# Reference solution: parse the cues, shift in milliseconds, drop credits, renumber.
set -euo pipefail
python3 - <<'PY'
import re

SHIFT_MS = 2350
TIME = re.compile(r"(\d\d):(\d\d):(\d\d),(\d\d\d)")


def shift(match):
    h, m, s, ms = map(int, match.groups())
    total = ((h * 60 + m) * 60 + s) * 1000 + ms + SHIFT_MS
    h, rest = divmod(total, 3600000)
    m, rest = divmod(rest, 60000)
    s, ms = divmod(rest, 1000)
    return "%02d:%02d:%02d,%03d" % (h, m, s, ms)


with open("episode.srt", encoding="utf-8") as f:
    blocks = [b.split("\n") for b in f.read().replace("\r\n", "\n").strip().split("\n\n")]
out = []
for block in blocks:
    timing, text = block[1], block[2:]
    if text and text[0].startswith("Subtitles by"):
        continue
    out.append("\n".join([str(len(out) + 1), TIME.sub(shift, timing)] + text))
with open("episode.synced.srt", "w", encoding="utf-8") as f:
    f.write("\n\n".join(out) + "\n")
PY
