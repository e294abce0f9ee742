"""The git skill: the git binary, run inside the sandbox with argument lists (no shell)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel

from clawsdk.mcp.toolkit import tool_errors, truncate
from clawsdk.tasks.paths import normalize_relative
from clawsdk_skills._common import config, pack_server

if TYPE_CHECKING:
    from clawsdk.sandbox.base import Sandbox

REF = re.compile(r"^[A-Za-z0-9._/@{}~^:+-]+$")


class Commit(BaseModel):
    hash: str
    author: str
    date: str
    subject: str


class Log(BaseModel):
    commits: list[Commit]


def _ref(ref: str) -> str:
    if not ref or ref.startswith("-") or not REF.match(ref):
        raise ToolError(f"{ref!r} is not a git revision (a branch, tag, commit hash, HEAD~1, ...)")
    return ref


def _paths(paths: list[str]) -> list[str]:
    return [normalize_relative(p) if p not in (".", "./") else "." for p in paths]


def server(sandbox: Sandbox, task: Any = None) -> MCPServer:
    srv = pack_server(__file__)
    cfg = config(task, "git")
    env = {
        "GIT_AUTHOR_NAME": cfg.get("name", "clawsdk agent"),
        "GIT_AUTHOR_EMAIL": cfg.get("email", "agent@clawsdk.invalid"),
        "GIT_COMMITTER_NAME": cfg.get("name", "clawsdk agent"),
        "GIT_COMMITTER_EMAIL": cfg.get("email", "agent@clawsdk.invalid"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_PAGER": "cat",
    }
    timeout = task.limits.tool_timeout_s if task is not None else 60.0

    async def git(repo: str, *args: str, ok_codes: tuple[int, ...] = (0,)) -> str:
        cwd = None if repo in ("", ".", "./") else normalize_relative(repo)
        argv = ["git", "-c", "color.ui=false", "-c", "core.pager=cat", "-c", "safe.directory=*",
                "-c", "init.defaultBranch=main", *args]
        res = await sandbox.exec(argv, timeout=timeout, cwd=cwd, env=env)
        if res.exit_code == 127 or "command not found" in res.stderr:
            raise ToolError("git is not installed in this sandbox")
        if res.exit_code not in ok_codes:
            raise ToolError(f"git {args[0]} failed (exit {res.exit_code}): {(res.stderr or res.stdout).strip()[:2000]}")
        return res.stdout

    @srv.tool()
    @tool_errors
    async def git_status(repo: str = ".") -> str:
        """The current branch and the changed, staged and untracked files."""
        out = await git(repo, "status", "--porcelain=v1", "--branch")
        return out.strip() or "(clean)"

    @srv.tool()
    @tool_errors
    async def git_log(repo: str = ".", max_count: int = 20, path: str | None = None, ref: str | None = None) -> Log:
        """Commits, newest first: hash, author, ISO date, subject."""
        args = ["log", f"--max-count={max(1, min(max_count, 500))}", "--format=%H%x1f%an <%ae>%x1f%aI%x1f%s"]
        if ref:
            args.append(_ref(ref))
        if path:
            args += ["--", *_paths([path])]
        out = await git(repo, *args)
        commits = [Commit(**dict(zip(("hash", "author", "date", "subject"), line.split("\x1f"), strict=True)))
                   for line in out.splitlines() if line.count("\x1f") == 3]
        return Log(commits=commits)

    @srv.tool()
    @tool_errors
    async def git_diff(repo: str = ".", staged: bool = False, ref: str | None = None, path: str | None = None,
                       stat: bool = False) -> str:
        """Unstaged changes; staged ones with staged=true; or the changes since `ref`. stat: a summary only."""
        args = ["diff"]
        if staged:
            args.append("--cached")
        if stat:
            args.append("--stat")
        if ref:
            args.append(_ref(ref))
        if path:
            args += ["--", *_paths([path])]
        return truncate(await git(repo, *args) or "(no changes)", hint="limit it with path= or use stat=true")

    @srv.tool()
    @tool_errors
    async def git_show(ref: str = "HEAD", repo: str = ".", path: str | None = None) -> str:
        """A commit with its diff, or with `path` the file's content at that commit."""
        if path:
            return truncate(await git(repo, "show", f"{_ref(ref)}:{_paths([path])[0]}"))
        return truncate(await git(repo, "show", "--stat", "--patch", _ref(ref)))

    @srv.tool()
    @tool_errors
    async def git_add(paths: list[str], repo: str = ".") -> str:
        """Stage files (paths relative to the repository)."""
        if not paths:
            raise ToolError("give the paths to stage (use ['.'] for everything)")
        await git(repo, "add", "--", *_paths(paths))
        return await git_status(repo)

    @srv.tool()
    @tool_errors
    async def git_commit(message: str, repo: str = ".", all: bool = False) -> str:
        """Commit the staged changes (all=true stages every tracked change first)."""
        if not message.strip():
            raise ToolError("a commit needs a message")
        args = ["commit", "-m", message] + (["--all"] if all else [])
        out = await git(repo, *args)
        return out.strip()

    @srv.tool()
    @tool_errors
    async def git_branch(name: str | None = None, repo: str = ".") -> str:
        """List branches (the current one starred), or create branch `name` at HEAD."""
        if name:
            await git(repo, "branch", "--", _ref(name))
        return (await git(repo, "branch", "--list")).rstrip()

    @srv.tool()
    @tool_errors
    async def git_checkout(ref: str, create: bool = False, repo: str = ".") -> str:
        """Switch to a branch or commit; create=true makes a new branch there."""
        args = ["checkout", "-b", _ref(ref)] if create else ["checkout", _ref(ref), "--"]
        await git(repo, *args)
        return await git_status(repo)

    @srv.tool()
    @tool_errors
    async def git_init(repo: str = ".") -> str:
        """Make `repo` a git repository (branch main)."""
        return (await git(repo, "init")).strip()

    return srv
