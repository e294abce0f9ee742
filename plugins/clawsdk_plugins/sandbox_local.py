"""The old import path of `clawsdk_plugins.sandboxes.local`, as the skill-plugin example showed it."""

import warnings

from clawsdk_plugins.sandboxes.local import LocalSandbox

warnings.warn(f"{__name__} moved to clawsdk_plugins.sandboxes.local", DeprecationWarning, stacklevel=2)

__all__ = ["LocalSandbox"]
