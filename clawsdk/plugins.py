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
from typing import Any, ClassVar, Self

import pluggy

from clawsdk import hookspecs
from clawsdk.errors import PluginError

log = logging.getLogger(__name__)

#: what a plugin's import or hook may raise and still be only its own failure: a sys.exit() or a
#: KeyboardInterrupt there would otherwise end every command that loads plugins, silently
PLUGIN_FAILURES = (Exception, SystemExit, KeyboardInterrupt)


def _failure(e: BaseException) -> str:
    """`Type: message`, or the type alone (a bare KeyboardInterrupt or sys.exit() has no message)."""
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__


DEFAULT_PLUGINS = (
    "clawsdk_plugins.sources.native",
    "clawsdk_plugins.sandboxes.local",
    "clawsdk_plugins.sandboxes.bwrap",
    "clawsdk_plugins.sandboxes.docker",
    "clawsdk_plugins.agents.builtin",
    "clawsdk_plugins.executors.local",
    "clawsdk_plugins.executors.ray",
    "clawsdk_plugins.verifiers.builtin",
    "clawsdk_plugins.sources.clawgym",
    "clawsdk_plugins.sources.clawgym_sources",
    "clawsdk_plugins.sources.pinchbench",
    "clawsdk_plugins.sources.harbor",
    "clawsdk_plugins.sources.procedural",
    "clawsdk_plugins.models.openai",
    "clawsdk_plugins.models.local",
    "clawsdk_plugins.agents.toolloop",
    "clawsdk_plugins.agents.replay",
    "clawsdk_plugins.commands.bench",
    "clawsdk_plugins.commands.synth",
    "clawsdk_tools.plugin",
    "clawsdk_plugins.skills.packs",
    "clawsdk_plugins.agents.harness",
    "clawsdk_plugins.agents.openclaw",
    "clawsdk_plugins.agents.claude_code",
    "clawsdk_plugins.agents.codex",
    "clawsdk_plugins.commands.mcp",
    "clawsdk_plugins.trainers.trl",
)

#: what each built-in registers, read without importing it: a command that needs one kind imports
#: only the plugins that provide it (`clawsdk tasks list` loads no MCP, no model backend). A built-in
#: missing here is imported for every kind; tests/core/test_plugins.py keeps this in step.
BUILTIN_KINDS: dict[str, tuple[str, ...]] = {
    "clawsdk_plugins.sources.native": ("task_sources",),
    "clawsdk_plugins.sandboxes.local": ("sandboxes",),
    "clawsdk_plugins.sandboxes.bwrap": ("sandboxes",),
    "clawsdk_plugins.sandboxes.docker": ("sandboxes", "commands"),
    "clawsdk_plugins.agents.builtin": ("agents",),
    "clawsdk_plugins.executors.local": ("executors",),
    "clawsdk_plugins.executors.ray": ("executors",),
    "clawsdk_plugins.verifiers.builtin": ("verifiers",),
    "clawsdk_plugins.sources.clawgym": ("verifiers",),
    "clawsdk_plugins.sources.clawgym_sources": ("task_sources",),
    "clawsdk_plugins.sources.pinchbench": ("task_sources", "verifiers"),
    "clawsdk_plugins.sources.harbor": ("task_sources", "verifiers"),
    "clawsdk_plugins.sources.procedural": ("task_sources",),
    "clawsdk_plugins.models.openai": ("models",),
    "clawsdk_plugins.models.local": ("models",),
    "clawsdk_plugins.agents.toolloop": ("agents",),
    "clawsdk_plugins.agents.replay": ("agents",),
    "clawsdk_plugins.commands.bench": ("commands",),
    "clawsdk_plugins.commands.synth": ("commands",),
    "clawsdk_tools.plugin": ("skills",),
    "clawsdk_plugins.skills.packs": ("skills",),
    "clawsdk_plugins.agents.harness": ("agents",),
    "clawsdk_plugins.agents.openclaw": ("agents", "commands"),
    "clawsdk_plugins.agents.claude_code": ("agents", "commands"),
    "clawsdk_plugins.agents.codex": ("agents", "commands"),
    "clawsdk_plugins.commands.mcp": ("commands",),
    "clawsdk_plugins.trainers.trl": ("trainers",),
}

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


class _Tables(dict):
    """kind -> {name: factory}. A kind's plugins load, and register, the first time it is read."""

    def __init__(self, registry: Registry):
        super().__init__({kind: {} for kind in KINDS})
        self._registry = registry

    def __getitem__(self, kind: str) -> dict[str, Any]:
        self._registry._ensure(kind)
        return super().__getitem__(kind)

    def get(self, kind: str, default: Any = None) -> Any:
        return self[kind] if kind in self else default

    def items(self):  # dict's own view
        self._registry.load_all()
        return super().items()

    def values(self):
        self._registry.load_all()
        return super().values()


class Registry:
    """Name -> factory tables filled by the registration hooks, called through pluggy.

    A kind loads on first use: the built-ins that provide it (BUILTIN_KINDS) and every entry-point
    plugin are imported, then its hook is called once for all plugins
    (``pm.hook.register_sandboxes(register=...)``), so pluggy's ordering (tryfirst/trylast) and
    wrappers apply. A name belongs to the first plugin in load order (built-ins in DEFAULT_PLUGINS
    order, then entry points by name, then runtime registrations) that registers it; a later
    plugin registering the same name is refused, and both plugins are named in its report
    (`clawsdk plugins`), unless it asks to take the name over: ``register(name, factory, replace=True)``.
    """

    def __init__(self, *, entry_points: bool = True) -> None:
        self.tables: dict[str, dict[str, Any]] = _Tables(self)
        self.owners: dict[tuple[str, str], str] = {}
        self.plugins: list[PluginInfo] = []
        self.pm = pluggy.PluginManager("clawsdk")
        self.pm.add_hookspecs(hookspecs)
        self._calling: PluginInfo | None = None
        self._offers: list[_Offer] = []
        self._rank: dict[int, int] = {}
        self._imported: set[str] = set()
        self._settled: set[str] = set()
        self._entry_points = entry_points
        self._entry_points_loaded = False
        self._lock = threading.RLock()

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
        self._ensure(kind)
        return self.owners.get((kind, name))

    # ---- loading -------------------------------------------------------------------------------

    def _info(self, name: str, origin: str, rank: int, error: str | None = None) -> PluginInfo:
        info = PluginInfo(name=name, origin=origin, error=error)
        self.plugins.append(info)
        self._rank[id(info)] = rank
        return info

    def _add(self, module: Any, name: str, origin: str, rank: int) -> PluginInfo | None:
        """Register one plugin with pluggy, each of its hook functions guarded so that one failing
        is reported on its plugin and the others still register."""
        info = self._info(name, origin, rank)
        try:
            self.pm.register(module, name=name)
        except PLUGIN_FAILURES as e:  # report, never brick the CLI
            info.error = _failure(e)
            return None
        for caller in self.pm.get_hookcallers(module) or []:
            for impl in caller.get_hookimpls():
                if impl.plugin is module and not (impl.hookwrapper or impl.wrapper):
                    # pluggy declares it Final; wrapping it in place is how one failing hook stays its plugin's
                    impl.function = self._guard(impl.function, info, caller.name)  # type: ignore[misc]
        return info

    def _guard(self, function: Any, info: PluginInfo, hook_name: str) -> Any:
        def guarded(*args: Any) -> Any:
            outer, self._calling = self._calling, info
            try:
                return function(*args)
            except PLUGIN_FAILURES as e:
                info.error = f"{hook_name} failed: {_failure(e)}"
                log.warning("plugin %s: %s", info.name, info.error)
                return None
            finally:
                self._calling = outer

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

    def _call_hook(self, kind: str, only: Any = None) -> None:
        """Call one registration hook through pluggy (for one plugin object: `only`) and settle its names."""
        caller = getattr(self.pm.hook, KINDS[kind])
        if only is not None:  # the others registered already; their wrappers still wrap this one
            others = [i.plugin for i in caller.get_hookimpls()
                      if i.plugin is not only and not (i.wrapper or i.hookwrapper)]
            caller = self.pm.subset_hook_caller(KINDS[kind], others)
        caller(register=self._callback(kind))
        offers, self._offers = sorted(self._offers, key=lambda o: self._rank[id(o.info)]), []  # stable
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
        dict.__getitem__(self.tables, kind)[key] = offer.value
        self.owners[(kind, key)] = info.name
        provided = info.provides.setdefault(kind, [])
        if key not in provided:
            provided.append(key)

    def _import_builtin(self, rank: int, modname: str) -> None:
        self._imported.add(modname)
        try:
            module = importlib.import_module(modname)
        except PLUGIN_FAILURES as e:
            self._info(modname, "builtin", rank, error=_failure(e))
            return
        self._add(module, modname, "builtin", rank)

    def _import_entry_points(self) -> None:
        self._entry_points_loaded = True
        allow = os.environ.get("CLAWSDK_PLUGINS")
        allowed = None if allow is None else {n.strip() for n in allow.split(",") if n.strip()}
        eps = sorted(importlib.metadata.entry_points(group="clawsdk"), key=lambda e: e.name)
        for n, ep in enumerate(eps, start=len(DEFAULT_PLUGINS)):
            if allowed is not None and ep.name not in allowed:
                continue
            dist = getattr(ep, "dist", None)
            origin = f"entry point {dist.name} {dist.version}" if dist else "entry point"
            try:
                module = ep.load()
            except PLUGIN_FAILURES as e:
                self._info(ep.name, origin, n, error=_failure(e))
                log.warning("plugin %s failed to load: %s", ep.name, self.plugins[-1].error)
                continue
            self._add(module, ep.name, origin, n)

    def _ensure(self, kind: str) -> None:
        """Load what provides `kind` and call its hook, once."""
        if kind in self._settled:
            return
        if kind not in KINDS:
            raise KeyError(kind)
        with self._lock:
            if kind in self._settled:
                return
            for rank, modname in enumerate(DEFAULT_PLUGINS):
                if modname not in self._imported and kind in BUILTIN_KINDS.get(modname, tuple(KINDS)):
                    self._import_builtin(rank, modname)
            if self._entry_points and not self._entry_points_loaded:
                self._import_entry_points()
            self._settled.add(kind)
            self._call_hook(kind)

    def load_builtins(self) -> None:
        """Load the built-in plugins only, every kind (tests; an application that wants no third party)."""
        self._entry_points = False
        self.load_all()

    def load_all(self) -> None:
        """Load every plugin and every kind now (`clawsdk plugins`)."""
        for rank, modname in enumerate(DEFAULT_PLUGINS):
            if modname not in self._imported:
                with self._lock:
                    self._import_builtin(rank, modname)
        for kind in KINDS:
            self._ensure(kind)

    def load(self, *plugins: tuple[Any, str], origin: str = "runtime") -> list[PluginInfo]:
        """Load (plugin object or module, name) pairs together, without the built-ins or entry points:
        one pluggy call per hook for all of them (tests, embedding applications)."""
        self._entry_points = False
        self._imported.update(DEFAULT_PLUGINS)
        base = 10**6 + len(self.plugins)
        infos = [self._add(module, name, origin, base + n) or self.plugins[-1] for n, (module, name) in enumerate(plugins)]
        for kind in KINDS:
            self._ensure(kind)
        return infos

    def add_plugin(self, module: Any, name: str, origin: str = "runtime") -> PluginInfo:
        """Load one more plugin; its names settle after everyone else's (kinds not loaded yet: when they are)."""
        with self._lock:
            info = self._add(module, name, origin, 10**6 + len(self.plugins))
            if info is not None:
                for kind in KINDS:
                    if kind in self._settled:
                        self._call_hook(kind, only=module)
            return info or self.plugins[-1]


class Contract:
    """A registered plugin object seen through its kind's contract: the one style every kind's contract
    is written in (docs/plugins.md).

    Each kind declares a subclass beside its base class (`SandboxPlugin` in clawsdk/sandbox/base.py,
    `ModelPlugin` in clawsdk/models/base.py, ...). Its methods are the kind's optional parts, each with
    what it means when a plugin leaves it out; a plugin provides one by carrying an attribute of that
    name (a plain factory or class, the way a third party writes it) or by subclassing the contract.
    The core reads a registered name through its contract (``SandboxPlugin.named("docker").available()``),
    so it calls declared methods and never probes a plugin's attributes. The tables keep what was
    registered, as it was: `Registry.get` returns the plugin's own object.
    """

    #: the registry table this contract reads ("sandboxes", "models", ...)
    kind: ClassVar[str]

    def __init__(self, target: Any = None) -> None:
        self.target = target

    @classmethod
    def of(cls, target: Any) -> Self:
        """`target` seen through this contract (itself, when it subclasses the contract)."""
        return target if isinstance(target, cls) else cls(target)

    @classmethod
    def named(cls, name: str, registry: Registry | None = None) -> Self:
        """The plugin registered as `name` in this contract's kind (PluginError naming the known ones)."""
        return cls.of((registry or get_registry()).get(cls.kind, name))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.target(*args, **kwargs)

    def provided(self, part: str) -> Any:
        """The plugin's own `part`, or None if it has none: the one place an optional part is looked up."""
        return None if self.target is None else getattr(self.target, part, None)

    def call(self, part: str, *args: Any, default: Any = None) -> Any:
        """The plugin's own `part` called with `args`, or `default` if it has none."""
        fn = self.provided(part)
        return default if fn is None else fn(*args)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.target!r})"


_registry: Registry | None = None
_lock = threading.Lock()


def get_registry() -> Registry:
    """The process-wide registry, loaded on first use."""
    global _registry
    with _lock:
        if _registry is None:
            _registry = Registry()  # each kind loads on first use
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
    return registry.add_plugin(module, name or str(getattr(module, "__name__", repr(module))))
