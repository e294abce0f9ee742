"""CLI commands for external agents and skill authors: `clawsdk serve`, `clawsdk proxy`, `clawsdk models serve`,
`clawsdk skills`."""

from __future__ import annotations

import functools
import json
import os
import secrets
import signal
import sys
from pathlib import Path

import click

from clawsdk.hookspecs import hookimpl


def _err(msg: str) -> None:
    click.echo(msg, err=True)


def _one_task(spec: str):
    from clawsdk.tasks.sources import load_tasks

    loaded = load_tasks(spec)
    for e in loaded.errors:
        _err(f"skipped task: {e}")
    if not loaded.tasks:
        raise click.ClickException(f"no task could be read from {spec}")
    if len(loaded.tasks) > 1:
        ids = ", ".join(t.id for t in loaded.tasks[:10])
        raise click.ClickException(f"{spec} holds {len(loaded.tasks)} tasks ({ids}, ...); serve one task folder")
    return loaded.tasks[0]


def _db(db: str | None) -> Path:
    from clawsdk.store.store import default_db_path

    return Path(db) if db else default_db_path()


#: The shortest bearer token --token-env may give: a one-character token is guessed at the first try.
MIN_TOKEN_LENGTH = 16


def _token_from_env(token_env: str | None) -> str | None:
    """The bearer token in $TOKEN_ENV (None without --token-env); refuses one that is unset or too short,
    since the server would otherwise start with a token nobody is shown, or one anybody can guess."""
    if not token_env:
        return None
    token = os.environ.get(token_env)
    if not token:
        raise click.ClickException(f"--token-env {token_env}: that environment variable is empty")
    if len(token) < MIN_TOKEN_LENGTH:
        raise click.ClickException(
            f"--token-env {token_env}: the token has {len(token)} characters; use at least "
            f"{MIN_TOKEN_LENGTH} (e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))'), "
            "or drop --token-env for a fresh one")
    return token


def _exposure_warning(host: str, what: str) -> None:
    from clawsdk._http import is_loopback

    if not is_loopback(host):
        _err(f"warning: binding {host} exposes {what} beyond this machine (the token still applies)")


def _local_warning(chosen: bool) -> str:
    """What the `local` sandbox exposes to the agent it serves, in one line."""
    who = "root" if os.geteuid() == 0 else f"uid {os.geteuid()}"
    why = "--sandbox local" if chosen else "bubblewrap does not work here, so sessions fall back to the local sandbox:"
    return (f"warning: {why} isolates nothing: the agent's exec runs on this host as {who}, with the host file "
            "system, network and processes in reach (task sources, other rollouts' hidden verifier files"
            + (", and root access to the machine" if who == "root" else "") + "); serve only agents you trust")


@click.command("serve")
@click.argument("task")
@click.option("--http", "use_http", is_flag=True, help="Serve streamable HTTP instead of stdio.")
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP: address to bind (loopback by default).")
@click.option("--port", default=None, type=int,
              help="HTTP: port [default 8765]; stdio with --upstream: the model proxy's [default: a free one]. 0 "
                   "picks a free one.")
@click.option("--token-env", default=None, metavar="VAR",
              help="HTTP: take the bearer token from this environment variable instead of a fresh one.")
@click.option("--sandbox", "-s", default="auto", show_default=True,
              help="Sandbox plugin for each session: auto is bwrap where it works (as for `clawsdk run`); "
                   "local isolates nothing and must be asked for.")
@click.option("--sandbox-root", default=None, help="Where workspaces live.")
@click.option("--timeout", "timeout_s", type=float, default=None,
              help="Seconds a session may last from its first tool call [default: the task's limits.timeout_s].")
@click.option("--max-rollouts", type=click.IntRange(1), default=None,
              help="HTTP: the first N sessions to call a tool are rollouts (later ones are refused); stop "
                   "once they have ended (stdio always serves one).")
@click.option("--reveal-verdict", is_flag=True, help="Tell the agent its score when it calls finish.")
@click.option("--upstream", default=None, metavar="URL",
              help="Also be the rollouts' recording model proxy (/v1/chat/completions, /v1/responses, /v1/messages) "
                   "in front of this OpenAI-compatible base URL: over HTTP on the same port and token; over stdio "
                   "on a loopback port of its own, its base URL and token said on stderr.")
@click.option("--upstream-key-env", default="OPENAI_API_KEY", show_default=True, metavar="VAR",
              help="With --upstream: the variable holding the upstream's API key.")
@click.option("--run-id", default=None, help="Record the sessions under this run id [default: serve-...].")
@click.option("--db", type=click.Path(dir_okay=False), envvar="CLAWSDK_DB", default=None,
              help="The store file [env CLAWSDK_DB; default: HTTP .clawsdk/clawsdk.db, stdio "
                   "~/.local/share/clawsdk/clawsdk.db].")
def serve_command(task, use_http, host, port, token_env, sandbox, sandbox_root, timeout_s, max_rollouts,
                  reveal_verdict, upstream, upstream_key_env, run_id, db):
    """Expose TASK's tools to an external MCP client; each client session is one recorded, scored rollout.

    stdio (default): point the client at the command `clawsdk serve TASK`. HTTP: `--http` prints the
    URL and a bearer token (once); clients send `Authorization: Bearer TOKEN`. A session becomes a
    rollout at its first tool call, and ends when the client calls `finish`, disconnects, or times out;
    then the verifier scores the workspace. SIGTERM or Ctrl-C ends open sessions as cancelled.
    """
    import anyio

    from clawsdk.runtime.ids import new_run_id
    from clawsdk.sandbox.base import SandboxConfig
    from clawsdk.sandbox.capabilities import choose_sandbox
    from clawsdk.serve import MESSAGE_TEMPLATE, ServeConfig, default_stdio_db, serve_http, serve_stdio

    the_task = _one_task(task)
    backend = choose_sandbox(sandbox)
    store = Path(db) if db else (_db(None) if use_http else default_stdio_db())
    config = ServeConfig(task=the_task, db=store, run_id=run_id or "serve-" + new_run_id(), sandbox=backend,
                         sandbox_config=SandboxConfig(root=sandbox_root), timeout_s=timeout_s,
                         reveal_verdict=reveal_verdict, max_rollouts=max_rollouts, upstream=upstream,
                         upstream_key=os.environ.get(upstream_key_env) if upstream else None)
    if upstream:
        from clawsdk.proxy import HttpUpstream

        try:
            HttpUpstream(upstream)
        except ValueError as e:
            raise click.UsageError(str(e)) from None
    if backend == "local":
        _err(_local_warning(chosen=sandbox == "local"))
    message = MESSAGE_TEMPLATE.format(server="clawsdk")
    if not use_http:
        _err(f"clawsdk serve: task {the_task.id} over stdio, sandbox {backend}; run {config.run_id}, "
             f"store {config.db}")
        token = _token_from_env(token_env) if upstream else None

        def proxy_ready(base_url: str, tok: str) -> None:  # stdout is the MCP wire: said on stderr
            _err(f"model base URL of this session's rollout: {base_url}")
            if not token_env:
                _err(f"its bearer token (shown once): {tok}")

        host_obj = _serve(anyio.run, lambda: serve_stdio(config, proxy_port=port or 0, token=token,
                                                         on_proxy=proxy_ready))
        for live in host_obj.finished:
            v = live.verdict
            _err(f"rollout {live.id}: {live.kind.value}, ended by {live.end_reason}"
                 + (f", score {v.score:.2f}" if v else ""))
        if host_obj.interrupted:
            raise SystemExit(130)
        return
    token = _token_from_env(token_env)
    _exposure_warning(host, "the task's tools")

    def ready(url: str, tok: str) -> None:
        # one JSON line on stdout (scripts read it), the human version on stderr
        line = {"url": url, "token": None if token_env else tok, "run_id": config.run_id, "task": the_task.id,
                "db": str(config.db), "sandbox": backend, "message": message}
        if upstream:  # the model base URL of the same rollouts
            line["base_url"] = url.rsplit("/", 1)[0] + "/v1"
        click.echo(json.dumps(line))
        sys.stdout.flush()
        _err(f"clawsdk serve: task {the_task.id} at {url}, sandbox {backend}")
        if not token_env:
            _err(f"bearer token (shown once): {tok}")
        _err(f"for agents that ignore MCP server instructions, send: {message}")
        _err(f"recording run {config.run_id} in {config.db}; Ctrl-C to stop")

    http_port = 8765 if port is None else port
    host_obj = _serve(anyio.run, lambda: serve_http(config, host=host, port=http_port, token=token, on_ready=ready))
    if host_obj.interrupted:
        raise SystemExit(130)


def _serve(run, *args):
    """Run the server; a refusal before it starts (a task the sandbox cannot serve) is one line, exit 2."""
    from clawsdk.errors import ClawError

    try:
        return run(*args)
    except ClawError as e:
        _err(f"error: {e}")
        raise SystemExit(2) from None


@click.command("proxy")
@click.option("--upstream", required=True, envvar="CLAWSDK_PROXY_UPSTREAM",
              help="The OpenAI-compatible base URL to forward to, e.g. http://127.0.0.1:8000/v1.")
@click.option("--upstream-key-env", default="OPENAI_API_KEY", show_default=True, metavar="VAR",
              help="Environment variable holding the upstream's API key (if it needs one).")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8766, show_default=True, type=int, help="0 picks a free port.")
@click.option("--token-env", default=None, metavar="VAR", help="Take the proxy's bearer token from this variable.")
@click.option("--task", "task_spec", default=None, help="Record the calls as a rollout of this task.")
@click.option("--run-id", default=None)
@click.option("--db", type=click.Path(dir_okay=False), envvar="CLAWSDK_DB", default=None)
@click.option("--model", default=None, help="Send this model name upstream, whatever the client asks for.")
@click.option("--token-ids", is_flag=True, help="Ask the upstream for token ids and logprobs (vLLM).")
@click.option("--whole", is_flag=True, help="Ask the upstream for whole answers; stream them to clients that ask.")
def proxy_command(upstream, upstream_key_env, host, port, token_env, task_spec, run_id, db, model, token_ids, whole):
    """A recording proxy: OpenAI chat completions, the Responses API and Anthropic Messages (/v1/chat/completions,
    /v1/responses, /v1/messages) go to UPSTREAM as chat completions, and every request and response is recorded as
    model_request/model_response events of one rollout in the store."""
    import anyio

    from clawsdk._http import public_url
    from clawsdk.proxy import run_proxy

    token = _token_from_env(token_env)
    the_task = _one_task(task_spec) if task_spec else None
    _exposure_warning(host, "the proxy, and through it the upstream and its key,")

    def ready(url: str, tok: str, rid: str) -> None:
        click.echo(json.dumps({"base_url": url, "token": None if token_env else tok, "rollout_id": rid}))
        sys.stdout.flush()
        _err(f"clawsdk proxy: {url} -> {public_url(upstream)}; recording rollout {rid} in {_db(db)}")
        if not token_env:
            _err(f"api key for clients (shown once): {tok}")

    anyio.run(lambda: run_proxy(upstream=upstream, upstream_key=os.environ.get(upstream_key_env), host=host,
                                port=port, token=token, task=the_task, run_id=run_id, db=_db(db), on_ready=ready,
                                model=model, token_ids=token_ids, upstream_stream=False if whole else None))


@click.group("models")
def models_group():
    """Model backends as servers for harnesses and your own agents."""


@models_group.command("serve")
@click.argument("model")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8000, show_default=True, type=int, help="0 picks a free port.")
@click.option("--token-env", default=None, metavar="VAR", help="Take the bearer token from this variable.")
@click.option("--name", default=None, help="The model id clients see and ask for [default: the backend's].")
@click.option("--backend-opt", "backend_opts", multiple=True, metavar="KEY=VALUE",
              help="Option for the model backend (e.g. device=cpu, base_url=...).")
def models_serve_command(model, host, port, token_env, name, backend_opts):
    """Serve MODEL (BACKEND[:NAME]: embedded, transformers:PATH, openai:NAME, ...) as an OpenAI-compatible server:
    /v1/chat/completions, /v1/responses and /v1/messages (Anthropic), streaming or not, with token ids and logprobs
    where the backend gives them. Bound to loopback; every request needs the bearer token (or x-api-key)."""
    import anyio

    from clawsdk.cli.common import parse_options
    from clawsdk.proxy import ModelProxy, ModelUpstream, serving
    from clawsdk_plugins.agents.toolloop import resolve_model

    token = _token_from_env(token_env) or secrets.token_urlsafe(32)
    _exposure_warning(host, "the model")
    try:
        llm = resolve_model(model, **parse_options(backend_opts, "--backend-opt"))
    except (ValueError, KeyError) as e:
        raise click.ClickException(f"model {model!r}: {e}") from None
    upstream = ModelUpstream(llm, name or llm.name)
    app = ModelProxy(upstream)
    app.register(None, token)  # served, not recorded

    async def main() -> None:
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with serving(app, host, port) as url:
                click.echo(json.dumps({"base_url": url + "/v1", "model": upstream.name,
                                       "token": None if token_env else token}))
                sys.stdout.flush()
                _err(f"clawsdk models serve: {upstream.name} at {url}/v1 (chat completions, responses, messages)")
                if not token_env:
                    _err(f"api key for clients (shown once): {token}")
                async for _ in signals:
                    break
        await llm.aclose()

    anyio.run(main)


@click.group("skills")
def skills_group():
    """List skills and check them with the conformance kit."""


@skills_group.command("list")
@click.option("--json", "as_json", is_flag=True)
def skills_list(as_json):
    """Every registered skill/tool server and where it comes from."""
    from clawsdk.plugins import get_registry

    reg = get_registry()
    rows = []
    for name in reg.names("skills"):
        make = reg.tables["skills"][name]
        folder = getattr(make, "skill_dir", None)
        desc = ""
        if folder:
            from clawsdk.mcp.toolkit import SkillFormatError, load_skill_md

            try:
                desc = load_skill_md(folder).description
            except SkillFormatError as e:
                desc = f"(bad SKILL.md: {e})"
        rows.append({"name": name, "plugin": reg.owners.get(("skills", name)), "folder": str(folder or ""),
                     "description": desc})
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    for r in rows:
        click.echo(f"{r['name']:18} {r['plugin'] or '':28} {r['description'][:70]}")


@skills_group.command("check")
@click.argument("names_or_folders", nargs=-1)
def skills_check(names_or_folders):
    """Run the skill conformance kit on registered skills (all without arguments) or skill folders."""
    import anyio

    from clawsdk.plugins import get_registry
    from clawsdk.testing.skills import check_skill
    from clawsdk_plugins.skills.packs import folder_skill

    reg = get_registry()
    targets = names_or_folders or tuple(reg.names("skills"))
    failed = 0
    for t in targets:
        if Path(t).is_dir():
            make, md, required, name = folder_skill(Path(t)), Path(t) / "SKILL.md", True, None
        else:
            make, md, name = reg.get("skills", t), None, t
            # clawsdk's own tool servers (core, web, memory, openclaw, workspace-skills) have no SKILL.md
            # by design; any other registered skill must have one (found through its skill_dir)
            required = not str(getattr(make, "__module__", "")).startswith(("clawsdk_tools.", "clawsdk_plugins."))
        report = anyio.run(functools.partial(check_skill, make, skill_md=md, require_skill_md=required, name=name))
        click.echo(report.summary())
        failed += not report.ok
    if failed:
        raise SystemExit(1)


@skills_group.command("serve")
@click.argument("name")
@click.option("--workspace", "-w", type=click.Path(file_okay=False, exists=True), default=".", show_default=True,
              help="The folder the skill's tools act on (paths outside it are refused).")
@click.option("--http", "use_http", is_flag=True, help="Serve streamable HTTP instead of stdio.")
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP: address to bind (loopback by default).")
@click.option("--port", default=0, show_default=True, type=int, help="HTTP: port (0 picks a free one).")
@click.option("--token-env", default=None, metavar="VAR",
              help="HTTP: take the bearer token from this environment variable instead of a fresh one.")
def skills_serve(name, workspace, use_http, host, port, token_env):
    """Serve skill NAME (or a skill folder) as a standalone MCP server on a folder, for agents outside clawsdk.

    Nothing is sandboxed or recorded here: start it inside your agent's own sandbox. stdio by default; with
    --http it prints the URL and a bearer token (once), and every request must carry the token."""
    import anyio

    from clawsdk.mcp.toolhost.standalone import serve_http, serve_stdio, skill_server
    from clawsdk.plugins import get_registry

    if Path(name).is_dir():
        from clawsdk_plugins.skills.packs import folder_skill

        factory = folder_skill(Path(name))
        from clawsdk.mcp.toolkit import load_skill_md

        name = load_skill_md(name).name
    else:
        factory = get_registry().get("skills", name)
    if getattr(factory, "mcp_command", None) is not None:
        raise click.ClickException(f"skill {name} is an MCP server of its own ({' '.join(factory.mcp_command.command)}"
                                   "): run that command instead")
    server = skill_server(name, factory, workspace)
    if not use_http:
        anyio.run(serve_stdio, server)
        return
    token = _token_from_env(token_env)
    _exposure_warning(host, f"the {name} skill's tools on {workspace}")

    def ready(url: str, tok: str) -> None:
        _err(f"clawsdk skills serve: {name} on {Path(workspace).resolve()} at {url}")
        if token is None:
            _err(f"bearer token (shown once): {tok}")

    anyio.run(lambda: serve_http(server, host=host, port=port, token=token, on_ready=ready))


@hookimpl
def register_commands(register):
    register(serve_command)
    register(proxy_command)
    register(models_group)
    register(skills_group)
