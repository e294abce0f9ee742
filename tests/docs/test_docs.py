"""Every `clawsdk ...` command in README.md and docs/*.md is checked against the real CLI.

Commands come from fenced blocks (bash, sh, shell, console, or no language) and from indented
code blocks. Each one must name a command that exists, only options that command has, choice
values it accepts, and agents, sandboxes and model backends that are registered; its `--help`
must render. Cheap, self-contained commands (listing and validating the shipped examples) run
for real against a store in a temporary folder. `make docs-check` runs this file alone.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from clawsdk.cli import cli

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL_LANGS = {"", "bash", "sh", "shell", "console", "text"}
#: commands that read the shipped examples or an empty store only: these run for real
RUN_FOR_REAL = {("tasks", "list"), ("tasks", "show"), ("tasks", "validate"), ("plugins",), ("skills", "list"),
                ("runs",), ("data", "list"), ("train", "list"), ("synth", "families"), ("sandbox", "check")}
_FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([\w+-]*)")
_PLACEHOLDER = re.compile(r"[A-Z][A-Z0-9_]{2,}|[<>{}\[\]]|\.\.\.")


@dataclass(frozen=True)
class DocCommand:
    file: str
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.text}"


def _command_of(line: str) -> str | None:
    """The `clawsdk ...` part of a shell line, or None."""
    line = line.strip()
    if line.startswith("$ "):
        line = line[2:].strip()
    for prefix in (".venv/bin/", "./.venv/bin/", "uv run ", "python -m "):
        if line.startswith(prefix):
            line = line[len(prefix):]
    if line.startswith("python -m clawsdk "):
        line = "clawsdk " + line[len("python -m clawsdk "):]
    while re.match(r"^[A-Z_][A-Z0-9_]*=\S*\s", line):  # VAR=value clawsdk ...
        line = line.split(None, 1)[1]
    return line if re.match(r"^clawsdk(\s|$)", line) else None


def _joined(lines: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Shell lines with `\\` continuations joined, each with the number of its first line."""
    out: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None
    for n, text in lines:
        if pending:
            pending = (pending[0], pending[1] + " " + text.strip())
        else:
            pending = (n, text)
        if pending[1].rstrip().endswith("\\"):
            pending = (pending[0], pending[1].rstrip()[:-1])
            continue
        out.append(pending)
        pending = None
    if pending:
        out.append(pending)
    return out


def extract(text: str, name: str) -> list[DocCommand]:
    """Every clawsdk command in a Markdown text: fenced shell blocks and indented code blocks."""
    found: list[DocCommand] = []
    lines = text.splitlines()
    i = 0
    blank_before = True
    while i < len(lines):
        line = lines[i]
        fence = _FENCE.match(line)
        if fence:
            marker, lang = fence.group(2), fence.group(3).lower()
            body: list[tuple[int, str]] = []
            i += 1
            while i < len(lines) and not lines[i].strip().startswith(marker):
                body.append((i + 1, lines[i]))
                i += 1
            if lang in SHELL_LANGS:
                for n, joined in _joined(body):
                    cmd = _command_of(joined)
                    if cmd:
                        found.append(DocCommand(name, n, cmd))
            i += 1
            blank_before = True
            continue
        if line.startswith("    ") and blank_before:  # an indented code block
            body = []
            while i < len(lines) and (lines[i].startswith("    ") or not lines[i].strip()):
                body.append((i + 1, lines[i][4:]))
                i += 1
            for n, joined in _joined(body):
                cmd = _command_of(joined)
                if cmd:
                    found.append(DocCommand(name, n, cmd))
            blank_before = True
            continue
        blank_before = not line.strip()
        i += 1
    return found


def _argv(command: str) -> list[str]:
    """The words of the first command in a shell line, without comments, pipes, redirections and
    optional `[...]` parts."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars="|&;<>")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    words: list[str] = []
    for word in lexer:
        if word and set(word) <= set("|&;<>"):
            break
        words.append(word)
    out, depth = [], 0
    for w in words[1:]:
        if w.startswith("[") and not w.startswith("[["):
            depth += 1
        if depth == 0 and w != "...":
            out.append(w)
        if depth and w.endswith("]"):
            depth -= 1
    return out


def _is_placeholder(value: str) -> bool:
    return bool(_PLACEHOLDER.search(value))


def _registered(kind: str) -> list[str]:
    from clawsdk.plugins import get_registry

    return get_registry().names(kind)


def _check_value(param: click.Parameter, value: str, where: str, seen: dict[str, str]) -> None:
    seen[param.name or ""] = value
    if _is_placeholder(value):
        return
    if isinstance(param.type, click.Choice):
        assert value in param.type.choices, f"{where}: {value!r} is not one of {param.type.choices}"
    name = param.name or ""
    if name == "agent" or name == "agents":
        assert value in _registered("agents"), f"{where}: no agent named {value!r} ({_registered('agents')})"
    elif name == "sandbox":
        assert value in _registered("sandboxes"), f"{where}: no sandbox named {value!r}"


def _check_model(cmd: click.Command, ctx: click.Context, seen: dict[str, str], where: str) -> None:
    """--model is BACKEND[:NAME] for the tool-loop agent (other agents, such as harness, take the
    upstream's model name)."""
    agent_param = _find(cmd, ctx, "--agent")
    agent = seen.get("agent", agent_param.default if agent_param is not None else "tool-loop")
    value = seen.get("model")
    if agent != "tool-loop" or not value or _is_placeholder(value) or value.startswith(("/", ".")):
        return
    backend = value.split(":", 1)[0]
    assert backend in _registered("models"), f"{where}: no model backend {backend!r} ({_registered('models')})"


def _find(cmd: click.Command, ctx: click.Context, opt: str) -> click.Parameter | None:
    for p in cmd.get_params(ctx):
        if opt in p.opts or opt in getattr(p, "secondary_opts", []):
            return p
    return None


def resolve(args: list[str], where: str) -> tuple[list[str], click.Command, list[str]]:
    """(command path, the command, its arguments), asserting that every option exists."""
    cmd: click.Command = cli
    ctx = click.Context(cli, info_name="clawsdk")
    path: list[str] = []
    rest = list(args)
    while True:
        while rest and rest[0].startswith("-") and isinstance(cmd, click.Group):
            opt = rest.pop(0)
            if opt in ("--help", "-h", "--version"):
                return path, cmd, []
            key = opt if opt.startswith("--") else opt[:2]
            assert _find(cmd, ctx, key.split("=")[0]), f"{where}: `clawsdk {' '.join(path)}` has no option {opt}"
        if not isinstance(cmd, click.Group) or not rest:
            break
        name = rest.pop(0)
        sub = cmd.get_command(ctx, name)
        assert sub is not None, f"{where}: no command `clawsdk {' '.join([*path, name])}`"
        path.append(name)
        cmd = sub
        ctx = click.Context(cmd, info_name=name, parent=ctx)
    seen: dict[str, str] = {}
    i = 0
    while i < len(rest):
        word = rest[i]
        i += 1
        if word == "--":
            break
        if not word.startswith("-") or word == "-" or re.match(r"^-\d", word):
            continue
        if word.startswith("--"):
            opt, _, inline = word.partition("=")
        else:
            opt, inline = word[:2], word[2:]
        if opt in ("--help", "-h"):
            continue
        param = _find(cmd, ctx, opt)
        assert param is not None, f"{where}: `clawsdk {' '.join(path)}` has no option {opt}"
        takes_value = isinstance(param, click.Option) and not param.is_flag and not param.count
        if takes_value and param.nargs == 1:
            value = inline if inline else (rest[i] if i < len(rest) else "")
            if not inline:
                i += 1
            _check_value(param, value, where, seen)
    _check_model(cmd, ctx, seen, where)
    return path, cmd, rest


def makefile_commands(text: str) -> list[DocCommand]:
    """The clawsdk commands of the Makefile's recipes (`make demo` is what a newcomer runs first)."""
    joined = _joined([(i + 1, raw) for i, raw in enumerate(text.splitlines())])
    variables = {m.group(1): m.group(2) for _, line in joined
                 if (m := re.match(r"^([A-Z_]+) :?= (.*)$", line))}
    tasks = " ".join(variables.get("DEMO_TASKS", "").split())
    m = re.match(r"\$\(addprefix ([^,]+),(.*)\)$", tasks)
    if m:
        tasks = " ".join(m.group(1) + t for t in m.group(2).split())
    found = []
    for n, line in joined:
        line = line.strip().lstrip("@")
        if not line.startswith("$(VENV)/bin/clawsdk "):
            continue
        line = "clawsdk " + line[len("$(VENV)/bin/clawsdk "):]
        found.append(DocCommand("Makefile", n, line.replace("$(DEMO_TASKS)", tasks)))
    return found


def all_commands() -> list[DocCommand]:
    out: list[DocCommand] = []
    for doc in DOCS:
        out += extract(doc.read_text(encoding="utf-8"), str(doc.relative_to(ROOT)))
    return out + makefile_commands((ROOT / "Makefile").read_text(encoding="utf-8"))


COMMANDS = all_commands()


def test_the_docs_have_commands_to_check():
    files = {c.file for c in COMMANDS}
    assert len(COMMANDS) >= 60 and {"README.md", "docs/bench.md", "docs/skills.md", "docs/training.md"} <= files
    demo = [c.text for c in COMMANDS if c.file == "Makefile"]
    assert len(demo) >= 3 and any("examples/tasks/fix-slugify-bug" in c for c in demo)


def test_the_checker_catches_a_wrong_agent_a_wrong_option_and_a_missing_command():
    doc = ("Run it:\n\n```bash\nclawsdk run tasks/ --agent toolloop --model openai:m\n```\n\n"
           "    clawsdk run tasks/ --agents tool-loop\n\n"
           "```console\n$ clawsdk bench runn x\n```\n\n"
           "```bash\nCI=true clawsdk run tasks/ --sandbox dokker \\\n    --model nosuch:m  # comment\n```\n")
    cmds = extract(doc, "x.md")
    assert [c.line for c in cmds] == [4, 7, 10, 14]
    for c, message in zip(cmds, ["no agent named 'toolloop'", "has no option --agents", "no command `clawsdk bench runn`",
                                 "no sandbox named 'dokker'"], strict=True):
        with pytest.raises(AssertionError, match=re.escape(message)):
            resolve(_argv(c.text), str(c))


@pytest.mark.parametrize("command", COMMANDS, ids=[f"{c.file}:{c.line}" for c in COMMANDS])
def test_documented_command(command: DocCommand, tmp_path, monkeypatch):
    args = _argv(command.text)
    path, _cmd, rest = resolve(args, str(command))
    runner = CliRunner()
    monkeypatch.setenv("CLAWSDK_DB", str(tmp_path / "store.db"))
    monkeypatch.chdir(ROOT)
    helped = runner.invoke(cli, [*path, "--help"])
    assert helped.exit_code == 0, f"{command}: --help failed: {helped.output}"
    if tuple(path) in RUN_FOR_REAL and not any(_is_placeholder(w) for w in rest) \
            and all((ROOT / w).exists() for w in rest if not w.startswith("-") and "/" in w):
        from clawsdk.store.store import Store

        Store(tmp_path / "store.db").close()  # an empty store: the commands that read one have one
        res = runner.invoke(cli, args)
        assert res.exit_code == 0, f"{command}: exit {res.exit_code}: {res.output}"
