"""A black-box agent CLI for the harness agent: it does the task itself, then talks to the recording proxy the way
CLIENT_PLAN (JSON) says, so a test can send histories the model never wrote.

CLIENT_PLAN is a list of requests. Each is {"messages": [...], "tools": [...], "extra": {...}}; a message is an
object sent as is, or one of:
    "$USER"          the task's instruction as a user turn
    "$REPLY<n>"      the n-th answer this client got (0-based), as it came
    "$RESULTS<n>"    a tool message "ok" for each call of the n-th answer, naming its id
    ":resent" after either: the way OpenClaw sends its history back: text as content parts, call ids without
                     "_", arguments written out again compactly
"""

import json
import os
import re
import urllib.request

with open("done.txt", "w") as f:
    f.write("done\n")
instruction = os.environ["CLAWSDK_INSTRUCTION"]
replies = []


def _resent(reply):
    out = dict(reply)
    if isinstance(reply.get("content"), str):
        out["content"] = [{"type": "text", "text": reply["content"]}]
    out["tool_calls"] = [{**c, "id": c["id"].replace("_", ""), "function": {
        "name": c["function"]["name"], "arguments": json.dumps(json.loads(c["function"]["arguments"]),
                                                                separators=(",", ":"))}}
        for c in reply.get("tool_calls") or []]
    return {k: v for k, v in out.items() if v not in (None, [])}


def _expand(item):
    if not isinstance(item, str):
        return [item]
    if item == "$USER":
        return [{"role": "user", "content": instruction}]
    name, _, how = item.partition(":")
    reply = replies[int(re.sub(r"\D", "", name))]
    if how == "resent":
        reply = _resent(reply)
    if name.startswith("$REPLY"):
        return [reply]
    return [{"role": "tool", "tool_call_id": c["id"], "content": "ok"} for c in reply.get("tool_calls") or []]


for step in json.loads(os.environ["CLIENT_PLAN"]):
    body = {"model": "m", "messages": [m for item in step["messages"] for m in _expand(item)],
            **({"tools": step["tools"]} if "tools" in step else {}), **step.get("extra", {})}
    req = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
                                          "Content-Type": "application/json"})
    with urllib.request.urlopen(req) as resp:
        replies.append(json.load(resp)["choices"][0]["message"])
