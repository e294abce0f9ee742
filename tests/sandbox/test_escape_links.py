"""What an agent can plant in its workspace for the host-side file tools to trip on: symlinks (last
component, middle, dangling, absolute to the workspace), hardlinks, fifos, device nodes, bind mounts.

Links that stay inside the workspace keep working; everything else is refused with the path
named, and never reads, writes, blocks on or re-owns anything on the host.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from pathlib import Path

import anyio
import pytest
from sandbox_backends import skip_unless_available

from clawsdk.errors import PathEscapeError
from clawsdk.plugins import get_registry
from clawsdk.sandbox.base import SandboxConfig
from clawsdk.sandbox.safefs import Tree
from clawsdk.tasks.model import File, Task

BACKENDS = ["local", "bwrap", "docker"]
TASK = Task(id="links", instruction="plant links", workspace=[File(path="sub/inner.txt", text="inner\n")])


def run_in(backend: str, body, timeout: float = 120):
    skip_unless_available(backend)
    sb = get_registry().get("sandboxes", backend)(SandboxConfig())

    async def main():
        try:
            with anyio.fail_after(timeout):
                await sb.start(TASK)
                return await body(sb)
        finally:
            with anyio.CancelScope(shield=True):
                await sb.close()

    return anyio.run(main)


@pytest.fixture
def host_file():
    folder = Path("/tmp") / f"clawsdk-links-{secrets.token_hex(4)}"
    folder.mkdir(mode=0o777)
    folder.chmod(0o777)
    f = folder / "host.txt"
    f.write_text("HOST-CONTENT\n")
    f.chmod(0o666)
    yield f
    for p in folder.iterdir():
        p.unlink()
    folder.rmdir()


@pytest.mark.parametrize("backend", BACKENDS)
def test_symlinks_inside_work_and_out_are_refused(backend, host_file):
    async def body(sb):
        ws = sb.workspace_path
        r = await sb.exec(f"ln -s sub/inner.txt rel && ln -s {ws}/sub abs && ln -s sub/new.txt dangling_in && "
                          f"ln -s {host_file} last && ln -s {host_file.parent} mid && ln -s {host_file.parent}/new "
                          f"dangling_out && ln -s ../../.. up && ln -s loop loop && echo planted")
        assert r.stdout.strip() == "planted", r.stderr
        # inside the workspace: followed, relative or absolute (as the sandbox names its workspace)
        assert await sb.read("rel") == b"inner\n"
        assert await sb.read("abs/inner.txt") == b"inner\n"
        await sb.write("dangling_in", b"made\n")
        assert await sb.read("sub/new.txt") == b"made\n"
        await sb.write("rel", b"through\n")
        assert (await sb.exec("cat sub/inner.txt")).stdout == "through\n", "a write replaced the link itself"
        # out of it: refused, naming the path
        for path in ("last", f"mid/{host_file.name}", "up/etc/hostname", "loop"):
            with pytest.raises(PathEscapeError, match=path.split("/")[0]):
                await sb.read(path)
        for path in ("last", f"mid/{host_file.name}", "dangling_out", "mid/created.txt"):
            with pytest.raises(PathEscapeError):
                await sb.write(path, b"PWNED\n")
        with pytest.raises(PathEscapeError):
            await sb.list("mid")
        assert host_file.read_text() == "HOST-CONTENT\n"
        assert sorted(p.name for p in host_file.parent.iterdir()) == ["host.txt"]
        # a listing shows links as links, never what they lead to
        names = {e.path: e.is_dir for e in await sb.list(".", recursive=True)}
        assert names["mid"] is False and "mid/host.txt" not in names

    run_in(backend, body)


@pytest.mark.parametrize("backend", BACKENDS)
def test_fifos_and_devices_are_refused_without_blocking(backend):
    async def body(sb):
        r = await sb.exec("mkfifo pipe && echo ok; mknod dev c 1 3 2>/dev/null; true")
        assert r.stdout.strip() == "ok"
        with anyio.fail_after(10):  # a blocking open would hang here
            with pytest.raises(OSError, match="pipe is not a regular file"):
                await sb.read("pipe")
            with pytest.raises(OSError, match="pipe"):
                await sb.write("pipe", b"x")
            for op in (sb.read("pipe/x"), sb.list("pipe"), sb.write("pipe/x", b"x")):
                with pytest.raises(NotADirectoryError, match="pipe"):
                    await op
        if backend == "local" and os.geteuid() == 0:  # only the unconfined side can make a device node
            os.mknod(sb.workspace / "null", stat.S_IFCHR | 0o666, os.makedev(1, 3))
        for name in ("dev", "null"):
            if (await sb.exec(f"test -c {name} && echo c")).stdout.strip() == "c":
                with pytest.raises(OSError, match="not a regular file"):
                    await sb.read(name)

    run_in(backend, body)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_hardlinked_name_never_modifies_the_host_file(backend, host_file):
    async def body(sb):
        # the agent cannot link to the host from inside an isolating sandbox (other mounts: EXDEV)...
        r = await sb.exec(f"ln {host_file} hl 2>&1; ln /etc/hostname hl2 2>&1; ls")
        if backend != "local":
            assert "hl" not in r.stdout.split(), r.stdout
        # ...and where a link exists (local, or planted from the host), a write replaces the name only
        try:
            os.link(host_file, sb.workspace / "planted")
        except OSError as e:
            # an isolating sandbox's workspace is a tmpfs of its own as root: no hardlink joins it to the host
            assert backend != "local" and e.errno == errno.EXDEV, e
            return
        await sb.write("planted", b"PWNED\n")
        assert host_file.read_text() == "HOST-CONTENT\n", "a write through a hardlink changed a host file"
        assert await sb.read("planted") == b"PWNED\n"
        assert os.stat(sb.workspace / "planted").st_ino != os.stat(host_file).st_ino

    run_in(backend, body)


@pytest.mark.parametrize("backend", ["bwrap", "docker"])
def test_a_bind_mount_made_inside_is_not_the_hosts(backend, host_file):
    async def body(sb):
        # a user namespace of its own may let the command mount; that mount is in its namespace only
        await sb.exec("mkdir -p d; (unshare -rm sh -c 'mount --bind / d && sleep 20' &) ; sleep 1; true", timeout=30)
        with pytest.raises((FileNotFoundError, PathEscapeError)):
            await sb.read(f"d/{str(host_file).lstrip('/')}")
        await sb.write(f"d/{str(host_file.parent).lstrip('/')}/bound.txt", b"PWNED\n")
        assert not (host_file.parent / "bound.txt").exists()

    run_in(backend, body)


def test_created_files_belong_to_the_owner_and_no_parent_is_reowned(tmp_path):
    ws = tmp_path / "ws"
    (ws / "given").mkdir(parents=True)
    os.chown(ws / "given", 0, 0)
    tree = Tree(ws, owner=4321) if os.geteuid() == 0 else pytest.skip("giving files away needs root")
    tree.write("given/new/deeper/f.txt", b"x")
    assert os.stat(ws / "given").st_uid == 0, "an existing parent was re-owned"
    for p in ("given/new", "given/new/deeper", "given/new/deeper/f.txt"):
        assert os.stat(ws / p).st_uid == 4321, p
    assert os.stat(ws).st_uid == os.getuid()


def test_errors_keep_the_contract(tmp_path):
    tree = Tree(tmp_path)
    (tmp_path / "folder").mkdir()
    (tmp_path / "file").write_text("x")
    with pytest.raises(FileNotFoundError, match=r"missing.txt"):
        tree.read("missing.txt")
    with pytest.raises(IsADirectoryError, match="folder"):
        tree.read("folder")
    with pytest.raises(IsADirectoryError, match="folder"):
        tree.write("folder", b"x")
    with pytest.raises(NotADirectoryError, match="file"):
        tree.list("file")
    with pytest.raises(NotADirectoryError, match="file/x"):
        tree.write("file/x", b"x")
    with pytest.raises(PathEscapeError):
        tree.read("../x")
    assert tree.move_aside("file").startswith("file.agent-")
    assert tree.move_aside("file") is None


def test_scrub_out_of_time_removes_every_link_and_moves_unwalked_folders_out(tmp_path):
    """Thousands of slow links ran the in-sandbox scan past its 60 s and the links it had not reached
    stayed. Past its budget, the host's scrub removes every link it has not judged and moves every
    folder it has not walked out of the workspace."""
    from clawsdk.sandbox.safefs import Tree

    w = tmp_path / "w"
    (w / "sub" / "deeper").mkdir(parents=True)
    (w / "keep.txt").write_text("k")
    (w / "sub" / "deeper" / "f.txt").write_text("f")
    os.symlink("keep.txt", w / "inside")
    os.symlink("/etc/passwd", w / "sub" / "out")
    removed = Tree(w, aliases=(str(w),)).scrub(str(tmp_path / "aside"), budget_s=0)
    assert removed == ["inside", "sub/ (not walked in time)"]
    assert sorted(p.name for p in w.iterdir()) == ["keep.txt"]
    [moved] = (tmp_path / "aside").iterdir()
    assert (moved / "deeper" / "f.txt").read_text() == "f"
    assert Tree(w, aliases=(str(w),)).scrub(str(tmp_path / "aside")) == []


def test_scrub_judges_a_link_by_the_names_the_folders_hold(tmp_path):
    """A backslash is part of a name, not a separator: `a\\b/answer.txt` was judged as `a/b/answer.txt`,
    missing, so taken for a dangling link inside, and kept (1.0 on bwrap and docker for the hidden answer
    through it). A dangling link that climbs `..` is removed too: it leaves once a verifier makes `d`."""
    from clawsdk.sandbox.safefs import Tree

    w = tmp_path / "w"
    (w / "a\\b").mkdir(parents=True)
    os.symlink("/clawsdk/hidden/expected.txt", w / "a\\b" / "answer.txt")
    os.symlink("d/../../../etc/passwd", w / "later")
    os.symlink("d/inside.txt", w / "dangling-inside")
    removed = Tree(w, aliases=(str(w),)).scrub(str(tmp_path / "aside"))
    assert removed == ["a\\b/answer.txt", "later"]
    assert os.path.islink(w / "dangling-inside")

