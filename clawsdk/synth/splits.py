"""Train and held-out splits that test generalization, not recall.

From training families and a seed, `make_splits` holds out some templates of each training
family and gives:

- train: tasks of the training templates;
- seen_params (a): new parameters (names, numbers, sizes) of the training templates;
- unseen_templates (b): the held-out templates of the training families;
- unseen_families (c): tasks of families that training never sees.

No held-out task shares a hash, a literal reference solution, or near-duplicate text
(MinHash of instruction + workspace) with a training task; `Splits.problems()` re-checks that,
and that (b) and (c) really hold no training template or family.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from clawsdk.synth.dedup import MinHasher
from clawsdk.synth.distinct import template_of
from clawsdk.synth.families import Family
from clawsdk.tasks.model import Task

NEAR_DUPLICATE = 0.9  # MinHash Jaccard of instruction + workspace text
SPLITS = ("seen_params", "unseen_templates", "unseen_families")


def _text(task: Task) -> str:
    return task.instruction + "\n" + "\n".join(f"{f.path}\n{f.text or ''}" for f in task.workspace)


def _solution_key(task: Task) -> str:
    return "\n".join(f"{c.tool} {sorted(c.args.items())}" for c in task.solution or [])


@dataclass
class Splits:
    train: list[Task]
    seen_params: list[Task]
    unseen_templates: list[Task]
    unseen_families: list[Task]
    train_templates: list[str] = field(default_factory=list)
    heldout_templates: list[str] = field(default_factory=list)
    dropped: dict[str, int] = field(default_factory=dict)  # held-out candidates too close to training

    def heldout(self) -> dict[str, list[Task]]:
        return {name: getattr(self, name) for name in SPLITS}

    def problems(self, threshold: float = NEAR_DUPLICATE) -> list[str]:
        """What leaks from training into a held-out split; empty when the splits are clean."""
        out: list[str] = []
        hasher = MinHasher()
        train_hashes = {t.hash for t in self.train}
        train_solutions = {_solution_key(t) for t in self.train}
        train_vectors = [hasher.vector(_text(t)) for t in self.train]
        train_templates = {template_of(t) for t in self.train}
        train_families = {t.provenance.get("family") for t in self.train}
        for name, tasks in self.heldout().items():
            for t in tasks:
                if t.hash in train_hashes:
                    out.append(f"{name}: {t.id} is a training task")
                if _solution_key(t) in train_solutions:
                    out.append(f"{name}: {t.id} has a training task's reference solution")
                v = hasher.vector(_text(t))
                if any(hasher.similarity(v, w) >= threshold for w in train_vectors):
                    out.append(f"{name}: {t.id} is a near-duplicate of a training task")
                if name == "seen_params" and template_of(t) not in train_templates:
                    out.append(f"{name}: {t.id} is of template {template_of(t)}, not a training one")
                if name == "unseen_templates" and template_of(t) in train_templates:
                    out.append(f"{name}: {t.id} is of training template {template_of(t)}")
                if name == "unseen_families" and t.provenance.get("family") in train_families:
                    out.append(f"{name}: {t.id} is of training family {t.provenance.get('family')}")
        return out


def _round_robin(families: Sequence[Family], templates: dict[str, list[str]], n: int, seed: int, level: int,
                 start: int, keep) -> tuple[list[Task], int]:
    """n tasks cycling over (family, template) pairs, skipping what keep() refuses; (tasks, refused)."""
    pairs = [(f, tp) for f in families for tp in templates[f.name]]
    if not pairs:
        return [], 0
    out: list[Task] = []
    refused = 0
    index = start
    while len(out) < n:
        for f, tp in pairs:
            if len(out) >= n:
                break
            task = f.task(seed, index, level, tp)
            if keep(task):
                out.append(task)
            else:
                refused += 1
                if refused > 20 * n + 100:
                    raise RuntimeError(f"cannot find {n} held-out tasks far enough from training "
                                       f"(family {f.name}); its parameter space is too small")
        index += 1
    return out, refused


def make_splits(train_families: Sequence[Family], heldout_families: Sequence[Family], *, n_train: int,
                n_heldout: int, seed: int, level: int = 1, heldout_share: float = 0.3) -> Splits:
    """Deterministic splits for (families, seed); see the module docstring."""
    overlap = {f.name for f in train_families} & {f.name for f in heldout_families}
    if overlap:
        raise ValueError(f"families both trained on and held out: {', '.join(sorted(overlap))}")
    rng = random.Random(f"splits:{seed}")
    seen: dict[str, list[str]] = {}
    unseen: dict[str, list[str]] = {}
    for f in train_families:
        names = list(f.templates(level))
        rng.shuffle(names)
        k = math.ceil(heldout_share * len(names)) if len(names) > 1 else 0
        unseen[f.name], seen[f.name] = sorted(names[:k]), sorted(names[k:])
    train, _ = _round_robin(train_families, seen, n_train, seed, level, 0, lambda t: True)
    hasher = MinHasher()
    hashes = {t.hash for t in train}
    solutions = {_solution_key(t) for t in train}
    vectors = [hasher.vector(_text(t)) for t in train]

    def far(task: Task) -> bool:
        if task.hash in hashes or _solution_key(task) in solutions:
            return False
        v = hasher.vector(_text(task))
        return not any(hasher.similarity(v, w) >= NEAR_DUPLICATE for w in vectors)

    far_start = 10 ** 6  # held-out tasks come from an index range training never draws from: new parameters
    a, ra = _round_robin(train_families, seen, n_heldout, seed, level, far_start, far)
    b, rb = _round_robin(train_families, unseen, n_heldout, seed, level, far_start, far)
    everything = {f.name: list(f.templates(level)) for f in heldout_families}
    c, rc = _round_robin(heldout_families, everything, n_heldout, seed, level, far_start, far)
    return Splits(train=train, seen_params=a, unseen_templates=b, unseen_families=c,
                  train_templates=[f"{f}/{t}" for f, ts in seen.items() for t in ts],
                  heldout_templates=[f"{f}/{t}" for f, ts in unseen.items() for t in ts],
                  dropped={"seen_params": ra, "unseen_templates": rb, "unseen_families": rc})
