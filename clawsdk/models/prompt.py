"""The prompt contract rollouts and SFT share: the built-in system prompt, the `finish` tool, and
how a long tool output is cut.

The tool-loop agent prompts with these and the SFT export writes examples with them, so a model
trained on clawsdk data sees the same prompt it will be run with. They live in the core (next to
the tool-call format in `toolcalls`) because both the agent plugin and `clawsdk.data` depend on them.
"""

from __future__ import annotations

from typing import Any

SYSTEM_PROMPT = """You are a careful assistant that completes the user's task inside a workspace folder.
Use the tools to look at files, run commands and write the results the task asks for. Paths are relative to the workspace.
Work step by step: call one tool, read its result, then decide the next step.
When the task is done, call `finish` with a one-line summary."""

FINISH_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "finish",
        "description": "Call when the task is complete. Ends your turn for good.",
        "parameters": {"type": "object", "properties": {"summary": {"type": "string"}}},
    },
}

ELIDED = "[output elided to save context; run the tool again if you need it]"


def truncate_middle(text: str, limit: int) -> str:
    """Keep the head and tail of a long tool output, with a note saying how to see the rest."""
    if limit <= 0 or len(text) <= limit:
        return text
    head = (limit * 2) // 3
    tail = limit - head
    cut = len(text) - head - tail
    return (text[:head] + f"\n[... {cut} characters cut from the middle; read the file with offset/limit "
            f"or grep for what you need ...]\n" + text[len(text) - tail:])


__all__ = ["ELIDED", "FINISH_TOOL", "SYSTEM_PROMPT", "truncate_middle"]
