"""Each conformance kit passes the built-ins and fails a deliberately broken implementation."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from clawsdk import load_tasks
from clawsdk.errors import TaskFormatError
from clawsdk.plugins import get_registry
from clawsdk.testing import Report, check_task_source, check_trainer, check_verifier
from clawsdk.train import TrainResult
from clawsdk.verify.verdict import Verdict, Verifier

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "tasks"


def _failed(report: Report) -> set[str]:
    return {f.check for f in report.failures}


def _broken_native_tree(root: Path) -> Path:
    (root / "good" / "workspace").mkdir(parents=True)
    (root / "good" / "task.yaml").write_text("id: good\ninstruction: Write done.txt.\n")
    (root / "bad").mkdir()
    (root / "bad" / "task.yaml").write_text("id: bad\ninstruction: [unclosed\n")
    return root


# ---- task sources ---------------------------------------------------------------------------------


def test_task_source_kit_passes_the_native_and_clawgym_sources(tmp_path):
    native = get_registry().get("task_sources", "native")
    check_task_source(native, EXAMPLES, broken=_broken_native_tree(tmp_path / "broken")).assert_ok()
    # clawgym's writer and reader agree: the kit round-trips what it can hold through export()
    cg = tmp_path / "cg"
    from clawsdk.tasks.convert import export_tasks
    from clawsdk.tasks.model import File, Task, VerifierSpec

    task = Task(id="cg-one", instruction="Write out.txt saying hi.", category="productivity",
                workspace=[File(path="in.txt", text="hi\n")],
                hidden=[File(path="reward/reward.sh", text="echo 1.0\n", executable=True)],
                verifier=VerifierSpec(type="clawgym"))
    n, errors = export_tasks([task], cg, "clawgym")
    assert (n, errors) == (1, [])
    report = check_task_source(get_registry().get("task_sources", "clawgym"), cg)
    report.assert_ok()
    assert "export writes what load reads back, unchanged" in {f.check for f in report.findings}


class RaisingSource:
    """Raises instead of yielding errors, and detects anything."""

    def detect(self, path):
        return True

    def load(self, path):
        if not path.exists():
            raise FileNotFoundError(path)
        yield from get_registry().get("task_sources", "native").load(path)


class UnstableSource:
    """A fresh id on every load (a rerun could never resume), and errors without the file."""

    n = 0

    def detect(self, path):
        return path.is_dir() and any(path.iterdir())

    def load(self, path):
        for t in get_registry().get("task_sources", "native").load(path):
            if isinstance(t, TaskFormatError):
                yield TaskFormatError("somewhere", t.message)
                continue
            UnstableSource.n += 1
            yield t.model_copy(update={"id": f"{t.id}-{UnstableSource.n}"})


def test_task_source_kit_fails_broken_sources(tmp_path):
    broken = _broken_native_tree(tmp_path / "broken")
    raising = check_task_source(RaisingSource(), EXAMPLES, broken=broken)
    assert {"detect(empty folder)", "detect(missing path)",
            "load(missing path) yields a TaskFormatError naming it"} <= _failed(raising)
    unstable = check_task_source(UnstableSource(), EXAMPLES, broken=broken)
    assert {"loading twice gives the same tasks",
            "each unreadable task is a TaskFormatError naming its file"} <= _failed(unstable)


# ---- verifiers ------------------------------------------------------------------------------------


def _task_with_solution():
    return next(t for t in load_tasks(str(EXAMPLES)).tasks if t.solution and t.verifier.type == "checks")


def test_verifier_kit_passes_the_checks_verifier():
    check_verifier(_task_with_solution()).assert_ok()


class AlwaysPasses(Verifier):
    name = "always"

    def __init__(self, spec):
        pass

    async def verify(self, ctx):
        return Verdict(verifier=self.name, score=1.0, passed=True)


class SwallowsErrors(Verifier):
    """Scores 0 when it cannot run, instead of saying it could not."""

    name = "swallows"

    def __init__(self, spec):
        self.inner = get_registry().get("verifiers", "checks")(spec)

    async def verify(self, ctx):
        try:
            return await self.inner.verify(ctx)
        except Exception:  # the defect under test
            return Verdict(verifier=self.name, score=0.0, passed=False)


def test_verifier_kit_fails_broken_verifiers():
    task = _task_with_solution()
    assert "untouched workspace: does not pass" in _failed(check_verifier(task, AlwaysPasses))
    assert "cannot score: raises VerifierError, not a verdict" in _failed(check_verifier(task, SwallowsErrors))


# ---- trainers -------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("trl") is None, reason="trl is not installed (pip install 'clawsdk[train]')")
def test_trainer_kit_passes_the_trl_trainers_error_contract(tmp_path):
    for name in ("trl-sft", "trl-grpo"):
        factory = get_registry().get("trainers", name)
        check_trainer(factory, db=tmp_path / "s.db", out=tmp_path / name).assert_ok()


class CarelessTrainer:
    """Takes any option and 'trains' on anything."""

    name = "careless"

    def __init__(self, **options):
        self.options = options

    def train(self, data, out, *, db=None, checkpoint_id=None):
        Path(out).mkdir(parents=True, exist_ok=True)
        return TrainResult(checkpoint_id="ckpt", path=Path(out), dataset_id=None)


def test_trainer_kit_fails_a_careless_trainer(tmp_path):
    report = check_trainer(CarelessTrainer, db=tmp_path / "s.db", out=tmp_path / "ckpt")
    assert _failed(report) == {"an unknown option is refused naming it",
                               "a dataset that does not exist is refused naming it",
                               "a refused train() writes nothing"}
