"""Hostile input: property-based fuzzing of the task parser and of tool paths and contents, and a seeded
mutator over every format's loader and `tasks validate` (tests/reliability/fuzz_mutator.py)."""

import json
import os
import random
import shutil
import time
from pathlib import Path

import anyio
import pytest
import yaml
from clawsdk_plugins.sandboxes.local import LocalSandbox
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clawsdk import TaskFormatError, load_task
from clawsdk.errors import PathEscapeError
from clawsdk.plugins import get_registry
from clawsdk.sandbox.base import SandboxConfig
from clawsdk.tasks.model import Task
from clawsdk.tasks.paths import normalize_relative
from tests.reliability.fuzz_mutator import SECRET, SEEDS, Watch, mutate, spec_of

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


# ---- mutated task folders of every format ---------------------------------------------------

MUTATIONS = {"native": 400, "clawgym": 300, "clawgym-jsonl": 200, "pinchbench": 300}


@pytest.fixture(scope="module")
def watch(tmp_path_factory):
    outside = tmp_path_factory.mktemp("outside")
    (outside / "secret.txt").write_text(SECRET)
    (outside / "sub").mkdir()
    (outside / "sub" / "secret.txt").write_text(SECRET)
    long_ago = time.time() - 10 * 86400
    for p in (outside / "secret.txt", outside / "sub" / "secret.txt"):
        os.utime(p, (long_ago, time.time()))  # relatime then records any read of it
    get_registry()  # plugins imported before the watch starts
    w = Watch(outside)
    w.install()
    return w


@pytest.mark.slow
@pytest.mark.parametrize("fmt", list(MUTATIONS))
def test_mutated_tasks_load_or_are_refused_in_one_line(fmt, watch, tmp_path_factory):
    cases = tmp_path_factory.mktemp(f"fuzz-{fmt}")
    for i in range(MUTATIONS[fmt]):
        rng = random.Random(f"{fmt}-{i}")
        base = cases / f"case{i:04d}"
        base.mkdir()
        _, main = SEEDS[fmt](base)
        applied = mutate(rng, fmt, base, main, watch.outside) if i else []  # case 0: the seed itself loads
        watch.load(fmt, base, spec_of(fmt, base, main), f"{fmt} case {i} ({', '.join(applied)})")
        shutil.rmtree(base, ignore_errors=True)
    print(f"\n{fmt}: {MUTATIONS[fmt]} mutations\n" + watch.report(fmt))
    report = os.environ.get("CLAWSDK_FUZZ_REPORT")
    if report:
        Path(report).write_text(watch.report() + "\n")
    assert not watch.failures, "\n\n".join(watch.failures[:5])
    assert not watch.opened_outside, watch.opened_outside[:10]
    for p in (watch.outside / "secret.txt", watch.outside / "sub" / "secret.txt"):
        st = p.stat()
        assert st.st_atime < st.st_mtime, f"{p} was read during the fuzzing"
    assert watch.outcomes[(fmt, "loaded")] > 0
    assert sum(n for (f, what), n in watch.outcomes.items() if f == fmt and what.startswith("refused")) > 0


@pytest.mark.slow
def test_tasks_validate_over_a_folder_of_mutants_answers_without_a_traceback(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from clawsdk.cli import cli

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET)
    for fmt, n in (("native", 24), ("clawgym", 16)):
        root = tmp_path / fmt
        for i in range(n):
            base = root / f"case{i:02d}"
            base.mkdir(parents=True)
            _, main = SEEDS[fmt](base)
            if i:
                mutate(random.Random(f"validate-{fmt}-{i}"), fmt, base, main, outside)
        r = CliRunner().invoke(cli, ["tasks", "validate", f"{fmt}:{root}", "--sandbox", "local", "--json", "-c", "2"])
        assert r.exception is None or isinstance(r.exception, SystemExit), r.output
        assert "Traceback" not in r.output and r.exit_code in (0, 1), r.output
        out = json.loads(r.stdout)
        assert out["tasks"], f"no {fmt} mutant loaded"
        assert all(not e["message"].count("\n") for e in out["errors"])
        assert SECRET not in r.output
