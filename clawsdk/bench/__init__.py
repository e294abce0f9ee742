"""Benchmarks: build a discriminating task set, score runs honestly, report and compare them.

See docs/bench.md. The CLI is `clawsdk bench build|run|report|compare`.
"""

from clawsdk.bench.build import BuildOptions, BuildResult, measure, select
from clawsdk.bench.compare import compare_runs
from clawsdk.bench.decontam import TrainingSet, read_training
from clawsdk.bench.estimators import bootstrap_mean, paired_test, pass_at_k, pass_hat_k
from clawsdk.bench.manifest import Manifest, ManifestError, load_manifest
from clawsdk.bench.report import build_report
from clawsdk.bench.results import RunData, load_run
from clawsdk.bench.run import bench_run

__all__ = [
    "BuildOptions",
    "BuildResult",
    "Manifest",
    "ManifestError",
    "RunData",
    "TrainingSet",
    "bench_run",
    "bootstrap_mean",
    "build_report",
    "compare_runs",
    "load_manifest",
    "load_run",
    "measure",
    "paired_test",
    "pass_at_k",
    "pass_hat_k",
    "read_training",
    "select",
]
