"""Module attributes that import on first use (PEP 562), so a package's public names cost nothing
until they are touched: `import clawsdk` and `clawsdk --version` stay cheap."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_attributes(package: str, exports: dict[str, str], namespace: dict[str, Any]) -> Callable[[str], Any]:
    """A module `__getattr__` giving `exports` (name -> module that defines it); each is kept in
    `namespace` (the module's globals) once loaded, so later look-ups skip it."""

    def __getattr__(name: str) -> Any:  # the PEP 562 hook
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    return __getattr__
