"""The trainer conformance kit: a trainer plugin checked against `clawsdk.train.Trainer`'s contract.

    from clawsdk.testing import check_trainer

    def test_my_trainer(tmp_path):
        check_trainer(MyTrainer, db=tmp_path / "s.db", out=tmp_path / "ckpt").assert_ok()
        # with data=DATASET_ID it also trains once and checks the checkpoint and its record

Without `data` the kit checks the error contract only (cheap: no model is loaded):
an unknown option is refused naming it; a dataset that does not exist is refused naming it,
and nothing is written under `out`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clawsdk.testing.report import Report, raised
from clawsdk.train import Trainer, TrainResult

MISSING = "clawsdk-kit-no-such-dataset@v9"


def check_trainer(factory: Callable[..., Any], *, db: str | os.PathLike, out: str | os.PathLike,
                  data: str | None = None, options: dict[str, Any] | None = None) -> Report:
    options = dict(options or {})
    out = Path(out)
    report = Report("trainer", getattr(factory, "name", getattr(factory, "__name__", repr(factory))))
    e = raised(factory, **options, clawsdk_kit_no_such_option=1)
    report.add("an unknown option is refused naming it",
               isinstance(e, (TypeError, ValueError)) and "clawsdk_kit_no_such_option" in str(e),
               f"got {type(e).__name__}: {e}" if e else "the option was accepted")
    try:
        trainer = factory(**options)
    except Exception as e:
        report.add("the factory builds a trainer", False, f"{type(e).__name__}: {e}")
        return report
    report.add("it is a Trainer (a name and train())", isinstance(trainer, Trainer) and bool(trainer.name),
               f"{type(trainer).__name__} lacks name or train()")

    missing_out = out.with_name(out.name + "-refused")
    refusal = raised(trainer.train, MISSING, missing_out, db=db)
    report.add("a dataset that does not exist is refused naming it",
               isinstance(refusal, (LookupError, FileNotFoundError)) and MISSING in str(refusal),
               f"got {type(refusal).__name__}: {refusal}" if refusal else "train() accepted it")
    report.add("a refused train() writes nothing", not missing_out.exists(), f"{missing_out} was created")

    if data is not None:
        try:
            result = trainer.train(data, out, db=db)
        except Exception as e:
            report.add("trains on the data", False, f"{type(e).__name__}: {e}")
            return report
        report.add("train() returns a TrainResult", isinstance(result, TrainResult), f"got {type(result).__name__}")
        if isinstance(result, TrainResult):
            from clawsdk.data import lineage
            from clawsdk.store.store import Store

            report.add("the checkpoint folder is `out`", Path(result.path).resolve() == out.resolve() and out.is_dir(),
                       f"result.path {result.path}, out {out}")
            with Store(db) as store:
                unrecorded = raised(lineage.checkpoint, store, result.checkpoint_id)
            report.add("the checkpoint is recorded in the store", unrecorded is None, str(unrecorded))
    return report


__all__ = ["check_trainer"]
