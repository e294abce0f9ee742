"""Helpers for the format tests: the ClawGym reference run, workspace edits, a local judge server."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from clawsdk.hookspecs import hookimpl
from clawsdk.models.base import ChatResponse, Model
from tests.conftest import FIXTURES, SHARED_DATA

# our own tasks in each format (tests/fixtures/README.md), and the real samples for the extras
CLAWGYM = FIXTURES / "clawgym"
SYN_TASKS = FIXTURES / "clawgym-jsonl" / "syn_task.jsonl"
PINCHBENCH = FIXTURES / "pinchbench"
SAMPLE_CLAWGYM = SHARED_DATA / "clawgym-train-sample"
SAMPLE_PINCHBENCH = SHARED_DATA / "pinchbench-sample"
MOUNT = Path("/root/.openclaw/workspace")

_CONTENT = {
    ".json": '{"status": "ok", "items": [], "count": 0}\n',
    ".jsonl": '{"id": 1, "value": "a"}\n',
    ".csv": "id,name,value\n1,a,2\n",
    ".md": "# Report\n\n## Summary\n\nDone.\n",
    ".txt": "done\n",
    ".py": 'print("hello")\n',
    ".sh": "#!/usr/bin/env bash\necho ok\n",
    ".yaml": "key: value\n",
    ".yml": "key: value\n",
    ".html": "<html><body>ok</body></html>\n",
    ".xml": "<root/>\n",
}
_PATH = re.compile(r"(?<![\w/.:-])((?:[\w-]+/)*[\w-]+(?:\.[\w-]+)*(\.(?:json|jsonl|csv|md|txt|py|sh|yaml|yml|html|xml)))\b")


def expected_outputs(instruction: str) -> dict[str, str]:
    """Plausible contents for the output paths an instruction names (inputs left alone)."""
    out = {}
    for m in _PATH.finditer(instruction):
        path, ext = m.group(1), m.group(2)
        if path.startswith(("input/", "reward/")) or path.count("/") > 4:
            continue
        out[path] = _CONTENT[ext]
    return dict(sorted(out.items())[:12])


@contextlib.contextmanager
def openclaw_mount() -> Iterator[Path]:
    """/root/.openclaw/workspace for the reference run: exclusive, any earlier content put back after."""
    lock_path = Path(tempfile.gettempdir()) / "clawsdk-openclaw-mount.lock"
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        backup = None
        if MOUNT.exists():
            backup = MOUNT.with_name(f"workspace.clawsdk-backup-{os.getpid()}")
            MOUNT.rename(backup)
        created_parent = not MOUNT.parent.exists()
        try:
            yield MOUNT
        finally:
            shutil.rmtree(MOUNT, ignore_errors=True)
            if backup is not None:
                backup.rename(MOUNT)
            elif created_parent:
                shutil.rmtree(MOUNT.parent, ignore_errors=True)


def reference_score(task_dir: Path, files: dict[str, str]) -> str:
    """What the task's own reward.sh prints when run as its authors run it (workspace at the mount)."""
    shutil.rmtree(MOUNT, ignore_errors=True)
    MOUNT.mkdir(parents=True)
    shutil.copytree(task_dir / "input_files", MOUNT, dirs_exist_ok=True)
    for rel, text in files.items():
        (MOUNT / rel).parent.mkdir(parents=True, exist_ok=True)
        (MOUNT / rel).write_text(text)
    shutil.copytree(task_dir / "reward", MOUNT / "reward")
    for p in (MOUNT / "reward").iterdir():
        p.chmod(0o755)
    proc = subprocess.run(["bash", str(MOUNT / "reward" / "reward.sh")], cwd=MOUNT, capture_output=True,
                          text=True, timeout=120, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                                                       "HOME": "/root", "LANG": "C.UTF-8"})
    shutil.rmtree(MOUNT, ignore_errors=True)
    return proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else f"exit {proc.returncode}"


class JudgeServer:
    """A real OpenAI-compatible /v1/chat/completions server on 127.0.0.1 with scripted answers."""

    def __init__(self, answers: list[str], window: int | None = None):
        self.answers = list(answers)
        self.requests: list[dict] = []
        self.window = window  # tokens (4 characters each): past it, vLLM's HTTP 400
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(body)
                tokens = sum(len(m.get("content") or "") for m in body["messages"]) // 4
                if outer.window and tokens + (body.get("max_tokens") or 0) > outer.window:
                    data = json.dumps({"object": "error", "code": 400, "type": "BadRequestError", "message": (
                        f"This model's maximum context length is {outer.window} tokens. However, your request "
                        f"has {tokens} input tokens. Please reduce the length of the input messages.")}).encode()
                    self.send_response(400)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                text = outer.answers.pop(0) if len(outer.answers) > 1 else outer.answers[0]
                data = json.dumps({"id": "x", "object": "chat.completion", "model": body.get("model"),
                                   "choices": [{"index": 0, "finish_reason": "stop",
                                                "message": {"role": "assistant", "content": text}}],
                                   "usage": {"prompt_tokens": 10, "completion_tokens": 5}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> JudgeServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


# ---- an in-process judge model, registered once through the models hook ------------------

JUDGE_STATE: dict = {"answers": ['{"scores": {}}'], "calls": []}


class ScriptedJudge(Model):
    """Answers from JUDGE_STATE["answers"] in turn (the last one repeats); records every prompt."""

    name = "scripted-judge"

    async def chat(self, messages, tools=None, **params):
        JUDGE_STATE["calls"].append(messages)
        answers = JUDGE_STATE["answers"]
        text = answers.pop(0) if len(answers) > 1 else answers[0]
        return ChatResponse(message={"role": "assistant", "content": text})


class _JudgePlugin:
    @hookimpl
    def register_models(self, register):
        register("scripted-judge", lambda name=None, **options: ScriptedJudge())


def use_scripted_judge(*answers: str) -> dict:
    from clawsdk.plugins import get_registry, register_plugin

    if "scripted-judge" not in get_registry().names("models"):
        register_plugin(_JudgePlugin(), "tests-scripted-judge")
    JUDGE_STATE["answers"] = list(answers)
    JUDGE_STATE["calls"] = []
    return JUDGE_STATE
