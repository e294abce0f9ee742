"""Build the docker sandbox's image with no registry: debootstrap a Debian root, then `docker import`.

The image is named by a recipe hash (suite, packages), so a rebuild with the same recipe is
a no-op and a changed recipe makes a new image; `clawsdk-sandbox:latest` points at the
newest build. Nothing here talks to an image registry.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path

from clawsdk.errors import SandboxError
from clawsdk.sandbox.limits import DEFAULT_HIDDEN, DEFAULT_WORKSPACE

log = logging.getLogger(__name__)

IMAGE_REPO = "clawsdk-sandbox"
DEFAULT_IMAGE = f"{IMAGE_REPO}:latest"
RECIPE_VERSION = 1
#: What agents and verifier scripts commonly reach for, beyond Debian's minimal base.
DEFAULT_PACKAGES = (
    "python3", "ca-certificates", "procps", "jq", "file", "unzip", "zip", "xz-utils", "bzip2",
    "less", "diffutils", "bc", "sqlite3", "python3-yaml",
)
DEFAULT_MIRROR = "http://deb.debian.org/debian"
LABEL = "org.clawsdk.sandbox-image"


def host_suite() -> str:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("VERSION_CODENAME=") and line.split("=", 1)[1].strip():
                return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return "bookworm"


def recipe_hash(suite: str, packages: tuple[str, ...] | list[str], rootfs: str | None = None) -> str:
    body = f"v{RECIPE_VERSION}\n{suite}\n{','.join(sorted(packages))}\n{rootfs or ''}"
    return hashlib.sha256(body.encode()).hexdigest()[:12]


def _client():
    try:
        import docker
    except ImportError as e:
        raise SandboxError("the docker sandbox needs the docker SDK: pip install 'clawsdk[docker]'") from e
    try:
        client = docker.from_env(timeout=300)
        client.ping()
    except Exception as e:
        raise SandboxError(f"no Docker engine answers ({e}); start dockerd (as root: dockerd &) "
                           f"or set DOCKER_HOST") from e
    return client


def image_exists(client, name: str) -> bool:
    import docker

    try:
        client.images.get(name)
        return True
    except docker.errors.ImageNotFound:
        return False


def debootstrap(target: Path, suite: str, packages: list[str], mirror: str, say: Callable[[str], None]) -> None:
    exe = shutil.which("debootstrap")
    if exe is None:
        raise SandboxError("debootstrap not found: apt-get install debootstrap (or pass --rootfs DIR)")
    if os.geteuid() != 0:
        raise SandboxError("debootstrap needs root: run `sudo clawsdk sandbox build-image` (or pass --rootfs DIR)")
    argv = [exe, "--variant=minbase", f"--include={','.join(packages)}", suite, str(target), mirror]
    say(f"debootstrap {suite} from {mirror} (a few minutes) ...")
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        raise SandboxError(f"debootstrap failed (exit {done.returncode}):\n{tail}")


def _tag(client, image: str, tag: str) -> None:
    repo, _, name = tag.rpartition(":") if ":" in tag.rsplit("/", 1)[-1] else (tag, "", "latest")
    client.images.get(image).tag(repo, name)


def prepare_rootfs(root: Path, uid: int = 1000, gid: int = 1000, trim: bool = True) -> None:
    """Add the sandbox user and the folders the sandbox mounts over; trim apt's caches if `trim`."""
    for cache in ("var/cache/apt/archives", "var/lib/apt/lists") if trim else ():
        folder = root / cache
        if folder.is_dir():
            for p in folder.iterdir():
                if p.is_file() and p.name not in ("lock",):
                    p.unlink()
    passwd, group = root / "etc/passwd", root / "etc/group"
    if passwd.exists() and f":{uid}:" not in passwd.read_text():
        with passwd.open("a") as f:
            f.write(f"sandbox:x:{uid}:{gid}:sandbox:/root:/bin/bash\n")
    if group.exists() and f":{gid}:" not in group.read_text():
        with group.open("a") as f:
            f.write(f"sandbox:x:{gid}:\n")
    for path in (DEFAULT_WORKSPACE, DEFAULT_HIDDEN):
        (root / path.lstrip("/")).mkdir(parents=True, exist_ok=True)
    (root / "root").chmod(0o755)


def build_image(*, tag: str = DEFAULT_IMAGE, suite: str | None = None, packages: list[str] | None = None,
                mirror: str = DEFAULT_MIRROR, rootfs: str | None = None, force: bool = False,
                say: Callable[[str], None] = print) -> str:
    """Build (or find) the sandbox image; returns the image name it is known by."""
    suite = suite or host_suite()
    pkgs = list(packages or DEFAULT_PACKAGES)
    digest = recipe_hash(suite, pkgs, rootfs)
    versioned = f"{IMAGE_REPO}:{digest}"
    client = _client()
    if not force and image_exists(client, versioned):
        _tag(client, versioned, tag)
        say(f"image {versioned} is up to date (tagged {tag})")
        return versioned
    with tempfile.TemporaryDirectory(prefix="clawsdk-image-", dir=os.environ.get("CLAWSDK_IMAGE_TMP")) as tmp:
        if rootfs:
            root = Path(rootfs)
            if not (root / "usr/bin").is_dir():
                raise SandboxError(f"--rootfs {rootfs}: not a root file system (no usr/bin)")
            prepare_rootfs(root, trim=False)
        else:
            root = Path(tmp) / "rootfs"
            debootstrap(root, suite, pkgs, mirror, say)
            prepare_rootfs(root)
        tar_path = Path(tmp) / "rootfs.tar"
        say(f"packing {root} ...")
        with tarfile.open(tar_path, "w") as tar:
            tar.add(str(root), arcname=".")
        say(f"docker import as {versioned} ...")
        changes = [
            f"LABEL {LABEL}={digest}",
            "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "ENV LANG=C.UTF-8",
            f"WORKDIR {DEFAULT_WORKSPACE}",
            'CMD ["/bin/bash"]',
        ]
        client.api.import_image_from_file(str(tar_path), repository=IMAGE_REPO, tag=digest, changes=changes)
    image = client.images.get(versioned)
    _tag(client, versioned, tag)
    say(f"built {versioned} ({image.attrs.get('Size', 0) / 1e6:.0f} MB), tagged {tag}")
    return versioned
