"""What race-proof file operations cost: `safefs.Tree` (descriptor walk, O_NOFOLLOW per
component) against plain `open()` by name on the same folder, which confines nothing (the floor).

    python benchmarks/fileops.py                # 20,000 write+read pairs, 3 rounds
    python benchmarks/fileops.py --pairs 5000 --depth 4

Each round prints both figures and their ratio, measured in the same process on the same
memory-backed folder, so a loaded machine shifts both alike.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from clawsdk.sandbox.safefs import Tree


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--depth", type=int, default=1, help="folders above each file (W1 writes notes/fN.txt: 1)")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
    try:
        ws = tmp / "workspace"
        ws.mkdir()
        tree = Tree(ws, aliases=(str(ws),))
        folder = "/".join(f"d{i}" for i in range(a.depth))
        paths = [f"{folder}/f{i}.txt" for i in range(5)]
        (ws / folder).mkdir(parents=True)
        data = b"task 1 line 1\n" * 4
        for r in range(a.rounds):
            t = time.perf_counter()
            for i in range(a.pairs):
                p = ws / paths[i % 5]
                p.write_bytes(data)
                p.read_bytes()
            plain = (time.perf_counter() - t) / a.pairs
            t = time.perf_counter()
            for i in range(a.pairs):
                tree.write(paths[i % 5], data)
                tree.read(paths[i % 5])
            safe = (time.perf_counter() - t) / a.pairs
            print(f"round {r + 1}: write+read pair, depth {a.depth}: plain open() {plain * 1e6:.1f} us, "
                  f"safefs {safe * 1e6:.1f} us -> {safe / plain:.2f}x "
                  f"(+{max(safe - plain, 0) * 1e6:.0f} us per pair)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
