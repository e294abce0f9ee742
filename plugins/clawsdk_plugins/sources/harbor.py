"""Harbor tasks: the task-folder format Harbor, TRL, SkyRL, NeMo Gym, verifiers and Inspect read, and its verifier.

A task folder::

    task.toml           [metadata], [agent]/[verifier] timeout_sec and network_mode, [environment] resources,
                        network_mode / allowed_hosts, docker_image, workdir
    instruction.md      the instruction
    environment/        Dockerfile (built FROM a local image by the docker sandbox) and its build context
    tests/test.sh       the verifier: writes /logs/verifier/reward.txt (a number) or reward.json (metrics)
    solution/solve.sh   optional: the reference solution, which the oracle runs

What maps: the instruction; timeouts (`limits.timeout_s`, `limits.verifier_timeout_s`); resources (cpus,
memory_mb, storage_mb, applied by the isolating sandboxes); the network policy per phase (no-network is
`none`, allowlist is `allowlist`; `public` is never given: such a phase runs with `none`, said at load); the
Dockerfile (`environment.dockerfile`; files it COPYs into the workdir are also the task's workspace, since
the workspace is mounted there); tests/ as the hidden files at /tests; solution/ as the oracle's one exec
call. What does not is refused with one line: a docker-compose task (several containers), a multi-step task,
a separate verifier container, a Windows task, GPUs.

Scoring (`type: harbor`): after the agent's turn the logs folder is emptied (a reward the agent wrote there
is gone), the tests are copied in, test.sh runs, and the reward is read as Harbor reads it: reward.json
first (its `reward`, else the mean of its values; the other keys are sub-scores), else reward.txt. No
reward file is a verifier_error (unscored), never a 0.
"""

from __future__ import annotations

import base64
import functools
import json
import logging
import math
import re
import shlex
import tomllib
from collections.abc import Iterable, Iterator
from pathlib import Path, PurePosixPath
from typing import Any

import anyio
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from clawsdk.errors import TaskFormatError, VerifierError, VerifierTimeout
from clawsdk.hookspecs import hookimpl
from clawsdk.store.events import SandboxExec, VerifierScore
from clawsdk.tasks.model import File, Task, VerifierSpec
from clawsdk.tasks.reading import Budget, check_instruction, guarded, lexists, read_text, read_tree
from clawsdk.verify.verdict import SubScore, Verdict, Verifier, VerifyContext, read_score, spec_as
from clawsdk_plugins.sources.clawgym import validated_task, validation_message_of

log = logging.getLogger(__name__)

TASK_TOML = "task.toml"
INSTRUCTION = "instruction.md"
WORKDIR, TESTS_DIR, LOGS_DIR = "/app", "/tests", "/logs"
SOLUTION_COPY = "/tmp/.clawsdk-solution"
SOLUTION_MARK = "# clawsdk: harbor solution/ (each file, then solve.sh run in the workdir)"
SCHEMA_VERSION = "1.4"  # the task.toml schema this reads and writes (Harbor 0.26)
#: what the exporter builds from when a task has workspace files and no Dockerfile of its own
DEFAULT_BASE = "clawsdk-sandbox:latest"
#: the folder of environment/ the exporter copies a task's workspace from (COPY clawsdk-workspace/ /app/)
GENERATED = "clawsdk-workspace"
_COPY = re.compile(r"^\s*(COPY|ADD)\s+(.*)$", re.I)
_WORKDIR = re.compile(r"^\s*WORKDIR\s+(\S+)\s*$", re.I)
_NETWORK = {"no-network": "none", "allowlist": "allowlist"}


# ---- reading ---------------------------------------------------------------------------------------


def is_task_folder(path: Path) -> bool:
    return path.is_dir() and (path / TASK_TOML).is_file() and (path / INSTRUCTION).is_file()


def _refuse(where: Path, message: str, task_id: str, field: str | None = None) -> TaskFormatError:
    return TaskFormatError(str(where), message, field=field, task_id=task_id)


def _number(value: Any, where: Path, field: str, task_id: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise _refuse(where, f"must be a positive number, got {value!r}", task_id, field)
    return float(value)


def _phase(section: dict, base: dict, where: Path, name: str, task_id: str,
           warnings: list[str]) -> dict[str, Any]:
    """One phase's policy: its own network_mode, else the [environment] baseline (Harbor's default: public)."""
    mode = section.get("network_mode", base.get("network_mode"))
    hosts = section.get("allowed_hosts", base.get("allowed_hosts") if mode == base.get("network_mode") else None)
    if mode is None and base.get("allow_internet") is not None:
        mode = "public" if base["allow_internet"] else "no-network"
    if mode in (None, "public"):
        if mode == "public":
            warnings.append(f"the {name} phase asks for a public network; clawsdk never opens one, so it runs "
                            f"with none (network_mode = \"allowlist\" with allowed_hosts lets it reach hosts)")
        return {"mode": "none"}
    if mode not in _NETWORK:
        raise _refuse(where, f"{mode!r}: one of no-network, allowlist, public", task_id, f"[{name}].network_mode")
    out: dict[str, Any] = {"mode": _NETWORK[mode]}
    if mode == "allowlist":
        if not isinstance(hosts, list) or not all(isinstance(h, str) and h.strip() for h in hosts):
            raise _refuse(where, "an allowlist names its hosts: allowed_hosts = [\"pypi.org\", ...]", task_id,
                          f"[{name}].allowed_hosts")
        out["hosts"] = [h.strip().lower().rstrip(".") for h in hosts]
    return out


def _copied_into_workdir(dockerfile: str, context: list[File], workdir: str) -> list[File]:
    """The context files a Dockerfile COPYs (or ADDs) into its workdir, at their paths below it: the workspace
    is mounted over the workdir, so they must be its files too."""
    by_path = {f.path: f for f in context}
    cwd = "/"
    out: dict[str, File] = {}
    for line in dockerfile.splitlines():
        if m := _WORKDIR.match(line):
            cwd = str(PurePosixPath(cwd) / m.group(1))
            continue
        m = _COPY.match(line)
        if not m:
            continue
        args = m.group(2).strip()
        try:
            parts = json.loads(args) if args.startswith("[") else shlex.split(args)
        except (ValueError, json.JSONDecodeError):
            continue
        parts = [p for p in parts if not p.startswith("--")]
        if len(parts) < 2:
            continue
        *sources, dest = parts
        target = PurePosixPath(cwd) / dest
        inside = str(target) == workdir or str(target).startswith(workdir.rstrip("/") + "/")
        if not inside:
            continue
        below = PurePosixPath(str(target)[len(workdir):].lstrip("/"))
        for src in sources:
            src = src.strip("./") if src not in (".", "./") else ""
            matched = [f for p, f in by_path.items() if p == src or not src or p.startswith(src + "/")]
            for f in matched:
                if f.path == src and not (dest.endswith("/") or len(sources) > 1):
                    rel = below  # COPY file /app/name
                elif f.path == src:
                    rel = below / PurePosixPath(f.path).name
                else:
                    rel = below / (f.path[len(src) + 1:] if src else f.path)
                rel_s = str(rel).lstrip("/")
                if rel_s and rel_s != ".":
                    out[rel_s] = f.model_copy(update={"path": rel_s})
    return list(out.values())


def solution_call(files: list[File], workdir: str) -> dict[str, Any]:
    """solution/ as one exec call: each file written to a copy of the folder (solve.sh's /solution/ paths
    pointed at it), then solve.sh run in the workdir, as Harbor's oracle runs it."""
    lines = [SOLUTION_MARK, "set -e", f"rm -rf {SOLUTION_COPY}", f"mkdir -p {SOLUTION_COPY}"]
    for f in sorted(files, key=lambda f: f.path):
        target = f"{SOLUTION_COPY}/{f.path}"
        lines.append(f"mkdir -p {shlex.quote(str(PurePosixPath(target).parent))}")
        lines.append(f"printf '%s' {base64.b64encode(f.data).decode()} | base64 -d > {shlex.quote(target)}")
    lines.append(f"grep -rlI /solution/ {SOLUTION_COPY} | xargs -r sed -i 's#/solution/#{SOLUTION_COPY}/#g'")
    lines.append(f"cd {shlex.quote(workdir)} && bash {SOLUTION_COPY}/solve.sh")
    return {"tool": "exec", "args": {"command": "\n".join(lines)}}


def solution_files(task: Task) -> list[File] | None:
    """The solution/ files a `solution_call` holds, or None when the task's solution is not one."""
    sol = task.solution or []
    if len(sol) != 1 or sol[0].tool != "exec" or not str(sol[0].args.get("command", "")).startswith(SOLUTION_MARK):
        return None
    pattern = re.compile(r"^printf '%s' (\S+) \| base64 -d > (\S+)$")
    files = []
    for line in sol[0].args["command"].splitlines():
        if m := pattern.match(line):
            path = shlex.split(m.group(2))[0].removeprefix(SOLUTION_COPY + "/")
            files.append(File.from_bytes(path, base64.b64decode(m.group(1)), executable=path.endswith(".sh")))
    return files


def load_task(folder: Path) -> Task:
    """One Harbor task folder, or TaskFormatError naming the file and field."""
    task_id = folder.name
    budget = Budget()
    toml_path = folder / TASK_TOML
    try:
        config = tomllib.loads(read_text(folder, TASK_TOML, limits=budget.limits))
    except tomllib.TOMLDecodeError as e:
        raise _refuse(toml_path, f"invalid TOML: {e}", task_id) from None
    for compose in ("docker-compose.yaml", "docker-compose.yml", "compose.yaml"):
        if lexists(folder, f"environment/{compose}"):
            raise _refuse(folder / "environment" / compose, "a docker-compose task (several containers) is not "
                          "supported: clawsdk runs one container per rollout", task_id)
    if config.get("steps") or lexists(folder, "steps"):
        raise _refuse(toml_path, "a multi-step task is not supported: clawsdk scores one agent turn", task_id,
                      "steps")
    verifier_cfg = config.get("verifier") or {}
    agent_cfg = config.get("agent") or {}
    env_cfg = config.get("environment") or {}
    for name, section in (("verifier", verifier_cfg), ("agent", agent_cfg), ("environment", env_cfg),
                          ("metadata", config.get("metadata") or {})):
        if not isinstance(section, dict):
            raise _refuse(toml_path, "must be a table", task_id, f"[{name}]")
    if verifier_cfg.get("environment_mode") == "separate" or verifier_cfg.get("environment"):
        raise _refuse(toml_path, "a separate verifier container is not supported: the verifier runs in the "
                      "agent's sandbox after its turn", task_id, "[verifier].environment_mode")
    if str(env_cfg.get("os", "linux")).lower() != "linux":
        raise _refuse(toml_path, f"{env_cfg['os']!r}: only linux tasks run here", task_id, "[environment].os")
    if (env_cfg.get("gpus") or 0) > 0 or env_cfg.get("tpu"):
        raise _refuse(toml_path, "the task needs GPUs (or a TPU), which clawsdk's sandboxes do not give", task_id,
                      "[environment].gpus")
    instruction = read_text(folder, INSTRUCTION, limits=budget.limits).strip()
    if not instruction:
        raise _refuse(folder / INSTRUCTION, "is empty: it is the instruction given to the agent", task_id)
    check_instruction(instruction, str(folder / INSTRUCTION), INSTRUCTION, task_id, budget.limits)
    if not lexists(folder, "tests/test.sh"):
        raise _refuse(folder / "tests", "no tests/test.sh: a Harbor task is scored by it", task_id)
    try:
        hidden = read_tree(folder, "tests", budget=budget)
        context = read_tree(folder, "environment", budget=budget) if lexists(folder, "environment") else []
        solution = read_tree(folder, "solution", budget=budget) if lexists(folder, "solution") else []
    except TaskFormatError as e:
        e.task_id = task_id
        raise
    except ValidationError as e:
        raise _refuse(folder, validation_message_of(e), task_id) from None
    hidden = [f.model_copy(update={"executable": True}) if f.path == "test.sh" else f for f in hidden]
    dockerfile = next((f for f in context if f.path == "Dockerfile"), None)
    context = [f for f in context if f.path != "Dockerfile"]
    if dockerfile is not None and dockerfile.text is None:
        raise _refuse(folder / "environment" / "Dockerfile", "not UTF-8 text", task_id)
    docker_text = dockerfile.text if dockerfile is not None else None
    if docker_text is None and env_cfg.get("docker_image"):
        docker_text = f"FROM {env_cfg['docker_image']}\n"  # a prebuilt image: built from, as it is
    workdir = env_cfg.get("workdir")
    if workdir is None and docker_text:
        found = [m.group(1) for m in map(_WORKDIR.match, docker_text.splitlines()) if m]
        workdir = str(PurePosixPath("/").joinpath(*found)) if found else None
    workdir = workdir or WORKDIR
    workspace = _copied_into_workdir(docker_text, context, workdir) if docker_text else []
    warnings: list[str] = []
    network = {"agent": _phase(agent_cfg, env_cfg, toml_path, "agent", task_id, warnings),
               "verifier": _phase(verifier_cfg, env_cfg, toml_path, "verifier", task_id, warnings)}
    for w in warnings:
        log.warning("%s (task %s): %s", toml_path, task_id, w)
    agent_timeout = _number(agent_cfg.get("timeout_sec"), toml_path, "[agent].timeout_sec", task_id)
    verifier_timeout = _number(verifier_cfg.get("timeout_sec"), toml_path, "[verifier].timeout_sec", task_id) \
        or 600.0
    memory = env_cfg.get("memory_mb")
    if memory is None and isinstance(env_cfg.get("memory"), str):
        memory = _size_mb(env_cfg["memory"], toml_path, "[environment].memory", task_id)
    meta = config.get("metadata") or {}
    package = config.get("task") or {}
    data: dict[str, Any] = {
        "id": task_id,
        "instruction": instruction,
        "category": str(meta["category"]) if meta.get("category") else None,
        "difficulty": str(meta["difficulty"]) if meta.get("difficulty") else None,
        "tags": [str(t) for t in (meta.get("tags") or package.get("keywords") or [])],
        "workspace": workspace,
        "hidden": hidden,
        "verifier": VerifierSpec.model_validate({"type": "harbor", "timeout_s": verifier_timeout}),
        "limits": {"verifier_timeout_s": verifier_timeout + 30,
                   **({"timeout_s": agent_timeout} if agent_timeout else {})},
        "network": network,
        "environment": {"dockerfile": docker_text, "context": context if dockerfile is not None else [],
                        "workdir": workdir, "tests_dir": TESTS_DIR, "logs_dir": LOGS_DIR,
                        **{k: env_cfg[k] for k in ("cpus", "storage_mb") if env_cfg.get(k) is not None},
                        **({"memory_mb": memory} if memory else {})},
        "metadata": {"harbor": {"schema_version": config.get("schema_version") or config.get("version"),
                                **({"task": package} if package else {}), "metadata": meta,
                                **({"warnings": warnings} if warnings else {})}},
        "provenance": {"source": "harbor", "path": str(folder)},
    }
    if solution:
        if not any(f.path == "solve.sh" for f in solution):
            raise _refuse(folder / "solution", "no solve.sh: Harbor's oracle runs solution/solve.sh", task_id)
        data["solution"] = [solution_call(solution, workdir)]
    ours = meta.get("clawsdk")
    if isinstance(ours, str):  # what a clawsdk task had that Harbor has no field for (written by export)
        try:
            extras = json.loads(ours)
        except json.JSONDecodeError as e:
            raise _refuse(toml_path, f"not JSON: {e}", task_id, "[metadata].clawsdk") from None
        if isinstance(extras.get("environment"), dict):  # the task's own Dockerfile, not the export's
            extras["environment"]["context"] = [f for f in context if not f.path.startswith(GENERATED + "/")] \
                if dockerfile is not None else []
        data.update(extras)
        data["metadata"]["harbor"]["metadata"] = {k: v for k, v in meta.items() if k != "clawsdk"}
    return validated_task(data, str(toml_path), task_id, id_field="id")


def _size_mb(value: str, where: Path, field: str, task_id: str) -> int:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([GMK])\s*", value.upper())
    if not m:
        raise _refuse(where, f"{value!r}: a size like '4G' or '512M'", task_id, field)
    return int(float(m.group(1)) * {"G": 1024, "M": 1, "K": 1 / 1024}[m.group(2)])


# ---- writing ---------------------------------------------------------------------------------------


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"{type(value).__name__} has no TOML form here")


def _toml(sections: dict[str, dict[str, Any]]) -> str:
    out = [f"schema_version = {_toml_value(SCHEMA_VERSION)}", ""]
    for name, body in sections.items():
        body = {k: v for k, v in body.items() if v is not None}
        if not body:
            continue
        out.append(f"[{name}]")
        out += [f"{k} = {_toml_value(v)}" for k, v in body.items()]
        out.append("")
    return "\n".join(out)


def _solve_sh(task: Task, workdir: str) -> list[File] | None:
    """solution/ for a task: its own files (a Harbor task's), or solve.sh written from tool calls of write and
    exec (others have no shell form: then there is no solution/, and the calls travel in [metadata])."""
    own = solution_files(task)
    if own is not None:
        return own
    if not task.solution:
        return None
    lines = ["#!/bin/bash", "set -e", f"cd {shlex.quote(workdir)}"]
    for call in task.solution:
        if call.tool == "write" and isinstance(call.args.get("content"), str):
            path = str(call.args["path"])
            lines.append(f"mkdir -p {shlex.quote(str(PurePosixPath(path).parent))}")
            lines.append(f"printf '%s' {base64.b64encode(call.args['content'].encode()).decode()} | base64 -d > "
                         f"{shlex.quote(path)}")
        elif call.tool == "exec" and isinstance(call.args.get("command"), str):
            lines.append(call.args["command"])
        elif call.tool not in ("ls", "read", "glob", "grep"):
            return None
    return [File(path="solve.sh", text="\n".join(lines) + "\n", executable=True)]


def export_task(task: Task, folder: Path) -> None:
    """`task` as a Harbor task folder at `folder`; ValueError for a task Harbor cannot hold."""
    if task.verifier.type != "harbor":
        raise ValueError(f"task {task.id}: its verifier ({task.verifier.type}) has no Harbor form; Harbor scores "
                         "with tests/test.sh (a harbor verifier)")
    env = task.environment
    workdir = (env.workdir if env else None) or WORKDIR
    copied = {f.path for f in _copied_into_workdir(env.dockerfile, env.context, workdir)} \
        if env is not None and env.dockerfile else set()
    dockerfile, context = (env.dockerfile, list(env.context)) if env is not None and env.dockerfile else (None, [])
    loose = [f for f in task.workspace if f.path not in copied]
    if loose:  # workspace files the image does not put in the workdir: copied in by the Dockerfile
        if dockerfile is None:
            dockerfile = f"FROM {DEFAULT_BASE}\nWORKDIR {workdir}\n"
        context += [f.model_copy(update={"path": f"{GENERATED}/{f.path}"}) for f in loose]
        dockerfile = dockerfile.rstrip("\n") + f"\nCOPY {GENERATED}/ {workdir}/\n"
    solution = _solve_sh(task, workdir)
    # what Harbor has no field for, so that loading the folder again gives the same task (the same hash)
    # (the workspace is not among it: the Dockerfile copies it in, and reading the folder derives it again;
    # nor the build context, which is environment/ less what the export adds)
    again: dict[str, Any] = {"tools": task.tools, "limits": task.limits.model_dump(mode="json"),
                             "verifier": task.verifier.model_dump(mode="json"), "tags": task.tags,
                             "environment": env.model_dump(mode="json", exclude={"context"}) if env else None,
                             "network": task.network.model_dump(mode="json") if task.network else None,
                             "solution": [c.model_dump(mode="json") for c in task.solution] if task.solution else None}
    for key in ("tool_policy", "tool_config", "mcp_servers"):
        dumped = task.model_dump(mode="json").get(key)
        if dumped:
            again[key] = dumped
    net = task.network
    phase = {"none": "no-network", "loopback": "no-network", "allowlist": "allowlist"}
    sections: dict[str, dict[str, Any]] = {
        "metadata": {"category": task.category, "difficulty": task.difficulty, "tags": task.tags or None,
                     "clawsdk": json.dumps(again, ensure_ascii=False, sort_keys=True)},
        "verifier": {"timeout_sec": float(task.verifier.model_dump().get("timeout_s", task.limits.verifier_timeout_s)),
                     **({"network_mode": phase[net.verifier.mode],
                         "allowed_hosts": net.verifier.hosts or None} if net else {})},
        "agent": {"timeout_sec": float(task.limits.timeout_s),
                  **({"network_mode": phase[net.agent.mode], "allowed_hosts": net.agent.hosts or None} if net else {})},
        "environment": {"network_mode": "no-network", "workdir": workdir,
                        **({k: getattr(env, k) for k in ("cpus", "memory_mb", "storage_mb")
                            if env is not None and getattr(env, k, None) is not None})},
    }
    folder.mkdir(parents=True, exist_ok=True)
    (folder / TASK_TOML).write_text(_toml(sections))
    (folder / INSTRUCTION).write_text(task.instruction.rstrip("\n") + "\n")
    for sub, files in (("tests", task.hidden), ("environment", context), ("solution", solution or [])):
        for f in files:
            target = folder / sub / f.path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(f.data)
            target.chmod(0o755 if f.executable else 0o644)
    if dockerfile is not None:
        (folder / "environment").mkdir(exist_ok=True)
        (folder / "environment" / "Dockerfile").write_text(dockerfile)


class HarborSource:
    """A Harbor task folder, or a folder of them (a Harbor dataset)."""

    def detect(self, path: Path) -> bool:
        return is_task_folder(path) or (path.is_dir() and any(is_task_folder(p) for p in sorted(path.iterdir())[:50]))

    def load(self, path: Path) -> Iterator[Task | TaskFormatError]:
        if not path.is_dir():
            yield TaskFormatError(str(path), "a Harbor source is a task folder (task.toml, instruction.md) or a "
                                             "folder of them")
            return
        folders = [path] if is_task_folder(path) else [p for p in sorted(path.iterdir()) if is_task_folder(p)]
        if not folders:
            yield TaskFormatError(str(path), f"no Harbor task here (no folder with {TASK_TOML} and {INSTRUCTION})")
        for folder in folders:
            yield guarded(folder / TASK_TOML, functools.partial(load_task, folder))

    def export(self, tasks: Iterable[Task], dest: Path) -> tuple[int, list]:
        """Each task as a Harbor folder dest/TASK_ID; a task Harbor cannot hold is an error, not written."""
        n, errors = 0, []
        for task in tasks:
            try:
                export_task(task, dest / task.id)
                n += 1
            except ValueError as e:
                errors.append(TaskFormatError(str(task.provenance.get("path", task.id)), str(e), task_id=task.id))
        return n, errors


# ---- the verifier ----------------------------------------------------------------------------------


class HarborSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: str = "harbor"
    script: str = "test.sh"
    timeout_s: float = Field(600.0, gt=0)
    pass_threshold: float = Field(1.0, ge=0, le=1)
    untouched_score_max: float | None = Field(None, ge=0, le=1)
    checks: list = Field(default_factory=list)


def rewards_of(name: str, text: str) -> tuple[float, list[SubScore], str]:
    """(score, sub-scores, note) from reward.json or reward.txt as Harbor parses them; VerifierError when they
    hold no finite number (Harbor's VerifierOutputParseError). A value outside [0, 1] is clipped, and said."""
    if not text.strip():
        raise VerifierError(f"{name} is empty")
    if name == "reward.txt":
        value = read_score(text.strip())
        if value is None:
            raise VerifierError(f"reward.txt holds {text.strip()[:80]!r}, not a number")
        values, main = {"reward": value}, "reward"
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise VerifierError(f"reward.json is not JSON ({e.msg})") from None
        data = data if isinstance(data, dict) else {"reward": data}
        bad = [k for k, v in data.items() if isinstance(v, bool) or not isinstance(v, (int, float))
               or not math.isfinite(v)]
        if bad or not data:
            raise VerifierError(f"reward.json: {bad[0]!r} is not a finite number" if bad else "reward.json is {}")
        values, main = {str(k): float(v) for k, v in data.items()}, "reward"
    notes = [f"{k}={v:g} clipped to [0, 1]" for k, v in values.items() if not 0 <= v <= 1]
    clipped = {k: min(max(v, 0.0), 1.0) for k, v in values.items()}
    score = clipped[main] if main in clipped else sum(clipped.values()) / len(clipped)
    subs = [SubScore(name=k[:200], score=v, detail=f"{name}: {values[k]:g}") for k, v in clipped.items() if k != main]
    how = f"{name}: reward {score:g}" if main in clipped else f"{name}: no 'reward', the mean of {len(clipped)} values"
    return score, subs, "; ".join([how, *notes])


class HarborVerifier(Verifier):
    """Runs tests/test.sh after the agent's turn and reads /logs/verifier/reward.json or reward.txt."""

    name = "harbor"

    def __init__(self, spec: VerifierSpec):
        self.spec = spec_as(HarborSpec, spec)

    def check_task(self, task: Task) -> None:
        if not any(f.path == self.spec.script for f in task.hidden):
            raise ValueError(f"verifier.script: {self.spec.script!r} is not among the task's hidden files (a Harbor "
                             f"task's tests/)")
        if task.environment is None or not task.environment.logs_dir:
            raise ValueError("environment.logs_dir: a harbor verifier reads the reward test.sh writes there "
                             "(Harbor's /logs)")

    async def verify(self, ctx: VerifyContext) -> Verdict:
        task, spec = ctx.task, self.spec
        result, found = await self._run_tests(ctx.sandbox, ctx.hidden_path, task, spec.timeout_s, ctx)
        unreadable = None
        if found is not None:
            try:
                rewards_of(*found)
            except VerifierError as e:
                unreadable = e
        if result.timed_out or found is None or unreadable is not None:
            # Harbor reads a missing reward as 0; here it is unscored unless the tests, run on the task as it
            # stood before the agent, finish and write one: then what the agent left kept them from it (a
            # json.py that ends the check, files that make the tests hang), and that is its failure, a 0
            judged = await self._on_untouched(ctx)
            if judged is not None:
                what = ("did not finish" if result.timed_out else "wrote no reward" if found is None
                        else f"wrote a reward that cannot be read ({unreadable})")
                why = (f"scored 0: tests/{spec.script} {what} on the agent's files; on the task's untouched files it "
                       f"{judged}")
                await ctx.recorder.record(VerifierScore(check=spec.script, score=0.0, detail=why))
                return Verdict(verifier=self.name, score=0.0, passed=False, detail=why[:4000])
        if result.timed_out:
            raise VerifierTimeout(f"task {task.id}: tests/{spec.script} did not finish within {spec.timeout_s:g} s")
        if unreadable is not None:
            raise unreadable
        if found is None:
            err = (result.stderr.strip().splitlines() or [""])[-1][:300]
            logs = task.environment.logs_dir if task.environment else LOGS_DIR
            raise VerifierError(f"task {task.id}: tests/{spec.script} wrote no reward ({logs}/verifier/reward.json "
                                f"or reward.txt; it exited {result.exit_code}" + (f": {err}" if err else "") + ")")
        score, subs, note = rewards_of(*found)
        await ctx.recorder.record(VerifierScore(check=found[0], score=score, detail=note))
        return Verdict(verifier=self.name, score=score, passed=score >= spec.pass_threshold - 1e-9, subscores=subs,
                       detail=f"{note}; test.sh exited {result.exit_code}"[:4000])

    async def _run_tests(self, sandbox: Any, hidden_path: str | None, task: Task, timeout: float,
                         ctx: VerifyContext | None = None) -> tuple[Any, tuple[str, str] | None]:
        """Empty the logs folder, run test.sh, read its reward: (the run, (file name, text) or None)."""
        logs = task.environment.logs_dir if task.environment else LOGS_DIR
        verifier_dir = f"{logs}/verifier"
        # the agent may have written a reward where test.sh writes its own: the folder is emptied first (its
        # processes were stopped when its turn ended), so only test.sh's reward is read
        reset = await sandbox.exec(["sh", "-c", 'find "$1" -mindepth 1 -delete && mkdir -p "$1/verifier" "$1/agent"'
                                    ' && ! ls -A "$1/verifier" | grep -q .', "sh", logs], timeout=60)
        if reset.exit_code != 0:
            raise VerifierError(f"task {task.id}: could not empty {logs} before the tests ran "
                                f"({reset.stderr.strip()[-300:]})")
        script = f"{hidden_path.rstrip('/')}/{self.spec.script}" if hidden_path else self.spec.script
        result = await sandbox.exec(["bash", script], timeout=timeout)
        if ctx is not None:
            await ctx.recorder.record(SandboxExec.of(f"bash {script}", result))
        if result.timed_out:
            return result, None
        for name in ("reward.json", "reward.txt"):  # Harbor reads reward.json first
            r = await sandbox.exec(["sh", "-c", 'test -f "$1" && head -c 65536 -- "$1"', "sh",
                                    f"{verifier_dir}/{name}"], timeout=30)
            if r.exit_code == 0:
                return result, (name, r.stdout)
        return result, None

    async def _on_untouched(self, ctx: VerifyContext) -> str | None:
        """How the tests ended on the task as it stood before the agent, in a fresh sandbox of the same kind,
        within the verification's time left ("finished and wrote a reward"), or None when they did not, or could
        not be run (no time left, no second sandbox)."""
        left = (ctx.deadline - anyio.current_time()) if ctx.deadline is not None else self.spec.timeout_s
        if left < 5:
            return None
        try:
            # every backend takes its SandboxConfig (the abstract Sandbox declares no constructor)
            fresh = type(ctx.sandbox)(getattr(ctx.sandbox, "config", None))  # type: ignore[call-arg]
        except Exception:  # a backend that cannot be made again here: no judgment
            return None
        try:
            with anyio.move_on_after(left - 2):
                await fresh.start(ctx.task)
                await fresh.end_turn()
                await fresh.start_scoring()
                hidden = await fresh.inject_hidden(ctx.task.hidden)
                result, found = await self._run_tests(fresh, hidden, ctx.task, min(self.spec.timeout_s, left - 4))
                if not result.timed_out and found is not None:
                    score = rewards_of(*found)[0]  # VerifierError: no judgment
                    return f"did, in a fresh sandbox (reward {score:g})"
        except Exception as e:  # no judgment: the ending stays unscored
            log.info("task %s: the tests could not run on its untouched files: %s", ctx.task.id, e)
        finally:
            with anyio.CancelScope(shield=True):
                await fresh.close()
        return None


@hookimpl
def register_task_sources(register):
    register("harbor", HarborSource())


@hookimpl
def register_verifiers(register):
    register("harbor", HarborVerifier)
