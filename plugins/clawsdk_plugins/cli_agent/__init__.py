"""Moved to `clawsdk_plugins.agents.cli_agent`; the old import paths stay, as earlier docs showed them."""
