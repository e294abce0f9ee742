"""The recording model proxy: an OpenAI-compatible endpoint in front of a model backend, every call recorded as
the rollout's model events (`clawsdk proxy`, and the harness agents such as `openclaw` point their model at it).
It is not MCP: the agent's model calls go through it, its tool calls through the tool session."""

from clawsdk.proxy.model_proxy import SHUTDOWN_GRACE_S, ModelProxy, run_proxy, serving

__all__ = ["SHUTDOWN_GRACE_S", "ModelProxy", "run_proxy", "serving"]
