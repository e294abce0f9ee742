"""The old import path of `clawsdk_plugins.agents.cli_agent.base`, as earlier docs showed it."""

import warnings

from clawsdk_plugins.agents.cli_agent.base import CliAgent

warnings.warn(f"{__name__} moved to clawsdk_plugins.agents.cli_agent.base", DeprecationWarning, stacklevel=2)

__all__ = ["CliAgent"]
