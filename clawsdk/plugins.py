"""Plugin loading and the registry of everything plugins provide.

Built-ins load through the same hooks as third-party plugins. Each plugin is imported on its own
and each of its hook functions is guarded, so a broken one is reported and skipped, never fatal;
the hooks themselves are called through pluggy (see `Registry`).
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


#: a kind's name in messages: "sandbox", "task source" (not "sandboxe")
SINGULAR = {"task_sources": "task source", "sandboxes": "sandbox", "skills": "skill", "models": "model",
            "agents": "agent", "verifiers": "verifier", "trainers": "trainer", "executors": "executor",
            "commands": "command"}


@dataclass
class PluginInfo:
    name: str
    origin: str  # "builtin", "entry point <dist> <version>" or "runtime"
    provides: dict[str, list[str]] = field(default_factory=dict)
    error: str | None = None
    #: registrations refused (a name another plugin has) and replacements made (replace=True)
    notes: list[str] = field(default_factory=list)


@dataclass
class _Offer:
    kind: str
    key: str
    value: Any
    info: PluginInfo
    replace: bool


class Registry:
    """Name -> factory tables filled by the registration hooks, called through pluggy.

    Each hook is called once for all plugins (``pm.hook.register_x(register=...)``), so pluggy's
    ordering (tryfirst/trylast) and wrappers apply. A name belongs to the first plugin in load
    order (built-ins, then entry points, then runtime registrations) that registers it; a later
    plugin registering the same name is refused, and both plugins are named in its report
    (`clawsdk plugins`), unless it asks to take the name over: ``register(name, factory, replace=True)``.
    """

    def __init__(self) -> None:
        self.tables: dict[str, dict[str, Any]] = {kind: {} for kind in KINDS}
        self.owners: dict[tuple[str, str], str] = {}
        self.plugins: list[PluginInfo] = []
        self.pm = pluggy.PluginManager("clawsdk")
        self.pm.add_hookspecs(hookspecs)
        self._calling: PluginInfo | None = None
        self._offers: list[_Offer] = []

    def get(self, kind: str, name: str) -> Any:
        table = self.tables[kind]
        if name not in table:
            known = ", ".join(sorted(table)) or "none"
            raise PluginError(f"no {SINGULAR[kind]} named {name!r} (available: {known})")
        return table[name]

    def names(self, kind: str) -> list[str]:
        return sorted(self.tables[kind])

    def owner(self, kind: str, name: str) -> str | None:
        """The plugin that registered `name`."""
        return self.owners.get((kind, name))

    # ---- loading -------------------------------------------------------------------------------

    def _add(self, module: Any, name: str, origin: str) -> PluginInfo | None:
        """Register one plugin with pluggy, each of its hook functions guarded so that one failing
        is reported on its plugin and the others still register."""
        info = PluginInfo(name=name, origin=origin)
        self.plugins.append(info)
        try:
            self.pm.register(module, name=name)
        except Exception as e:  # noqa: BLE001 - report, never brick the CLI
            info.error = f"{type(e).__name__}: {e}"
            return None
        for caller in self.pm.get_hookcallers(module) or []:
            for impl in caller.get_hookimpls():
                if impl.plugin is module and not (impl.hookwrapper or impl.wrapper):
                    impl.function = self._guard(impl.function, info, caller.name)
        return info

    def _guard(self, function: Any, info: PluginInfo, hook_name: str) -> Any:
        def guarded(*args: Any) -> Any:
            self._calling = info
            try:
                return function(*args)
            except Exception as e:  # noqa: BLE001
                info.error = f"{hook_name} failed: {type(e).__name__}: {e}"
                log.warning("plugin %s: %s", info.name, info.error)
                return None
            finally:
                self._calling = None

        return guarded

    def _callback(self, kind: str):
        def register(*args: Any, replace: bool = False) -> None:
            if kind == "commands":
                (command,) = args
                key, value = command.name, command
            else:
                key, value = args
            if self._calling is None:
                raise PluginError(f"register() for {SINGULAR[kind]} {key!r} called outside a registration hook")
            self._offers.append(_Offer(kind, key, value, self._calling, replace))

        return register

    def _call_hooks(self, only: Any = None) -> None:
        """Call every registration hook through pluggy (for one plugin object: `only`) and settle names."""
        for kind, hook_name in KINDS.items():
            caller = getattr(self.pm.hook, hook_name)
            if only is not None:  # the others registered already; their wrappers still wrap this one
                others = [i.plugin for i in caller.get_hookimpls()
                          if i.plugin is not only and not (i.wrapper or i.hookwrapper)]
                caller = self.pm.subset_hook_caller(hook_name, others)
            caller(register=self._callback(kind))
        order = {id(info): n for n, info in enumerate(self.plugins)}
        offers, self._offers = sorted(self._offers, key=lambda o: order[id(o.info)]), []  # stable: hook order kept
        for offer in offers:
            self._settle(offer)

    def _settle(self, offer: _Offer) -> None:
        kind, key, info = offer.kind, offer.key, offer.info
        owner = self.owners.get((kind, key))
        if owner is not None and owner != info.name:
            what = f"{SINGULAR[kind]} {key!r}"
            if not offer.replace:
                info.notes.append(f"refused {what}: plugin {owner} registered it first "
                                  f"(register it with replace=True to take it over)")
                log.warning("plugin %s: %s", info.name, info.notes[-1])
                return
            info.notes.append(f"replaced {what} of plugin {owner}")
            for other in self.plugins:
                if other.name == owner and key in other.provides.get(kind, []):
                    other.provides[kind].remove(key)
                    other.notes.append(f"{what} replaced by plugin {info.name}")
        self.tables[kind][key] = offer.value
        self.owners[(kind, key)] = info.name
        provided = info.provides.setdefault(kind, [])
        if key not in provided:
            provided.append(key)

    def _import_builtins(self) -> None:
        for modname in DEFAULT_PLUGINS:
            try:
                module = importlib.import_module(modname)
            except Exception as e:  # noqa: BLE001
                self.plugins.append(PluginInfo(modname, "builtin", error=f"{type(e).__name__}: {e}"))
                continue
            self._add(module, modname, "builtin")

    def _import_entry_points(self) -> None:
        allow = os.environ.get("CLAWSDK_PLUGINS")
        allowed = None if allow is None else {n.strip() for n in allow.split(",") if n.strip()}
        for ep in sorted(importlib.metadata.entry_points(group="clawsdk"), key=lambda e: e.name):
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
            self._add(module, ep.name, origin)

    def load_builtins(self) -> None:
        """Load the built-in plugins only (tests; an embedding application that wants no third party)."""
        self._import_builtins()
        self._call_hooks()

    def load_all(self) -> None:
        self._import_builtins()
        self._import_entry_points()
        self._call_hooks()

    def load(self, *plugins: tuple[Any, str], origin: str = "runtime") -> list[PluginInfo]:
        """Load (plugin object or module, name) pairs together: one pluggy call per hook for all of them."""
        infos = [self._add(module, name, origin) or self.plugins[-1] for module, name in plugins]
        self._call_hooks()
        return infos

    def add_plugin(self, module: Any, name: str, origin: str = "runtime") -> PluginInfo:
        """Load one more plugin into a loaded registry; its names settle after everyone else's."""
        info = self._add(module, name, origin)
        if info is not None:
            self._call_hooks(only=module)
        return info or self.plugins[-1]


_registry: Registry | None = None
_lock = threading.Lock()


def get_registry() -> Registry:
    """The process-wide registry, loaded on first use."""
    global _registry
    with _lock:
        if _registry is None:
            registry = Registry()
            registry.load_all()
            _registry = registry
        return _registry


def reset_registry() -> None:
    """Forget the loaded plugins (tests; after installing a plugin in-process)."""
    global _registry
    with _lock:
        _registry = None


def register_plugin(module: Any, name: str | None = None) -> PluginInfo:
    """Load a plugin object or module at run time (notebooks, tests, embedding applications).

    Its names follow the same rule as every plugin's: one already taken is refused (see the returned
    PluginInfo.notes) unless it registers with replace=True."""
    registry = get_registry()
    return registry.add_plugin(module, name or getattr(module, "__name__", repr(module)))
