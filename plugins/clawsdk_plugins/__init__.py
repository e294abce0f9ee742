"""clawsdk's first-party plugins, one folder per kind: sources, sandboxes, agents, models, trainers,
executors, verifiers, skills, commands."""

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
import warnings

#: flat paths that earlier docs and the skill-plugin example showed users -> where each moved
MOVED = {
    "clawsdk_plugins.cli_agent": "clawsdk_plugins.agents.cli_agent",
    "clawsdk_plugins.cli_agent.base": "clawsdk_plugins.agents.cli_agent.base",
    "clawsdk_plugins.cli_agent.commands": "clawsdk_plugins.agents.cli_agent.commands",
    "clawsdk_plugins.cli_agent.install": "clawsdk_plugins.agents.cli_agent.install",
    "clawsdk_plugins.executor_ray": "clawsdk_plugins.executors.ray",
    "clawsdk_plugins.sandbox_local": "clawsdk_plugins.sandboxes.local",
}


class _Moved(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports an old path as the names of the module that replaced it, with a DeprecationWarning; last on
    sys.meta_path, so it never shadows a module that exists."""

    def find_spec(self, fullname: str, path: object = None,
                  target: object = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self, is_package=fullname == "clawsdk_plugins.cli_agent")

    def exec_module(self, module: types.ModuleType) -> None:
        new = importlib.import_module(MOVED[module.__name__])
        warnings.warn(f"{module.__name__} moved to {new.__name__}", DeprecationWarning, stacklevel=2)
        module.__dict__.update({k: v for k, v in vars(new).items() if not k.startswith("__")})


if not any(isinstance(f, _Moved) for f in sys.meta_path):
    sys.meta_path.append(_Moved())
