"""The recording model proxy: OpenAI chat completions, OpenAI Responses and Anthropic Messages in front of a model
backend, every call recorded as the rollout's model events (`clawsdk proxy`; the harness agents such as
`openclaw`, `claude-code` and `codex` point their model at it; `clawsdk models serve` is the same front, not
recording). It is not MCP: the agent's model calls go through it, its tool calls through the tool session."""

from clawsdk.proxy.core import SHUTDOWN_GRACE_S, ModelProxy, serving
from clawsdk.proxy.run import run_proxy
from clawsdk.proxy.upstream import HttpUpstream, ModelUpstream, check_base_url

__all__ = ["SHUTDOWN_GRACE_S", "HttpUpstream", "ModelProxy", "ModelUpstream", "check_base_url", "run_proxy",
           "serving"]
