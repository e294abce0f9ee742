"""The old import path of `clawsdk_plugins.agents.cli_agent.install`, as earlier docs showed it."""

import warnings

from clawsdk_plugins.agents.cli_agent.install import Package

warnings.warn(f"{__name__} moved to clawsdk_plugins.agents.cli_agent.install", DeprecationWarning,
              stacklevel=2)

__all__ = ["Package"]
