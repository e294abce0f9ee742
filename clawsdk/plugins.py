"""Plugin loading and the registry of everything plugins provide.

Built-ins load through the same hooks as third-party plugins. Each plugin is imported and
asked to register on its own, so a broken one is reported and skipped, never fatal.
Set ``CLAWSDK_PLUGINS`` to a comma-separated allow-list of entry-point plugin names to load
(empty: none); built-ins always load.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import logging
import os
import threading
from dataclasses import dataclass, field
from typing import Any

import pluggy

from clawsdk import hookspecs
from clawsdk.errors import PluginError

log = logging.getLogger(__name__)

DEFAULT_PLUGINS = (
    "clawsdk_plugins.sources",
    "clawsdk_plugins.sandbox_local",
    "clawsdk_plugins.sandbox_bwrap",
    "clawsdk_plugins.sandbox_docker",
    "clawsdk_plugins.agents",
    "clawsdk_plugins.executors",
    "clawsdk_plugins.executor_ray",
    "clawsdk_plugins.verifiers",
    "clawsdk_plugins.clawgym",
    "clawsdk_plugins.pinchbench",
    "clawsdk_plugins.models_openai",
    "clawsdk_plugins.models_local",
    "clawsdk_plugins.agent_toolloop",
    "clawsdk_plugins.agent_replay",
    "clawsdk_plugins.bench",
    "clawsdk_plugins.synth",
    "clawsdk_tools.plugin",
    "clawsdk_plugins.skills",
    "clawsdk_plugins.agent_harness",
    "clawsdk_plugins.openclaw",
    "clawsdk_plugins.mcp_commands",
    "clawsdk_plugins.trainers",
)

KINDS = {
    "task_sources": "register_task_sources",
    "sandboxes": "register_sandboxes",
    "skills": "register_skills",
    "models": "register_models",
    "agents": "register_agents",
    "verifiers": "register_verifiers",
    "trainers": "register_trainers",
    "executors": "register_executors",
    "commands": "register_commands",
}


@dataclass
class PluginInfo:
    name: str
    origin: str  # "builtin" or "entry point <dist> <version>"
    provides: dict[str, list[str]] = field(default_factory=dict)
    error: str | None = None


class Registry:
    """Name -> factory tables filled by the registration hooks."""

    def __init__(self) -> None:
        self.tables: dict[str, dict[str, Any]] = {kind: {} for kind in KINDS}
        self.owners: dict[tuple[str, str], str] = {}
        self.plugins: list[PluginInfo] = []
        self.pm = pluggy.PluginManager("clawsdk")
        self.pm.add_hookspecs(hookspecs)

    def get(self, kind: str, name: str) -> Any:
        table = self.tables[kind]
        if name not in table:
            known = ", ".join(sorted(table)) or "none"
            singular = kind[:-2] if kind.endswith("xes") else kind[:-1]  # sandboxes -> sandbox
            raise PluginError(f"no {singular.replace('_', ' ')} named {name!r} (available: {known})")
        return table[name]

    def names(self, kind: str) -> list[str]:
        return sorted(self.tables[kind])

    def _load(self, module: Any, name: str, origin: str) -> None:
        info = PluginInfo(name=name, origin=origin)
        self.plugins.append(info)
        try:
            self.pm.register(module, name=name)
        except Exception as e:  # noqa: BLE001 - report, never brick the CLI
            info.error = f"{type(e).__name__}: {e}"
            return
        for kind, hook_name in KINDS.items():
            hook = getattr(self.pm.hook, hook_name)
            for impl in hook.get_hookimpls():
                if impl.plugin is not module:
                    continue
                registered: list[str] = []

                def register(*args: Any, _kind: str = kind, _registered: list = registered) -> None:
                    if _kind == "commands":
                        (command,) = args
                        key, value = command.name, command
                    else:
                        key, value = args
                    self.tables[_kind][key] = value
                    self.owners[(_kind, key)] = name
                    _registered.append(key)

                try:
                    impl.function(register=register)
                except Exception as e:  # noqa: BLE001
                    info.error = f"{hook_name} failed: {type(e).__name__}: {e}"
                    log.warning("plugin %s: %s", name, info.error)
                if registered:
                    info.provides[kind] = registered

    def load_builtins(self) -> None:
        for modname in DEFAULT_PLUGINS:
            try:
                module = importlib.import_module(modname)
            except Exception as e:  # noqa: BLE001
                self.plugins.append(PluginInfo(modname, "builtin", error=f"{type(e).__name__}: {e}"))
                continue
            self._load(module, modname, "builtin")

    def load_entry_points(self) -> None:
        allow = os.environ.get("CLAWSDK_PLUGINS")
        allowed = None if allow is None else {n.strip() for n in allow.split(",") if n.strip()}
        for ep in importlib.metadata.entry_points(group="clawsdk"):
            if allowed is not None and ep.name not in allowed:
                continue
            dist = getattr(ep, "dist", None)
            origin = f"entry point {dist.name} {dist.version}" if dist else "entry point"
            try:
                module = ep.load()
            except Exception as e:  # noqa: BLE001
                self.plugins.append(PluginInfo(ep.name, origin, error=f"{type(e).__name__}: {e}"))
                log.warning("plugin %s failed to load: %s", ep.name, e)
                continue
            self._load(module, ep.name, origin)


_registry: Registry | None = None
_lock = threading.Lock()


def get_registry() -> Registry:
    """The process-wide registry, loaded on first use."""
    global _registry
    with _lock:
        if _registry is None:
            registry = Registry()
            registry.load_builtins()
            registry.load_entry_points()
            _registry = registry
        return _registry


def reset_registry() -> None:
    """Forget the loaded plugins (tests; after installing a plugin in-process)."""
    global _registry
    with _lock:
        _registry = None


def register_plugin(module: Any, name: str | None = None) -> None:
    """Load a plugin object or module at run time (notebooks, tests, embedding applications)."""
    registry = get_registry()
    registry._load(module, name or getattr(module, "__name__", repr(module)), "runtime")
