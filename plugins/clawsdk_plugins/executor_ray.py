"""The old import path of `clawsdk_plugins.executors.ray`, as earlier docs showed it."""

import warnings

from clawsdk_plugins.executors.ray import RayExecutor

warnings.warn(f"{__name__} moved to clawsdk_plugins.executors.ray", DeprecationWarning, stacklevel=2)

__all__ = ["RayExecutor"]
