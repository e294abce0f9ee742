"""A ChatML chat template that renders tools and tool calls in clawsdk's format (`toolcalls`).

A tokenizer that carries it renders an OpenAI-shaped conversation (system, user, assistant with
`tool_calls`, `tool` results) plus its `tools` exactly as `toolcalls.render_messages` followed by
plain ChatML does, which is how the local backends prompt in rollouts. So a dataset exported with
`--style openai` trains in plain TRL (`SFTTrainer` calls `apply_chat_template(messages, tools=...)`)
on the very text the model sees in rollouts, and the assistant turns, their end-of-turn token
included, sit inside `{% generation %}` markers for TRL's `assistant_only_loss`.

The template is built from `toolcalls`' own constants, so the two cannot drift; a test renders
both ways and compares. Tool arguments given as a JSON string (OpenAI's shape, and the export's)
are written as they are; clawsdk writes them with `json.dumps`, which is what the Python side
re-serialises them to.
"""

from __future__ import annotations

import json

from clawsdk.models import toolcalls

__all__ = ["chatml_tools_template"]

# JSON of a value, with compact_schema's rules (titles dropped, `anyOf [T, null]` -> T, descriptions
# on one line) unless `plain` (the names under "properties" are data, not schema keywords).
_MACROS = (
    "{%- macro cs_items(v, plain) -%}"
    "{%- set ns = namespace(out='') -%}"
    "{%- for k, x in v.items() -%}"
    "{%- set piece = '' -%}"
    "{%- if not plain and k == 'title' and x is string -%}"
    "{%- elif not plain and k == 'properties' and x is mapping -%}"
    "{%- set piece = (k | tojson) ~ ': {' ~ cs_items(x, true) ~ '}' -%}"
    "{%- elif not plain and k == 'anyOf' and x is sequence and x is not string -%}"
    "{%- set kept = x | reject('equalto', {'type': 'null'}) | list -%}"
    "{%- if kept | length == 1 and kept[0] is mapping -%}{%- set piece = cs_items(kept[0], false) -%}"
    "{%- else -%}{%- set piece = (k | tojson) ~ ': ' ~ cs_value(x) -%}{%- endif -%}"
    "{%- elif not plain and k == 'description' and x is string -%}"
    "{%- set piece = (k | tojson) ~ ': ' ~ (x.split() | join(' ') | tojson) -%}"
    "{%- else -%}{%- set piece = (k | tojson) ~ ': ' ~ cs_value(x) -%}{%- endif -%}"
    "{%- if piece -%}{%- set ns.out = ns.out ~ (', ' if ns.out else '') ~ piece -%}{%- endif -%}"
    "{%- endfor -%}"
    "{{- ns.out -}}"
    "{%- endmacro -%}"
    "{%- macro cs_value(v) -%}"
    "{%- if v is string -%}{{- v | tojson -}}"
    "{%- elif v is mapping -%}{{- '{' ~ cs_items(v, false) ~ '}' -}}"
    "{%- elif v is sequence -%}{{- '[' -}}{%- for e in v -%}{{- ', ' if not loop.first -}}{{- cs_value(e) -}}"
    "{%- endfor -%}{{- ']' -}}"
    "{%- else -%}{{- v | tojson -}}{%- endif -%}"
    "{%- endmacro -%}"
    "{%- macro text_of(c) -%}"
    "{%- if c is none or c is undefined -%}"
    "{%- elif c is string -%}{{- c -}}"
    "{%- else -%}{%- for p in c -%}{{- p.text if p is mapping and p.text is defined else '' -}}{%- endfor -%}"
    "{%- endif -%}"
    "{%- endmacro -%}"
)


def _lit(text: str) -> str:
    """A Jinja string literal for `text` (Jinja reads Python-style backslash escapes)."""
    return json.dumps(text, ensure_ascii=True)


def chatml_tools_template(default_system: str | None = None) -> str:
    """The template. `default_system` is the system turn a conversation without one (and without
    tools) gets, as the model's own template does (SmolLM2: "You are a helpful AI assistant ...")."""
    header = toolcalls.TOOLS_HEADER.replace("{{", "\0").replace("}}", "\1")
    head, tail = header.split("{tools}")
    head, tail = (s.replace("\0", "{").replace("\1", "}") for s in (head, tail))
    tools_section = (
        "{%- set ts = namespace(lines='') -%}"
        "{%- for tool in tools -%}"
        "{%- set fn = tool['function'] if ((tool['type'] is undefined or tool['type'] == 'function') "
        "and tool['function'] is defined) else tool -%}"
        "{%- set params = fn['parameters'] if (fn['parameters'] is defined and fn['parameters']) "
        "else {'type': 'object', 'properties': {}} -%}"
        "{%- set desc = (fn['description'] if fn['description'] is defined and fn['description'] else '') -%}"
        "{%- set line = '{\"type\": \"function\", \"function\": {\"name\": ' ~ (fn['name'] | tojson) "
        "~ ', \"description\": ' ~ ((desc | string).split() | join(' ') | tojson) "
        "~ ', \"parameters\": ' ~ cs_value(params) ~ '}}' -%}"
        "{%- set ts.lines = ts.lines ~ ('\\n' if ts.lines else '') ~ line -%}"
        "{%- endfor -%}"
        f"{{%- set section = {_lit(head)} ~ ts.lines ~ {_lit(tail)} -%}}"
    )
    default = (
        f"{{{{- '<|im_start|>system\\n' ~ {_lit(default_system)} ~ '<|im_end|>\\n' -}}}}"
        if default_system else ""
    )
    body = (
        "{%- set has_tools = tools is defined and tools is not none and tools | length > 0 -%}"
        "{%- if has_tools -%}" + tools_section + "{%- endif -%}"
        "{%- set first_system = messages | length > 0 and messages[0]['role'] == 'system' -%}"
        "{%- if has_tools and not first_system -%}"
        "{{- '<|im_start|>system\\n' ~ section ~ '<|im_end|>\\n' -}}"
        "{%- elif not has_tools and not first_system -%}" + default + "{%- endif -%}"
        "{%- for message in messages -%}"
        "{%- set role = message['role'] if message['role'] else 'user' -%}"
        "{%- if role == 'tool' -%}"
        "{%- if loop.first or loop.previtem['role'] != 'tool' -%}{{- '<|im_start|>user\\n' -}}"
        "{%- else -%}{{- '\\n' -}}{%- endif -%}"
        f"{{{{- {_lit(toolcalls.TOOL_RESPONSE_OPEN + chr(10))} ~ text_of(message['content']) ~ "
        f"{_lit(chr(10) + toolcalls.TOOL_RESPONSE_CLOSE)} -}}}}"
        "{%- if loop.last or loop.nextitem['role'] != 'tool' -%}{{- '<|im_end|>\\n' -}}{%- endif -%}"
        "{%- elif role == 'assistant' -%}"
        "{%- set at = namespace(text=text_of(message['content']).strip()) -%}"
        "{%- if message['tool_calls'] is defined and message['tool_calls'] -%}"
        "{%- for call in message['tool_calls'] -%}"
        "{%- set f = call['function'] if call['function'] is defined else call -%}"
        "{%- set args = f['arguments'] if f['arguments'] is defined and f['arguments'] is not none else {} -%}"
        "{%- set args = (args if args.strip() else '{}') if args is string else args | tojson -%}"
        f"{{%- set block = {_lit(toolcalls.TOOL_CALL_OPEN + chr(10))} ~ '{{\"name\": ' ~ (f['name'] | tojson) "
        f"~ ', \"arguments\": ' ~ args ~ '}}' ~ {_lit(chr(10) + toolcalls.TOOL_CALL_CLOSE)} -%}}"
        "{%- set at.text = at.text ~ ('\\n' if at.text else '') ~ block -%}"
        "{%- endfor -%}"
        "{%- endif -%}"
        "{{- '<|im_start|>assistant\\n' -}}"
        "{%- generation -%}{{- at.text ~ '<|im_end|>' -}}{%- endgeneration -%}"
        "{{- '\\n' -}}"
        "{%- elif role == 'system' and loop.first and has_tools -%}"
        "{{- '<|im_start|>system\\n' ~ (text_of(message['content']).rstrip() ~ '\\n\\n' ~ section).lstrip() "
        "~ '<|im_end|>\\n' -}}"
        "{%- else -%}"
        "{{- '<|im_start|>' ~ role ~ '\\n' ~ text_of(message['content']) ~ '<|im_end|>\\n' -}}"
        "{%- endif -%}"
        "{%- endfor -%}"
        "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
    )
    return _MACROS + body
