"""A task's own image for the docker sandbox: its environment/Dockerfile, built once per content.

There is no image registry here: a Dockerfile builds only `FROM` an image this engine already has (the
sandbox image `clawsdk sandbox build-image` makes, or one built from it). One that names another is refused
with what to do, and nothing is pulled. RUN steps build without a network. The image is tagged
`clawsdk-task:DIGEST`, DIGEST a hash of the Dockerfile, its build context and the ids of the images it
builds from, so a second build of the same task is a lookup, and a rebuilt base makes a new image.
"""

from __future__ import annotations

import hashlib
import io
import re
import tarfile
import threading
from typing import Any

from clawsdk.errors import SandboxError
from clawsdk.tasks.model import Task

REPO = "clawsdk-task"
LABEL = "org.clawsdk.task-image"
_FROM = re.compile(r"^\s*FROM\s+(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?\s*$", re.I | re.M)
_lock = threading.Lock()


def bases(dockerfile: str) -> list[str]:
    """The images a Dockerfile builds from (not its own earlier stages)."""
    stages: set[str] = set()
    out = []
    for image, stage in _FROM.findall(dockerfile):
        if image.lower() not in stages and image.lower() != "scratch":
            out.append(image)
        if stage:
            stages.add(stage.lower())
    return out


def task_image(client: Any, task: Task, sandbox_image: str) -> str:
    """The tag of `task`'s image, built if no image of that content exists; SandboxError saying why not."""
    import docker

    env = task.environment
    assert env is not None and env.dockerfile
    ids = []
    for base in bases(env.dockerfile) or ["scratch"]:
        if base == "scratch":
            continue
        try:
            ids.append(client.images.get(base).id)
        except docker.errors.ImageNotFound:
            raise SandboxError(
                f"task {task.id}: its environment/Dockerfile builds FROM {base}, which this docker engine does "
                f"not have and cannot pull (there is no image registry here): build it FROM {sandbox_image} "
                "(`clawsdk sandbox build-image`), or load that image into the engine first") from None
    digest = hashlib.sha256()
    for part in (env.dockerfile.encode(), *ids, *(f"{f.path}\0{f.executable}".encode() + f.data
                                                  for f in env.context)):
        digest.update(hashlib.sha256(part if isinstance(part, bytes) else part.encode()).digest())
    tag = f"{REPO}:{digest.hexdigest()[:16]}"
    with _lock:  # one build per tag in this process; the engine serialises the rest
        try:
            client.images.get(tag)
            return tag
        except docker.errors.ImageNotFound:
            pass
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for name, data, mode in [("Dockerfile", env.dockerfile.encode(), 0o644),
                                     *((f.path, f.data, 0o755 if f.executable else 0o644) for f in env.context)]:
                info = tarfile.TarInfo(name)
                info.size, info.mode = len(data), mode
                tar.addfile(info, io.BytesIO(data))
        buf.seek(0)
        try:
            client.images.build(fileobj=buf, custom_context=True, tag=tag, pull=False, rm=True, forcerm=True,
                                network_mode="none", labels={LABEL: task.id}, timeout=600)
        except docker.errors.BuildError as e:
            tail = " ".join(str(x.get("stream") or x.get("error") or "").strip() for x in list(e.build_log)[-4:])
            raise SandboxError(f"task {task.id}: its environment/Dockerfile did not build: {e.msg} "
                               f"({tail[-400:]})") from None
        except docker.errors.APIError as e:
            raise SandboxError(f"task {task.id}: its environment/Dockerfile did not build: "
                               f"{e.explanation or e}") from None
    return tag
