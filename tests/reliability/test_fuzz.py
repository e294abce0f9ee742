"""Hostile input: property-based fuzzing of the task parser and of tool paths and contents."""

import os
from pathlib import Path

import anyio
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clawsdk import TaskFormatError, load_task
from clawsdk.errors import PathEscapeError
from clawsdk.sandbox.base import SandboxConfig
from clawsdk.sandbox.paths import normalize_relative
from clawsdk.tasks.model import Task
from clawsdk_plugins.sandbox_local import LocalSandbox

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=30))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                        st.dictionaries(st.text(max_size=12), inner, max_size=4)),
                      max_leaves=12)
field_names = st.sampled_from(["id", "instruction", "category", "verifier", "limits", "tools", "solution",
                               "schema_version", "tags", "difficulty", "workspace", "bogus"])


@FUZZ
@given(spec=st.dictionaries(field_names, values, max_size=8))
def test_any_task_yaml_loads_or_gives_a_task_format_error(tmp_path_factory, spec):
    folder = tmp_path_factory.mktemp("fuzz") / "t"
    folder.mkdir()
    (folder / "task.yaml").write_text(yaml.safe_dump(spec))
    try:
        task = load_task(folder)
    except TaskFormatError as e:
        assert str(e).startswith(str(folder)) and e.message
    else:
        assert isinstance(task, Task) and task.instruction


@FUZZ
@given(raw=st.binary(max_size=300))
def test_arbitrary_bytes_as_task_yaml_never_crash_the_loader(tmp_path_factory, raw):
    folder = tmp_path_factory.mktemp("raw") / "t"
    folder.mkdir()
    (folder / "task.yaml").write_bytes(raw)
    try:
        load_task(folder)
    except TaskFormatError:
        pass


path_text = st.one_of(
    st.text(max_size=40),
    st.lists(st.sampled_from(["..", ".", "a", "b", "/", "//", "\x00", "~", "etc", "passwd", "link", "loop"]),
             max_size=8).map("/".join),
    st.text(alphabet="ab/.", min_size=200, max_size=400),
)


@FUZZ
@given(path=path_text)
def test_normalized_paths_never_leave_the_workspace(path):
    try:
        rel = normalize_relative(path)
    except PathEscapeError:
        return
    assert not rel.startswith("/") and ".." not in Path(rel).parts and "\x00" not in rel


@FUZZ
@given(path=path_text, data=st.binary(max_size=64))
def test_sandbox_file_ops_with_hostile_paths_stay_inside(tmp_path_factory, path, data):
    outside = tmp_path_factory.mktemp("outside")
    (outside / "keep.txt").write_text("untouched")

    async def main():
        sb = LocalSandbox(SandboxConfig())
        await sb.start(Task(id="f", instruction="x"))
        os.symlink(outside, os.path.join(sb.workspace, "link"))
        os.symlink("loop", os.path.join(sb.workspace, "loop"))
        try:
            for op in (sb.write(path, data), sb.read(path), sb.list(path, recursive=True)):
                try:
                    await op
                except (PathEscapeError, OSError, ValueError):
                    pass
        finally:
            await sb.close()

    anyio.run(main)
    assert sorted(p.name for p in outside.iterdir()) == ["keep.txt"]
    assert (outside / "keep.txt").read_text() == "untouched"
