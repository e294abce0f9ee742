"""The old import path of `clawsdk_plugins.agents.cli_agent.commands`, as earlier docs showed it."""

import warnings

from clawsdk_plugins.agents.cli_agent.commands import agent_group

warnings.warn(f"{__name__} moved to clawsdk_plugins.agents.cli_agent.commands", DeprecationWarning,
              stacklevel=2)

__all__ = ["agent_group"]
