"""A walk through the workspace holds a few descriptors, however deep the folders its links lead through.

`Tree._walk` kept one open descriptor per folder it walked. An agent chained 12 links of 2,040 components
each down a chain of 24,480 folders and left 1,500 links into it: `end_turn`'s scrub judged each link
in a worker thread, took the runner to its descriptor limit again and again for its 30 s, and meanwhile
every other rollout's next command failed to start (EMFILE) and ended `sandbox_error`.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from clawsdk.errors import PathEscapeError
from clawsdk.sandbox import safefs
from clawsdk.sandbox.safefs import Tree


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def deep_chain(w: Path, levels: int, links: int) -> None:
    """`c/` then `links` runs of `levels` folders named `a`, each run's top holding `n -> a/a/.../a/n`
    (down to the next run's top), the last run's bottom a file `n`: `c/n` resolves `levels * links` deep."""
    (w / "c").mkdir(parents=True)
    fd = os.open(w / "c", os.O_RDONLY | os.O_DIRECTORY)
    tops = [fd]
    for _ in range(links):
        for _ in range(levels):
            os.mkdir("a", dir_fd=fd)
            sub = os.open("a", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            if fd not in tops:
                os.close(fd)
            fd = sub
        tops.append(fd)
    for top in tops[:-1]:
        os.symlink("a/" * levels + "n", "n", dir_fd=top)
    last = os.open("n", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=tops[-1])
    os.write(last, b"bottom\n")
    os.close(last)
    for top in tops:
        os.close(top)


def test_the_scrub_holds_a_bounded_number_of_descriptors_through_deep_links(tmp_path, monkeypatch):
    w = tmp_path / "w"
    deep_chain(w, levels=300, links=3)  # 900 folders deep: the old walk held 900 descriptors per link
    for k in range(5):
        os.symlink("c/n", w / f"t{k}")
    os.symlink("/etc/passwd", w / "out")
    baseline, peak = open_descriptors(), [0]
    real_open = os.open

    def counting_open(*args, **kwargs):
        fd = real_open(*args, **kwargs)
        peak[0] = max(peak[0], open_descriptors() - 1)  # listing /proc/self/fd holds one itself
        return fd

    monkeypatch.setattr(os, "open", counting_open)
    # no time limit here: this counts descriptors, and a loaded machine (the counting open lists
    # /proc/self/fd at each of thousands of opens) ran past the default 30 s and moved the chain aside
    removed = Tree(w, aliases=(str(w),)).scrub(str(tmp_path / "aside"), budget_s=600)
    monkeypatch.undo()
    assert removed == ["out"]  # the five links lead inside: kept
    assert peak[0] - baseline <= 32, peak[0] - baseline  # KEEP_OPEN and a few; the old walk: 900
    assert open_descriptors() == baseline
    assert Tree(w, aliases=(str(w),)).read("t0") == b"bottom\n"


def test_dotdot_past_the_kept_descriptors_walks_down_again_and_never_above_the_root(tmp_path):
    """A path's own `..` is undone by its text; a link's target is walked as the folders hold it."""
    w = tmp_path / "w"
    w.joinpath(*["a"] * 40).mkdir(parents=True)
    w.joinpath(*["a"] * 10, "f.txt").write_text("ten\n")
    (w / "top.txt").write_text("top\n")
    os.symlink("a/" * 40 + "../" * 30 + "f.txt", w / "ten")
    os.symlink("a/" * 40 + "../" * 40 + "top.txt", w / "back")
    os.symlink("a/" * 40 + "../" * 39, w / "first")
    os.symlink("a/" * 40 + "../" * 41 + "w/top.txt", w / "above")
    os.symlink("a/" * 40 + "../" * 20 + "made/new.txt", w / "made-link")
    tree = Tree(w, aliases=(str(w),))
    baseline = open_descriptors()
    assert tree.read("ten") == b"ten\n"
    assert tree.read("back") == b"top\n"
    assert tree.resolve_dir("first") == "a"
    with pytest.raises(PathEscapeError, match="leads outside"):
        tree.read("above")
    tree.write("made-link", b"new\n")
    assert w.joinpath(*["a"] * 20, "made", "new.txt").read_text() == "new\n"
    assert open_descriptors() == baseline
    assert tree.scrub(str(tmp_path / "aside")) == ["above"]


def test_a_folder_swapped_for_a_link_before_the_walk_comes_back_is_refused(tmp_path, monkeypatch):
    """The walk down again from the root takes no link: a folder on the way that became a symlink (to `/`,
    say) between the first walk and the second makes the call fail, never leave the root."""
    w = tmp_path / "w"
    w.joinpath(*["a"] * 30).mkdir(parents=True)
    os.symlink("a/" * 30 + "../" * 25, w / "up")
    tree = Tree(w, aliases=(str(w),))
    real_up = safefs._Descent.up

    def swap_then_up(self):
        if len(self.names) == 30:  # at the deepest folder: swap a/a for a link to /
            os.rename(w / "a" / "a", tmp_path / "moved")
            os.symlink("/", w / "a" / "a")
        real_up(self)

    monkeypatch.setattr(safefs._Descent, "up", swap_then_up)
    with pytest.raises(PathEscapeError, match="keeps changing"):
        tree.resolve_dir("up")


def test_a_walk_past_its_folder_budget_is_refused_and_the_scrub_removes_such_a_link(tmp_path, monkeypatch):
    w = tmp_path / "w"
    deep_chain(w, levels=30, links=2)
    os.symlink("c/n", w / "t")
    monkeypatch.setattr(safefs, "MAX_OPENS", 50)
    tree = Tree(w, aliases=(str(w),))
    with pytest.raises(PathEscapeError, match="more than 50 folders"):
        tree.read("t")
    assert "t" in tree.scrub(str(tmp_path / "aside"))
