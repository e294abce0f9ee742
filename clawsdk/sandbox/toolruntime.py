"""The runner's own Python as a sandbox sees it: what the tools behind the boundary run with.

Tools that interpret what the agent wrote run in a process inside the sandbox (clawsdk.mcp.toolhost), with
this interpreter, importing clawsdk, the skill packs and their dependencies from the runner's environment,
mounted read-only at fixed paths inside (the isolating backends mount `mounts()`; `local` uses the host
paths as they are):

    /opt/clawsdk/python        the interpreter's installation (sys.base_prefix), unless it is the system's
    /opt/clawsdk/site/N        each site-packages folder on sys.path
    /opt/clawsdk/pkgs/NAME     each top-level package the tools import that lies elsewhere (an editable install)
    /opt/clawsdk/skills/NAME   each folder skill (SKILL.md and its server.py)

Nothing else of the host goes in: a source checkout's other folders (its tests, its example tasks with their
hidden files) stay out, and the tool host runs with `-I -S` and exactly these paths.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import sys
import sysconfig
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clawsdk.plugins import Contract

ROOT = "/opt/clawsdk"
#: prefixes whose files an isolating sandbox already shows at the same path (bwrap binds /usr)
SYSTEM_PREFIXES = ("/usr", "/usr/local")
#: run inside the sandbox by `python -I -S -c BOOT PATHS MODULE ARGS...`: put PATHS (a JSON list) first on
#: sys.path, lead a process group of its own (so it and what it starts are stopped together), run MODULE
BOOT = ("import json,os,sys,runpy;sys.path[:0]=json.loads(sys.argv.pop(1));"
        "os.setpgid(0,0) if os.getpgid(0)!=os.getpid() else None;"
        "runpy.run_module(sys.argv[1],run_name='__main__',alter_sys=True)")


@dataclass(frozen=True)
class ServerRef:
    """Where the tool host finds a skill's server factory `(sandbox, task) -> MCPServer` inside the sandbox:
    an importable `module:qualname`, or a folder skill's server.py (its host path; `function` in it)."""

    module: str | None = None
    file: str | None = None
    function: str = "server"

    def spec(self, runtime: ToolRuntime, *, inside: bool) -> dict[str, str]:
        if self.module:
            return {"module": self.module}
        assert self.file is not None
        return {"file": runtime.path_of_skill_file(self.file, inside=inside), "function": self.function}


class SkillPlugin(Contract):
    """The skill kind: a factory ``(sandbox, task) -> MCP server`` (or `StdioServerParameters`: a program of
    its own), registered with `register_skills`. It may carry these attributes; left out, each means what
    its default says."""

    kind = "skills"

    @property
    def skill_dir(self) -> Path | None:
        """The folder holding its SKILL.md (synthesis' skill route, the skill kit). Left out: None; the kit
        looks beside the module that defines the factory."""
        folder = self.provided("skill_dir")
        return None if folder is None else Path(folder)

    @property
    def mcp_command(self) -> Any:
        """A stdio server the skill pack declares (SKILL.md `metadata.clawsdk.mcp`), started inside the
        sandbox from `skill_dir`. Left out: None; the factory's server is built on the host."""
        return self.provided("mcp_command")

    def server_ref(self) -> ServerRef | None:
        """How the tool host imports the factory: its `server_ref` (a `ServerRef` or a `module:qualname`),
        left out: the factory's own module and name; None if it cannot be imported by name (a closure, a
        function of a script run as __main__): such a skill's tools cannot run behind the boundary."""
        ref = self.provided("server_ref")
        if isinstance(ref, ServerRef):
            return ref
        if isinstance(ref, str):
            return ServerRef(module=ref)
        module, qualname = self.provided("__module__"), self.provided("__qualname__") or ""
        if not module or module == "__main__" or "<" in qualname or not qualname:
            return None
        return ServerRef(module=f"{module}:{qualname}")


def server_ref(factory: Callable[..., Any]) -> ServerRef | None:
    """`SkillPlugin.server_ref` of a registered skill factory."""
    return SkillPlugin.of(factory).server_ref()


def _top_level(ref: ServerRef) -> str | None:
    return ref.module.split(":", 1)[0].split(".", 1)[0] if ref.module else None


@dataclass(frozen=True)
class ToolRuntime:
    """The interpreter and import paths of the runner, and where each appears inside a sandbox."""

    prefix: str  # the interpreter's installation on the host (sys.base_prefix)
    executable: str  # the interpreter's real path on the host
    site_dirs: tuple[str, ...]
    packages: tuple[tuple[str, str], ...]  # (top-level name, its folder or module file) outside the site dirs
    skill_dirs: tuple[tuple[str, str], ...]  # (skill name, its folder)
    system_prefix: bool = field(default=False)

    # ---- inside the sandbox -------------------------------------------------------------------

    def mounts(self) -> list[tuple[str, str]]:
        """(host path, path inside) for each thing an isolating sandbox mounts read-only."""
        out: list[tuple[str, str]] = []
        if not self.system_prefix:
            out.append((self.prefix, f"{ROOT}/python"))
        out += [(d, f"{ROOT}/site/{i}") for i, d in enumerate(self.site_dirs)]
        out += [(p, f"{ROOT}/pkgs/{Path(p).name if Path(p).is_dir() else name + '.py'}")
                for name, p in self.packages]
        out += [(d, f"{ROOT}/skills/{name}") for name, d in self.skill_dirs]
        return out

    def interpreter(self, *, inside: bool) -> str:
        if not inside or self.system_prefix:
            return self.executable
        return f"{ROOT}/python/{os.path.relpath(self.executable, self.prefix)}"

    def import_paths(self, *, inside: bool) -> list[str]:
        """What goes before the standard library on sys.path."""
        if not inside:
            return [str(Path(p).parent) for _, p in self.packages] + list(self.site_dirs)
        paths = [f"{ROOT}/pkgs"] if self.packages else []
        return paths + [f"{ROOT}/site/{i}" for i in range(len(self.site_dirs))]

    def env(self, *, inside: bool) -> dict[str, str]:
        """Environment for the interpreter: its shared library where it was moved, and a modest malloc (each
        thread's arena otherwise reserves 64 MiB of address space, which RLIMIT_AS counts)."""
        env = {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1", "MALLOC_ARENA_MAX": "2"}
        if inside and not self.system_prefix:
            env["LD_LIBRARY_PATH"] = f"{ROOT}/python/lib"
        return env

    def module_argv(self, module: str, *args: str, inside: bool) -> list[str]:
        """The argv that runs `module` (with `args`) under this interpreter and these paths only."""
        return [self.interpreter(inside=inside), "-I", "-S", "-c", BOOT,
                json.dumps(self.import_paths(inside=inside)), module, *args]

    def python_argv(self, *, inside: bool) -> tuple[list[str], dict[str, str]]:
        """`{python}` in a command line: the interpreter with the runner's packages importable (PYTHONPATH), for
        MCP servers written in Python that a task or a skill declares. Returns (argv, env)."""
        env = self.env(inside=inside) | {"PYTHONPATH": os.pathsep.join(self.import_paths(inside=inside))}
        return [self.interpreter(inside=inside), "-s"], env

    def path_of_skill_file(self, host_file: str, *, inside: bool) -> str:
        if not inside:
            return host_file
        for name, folder in self.skill_dirs:
            if host_file.startswith(folder.rstrip("/") + "/"):
                return f"{ROOT}/skills/{name}/{host_file[len(folder.rstrip('/')) + 1:]}"
        raise ValueError(f"{host_file} is in no skill folder the sandbox mounts")

    def skill_dir(self, name: str, *, inside: bool) -> str | None:
        for skill, folder in self.skill_dirs:
            if skill == name:
                return f"{ROOT}/skills/{name}" if inside else folder
        return None


def _location(name: str) -> str | None:
    """The folder of top-level package `name` (or its module file), without importing it."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        locations = list(spec.submodule_search_locations)
        return locations[0] if locations else None
    return spec.origin if spec.origin and spec.origin.endswith(".py") else None


def _within(path: str, folders: tuple[str, ...]) -> bool:
    real = os.path.realpath(path)
    return any(real == f or real.startswith(f.rstrip("/") + "/") for f in folders)


def build(top_level: set[str], skill_dirs: dict[str, str]) -> ToolRuntime:
    """The runtime for these top-level packages (clawsdk's own always) and folder skills."""
    prefix = os.path.realpath(sys.base_prefix)
    executable = os.path.realpath(sys.executable)
    purelib = {os.path.realpath(p) for p in (sysconfig.get_paths().get("purelib"), sysconfig.get_paths().get("platlib"))
               if p}
    sites: list[str] = []
    for entry in sys.path:
        if not entry or not os.path.isdir(entry):
            continue
        real = os.path.realpath(entry)
        if (real.endswith(("site-packages", "dist-packages")) or real in purelib) and real not in sites:
            sites.append(real)
    system = prefix in SYSTEM_PREFIXES
    site_dirs = tuple(sites)
    packages: list[tuple[str, str]] = []
    for name in sorted({"clawsdk", *top_level}):
        where = _location(name)
        if where is None or _within(where, site_dirs) or (system and _within(where, (prefix,))):
            continue
        packages.append((name, os.path.realpath(where)))
    return ToolRuntime(prefix=prefix, executable=executable, site_dirs=site_dirs, packages=tuple(packages),
                       skill_dirs=tuple(sorted((k, os.path.realpath(v)) for k, v in skill_dirs.items())),
                       system_prefix=system)


def current() -> ToolRuntime:
    """The runtime of every skill registered in this process (built-ins, plugins, folder skills); computed
    again only when the registered skills change."""
    from clawsdk.plugins import get_registry

    skills = get_registry().tables["skills"]
    return _for_skills(tuple(skills.items()))


@functools.lru_cache(maxsize=4)
def _for_skills(skills: tuple[tuple[str, Any], ...]) -> ToolRuntime:
    top: set[str] = set()
    folders: dict[str, str] = {}
    for name, factory in skills:
        skill = SkillPlugin.of(factory)
        if skill.skill_dir is not None and skill.mcp_command is not None:
            folders[name] = str(skill.skill_dir)  # its own server, started from the folder
            continue
        ref = skill.server_ref()
        if ref is None:
            continue
        if ref.file:
            folders[name] = str(Path(ref.file).parent)
        elif (pkg := _top_level(ref)) is not None:
            top.add(pkg)
    return build(top, folders)
