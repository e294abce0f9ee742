"""What a trainer implements, and how a model spec names local weights to start from."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable


@dataclass
class TrainResult:
    """A trained checkpoint: its id in the store, its folder, and what made it."""

    checkpoint_id: str
    path: Path
    dataset_id: str | None
    metrics: dict[str, Any] = field(default_factory=dict)
    runs: list[str] = field(default_factory=list)


@runtime_checkable
class Trainer(Protocol):
    """A trainer plugin: ``register("NAME", factory(**options) -> Trainer)``.

    Error contract (checked by `clawsdk.testing.check_trainer`):

    - the factory raises ``TypeError`` for an option it does not take, or ``ValueError`` for a bad
      value, and the message names the option;
    - ``train`` raises ``LookupError`` (``clawsdk.errors`` subclasses included) or
      ``FileNotFoundError`` when `data` names no dataset in the store or on disk, and the message
      names `data`; it writes nothing under `out` then;
    - on success the checkpoint folder is `out` (loadable with ``--model transformers:OUT``) and it is
      recorded in the store at `db` with the dataset (or runs) and base model that made it.
    """

    #: the registered name, recorded on the checkpoint
    name: str

    def train(self, data: str, out: str | os.PathLike, *, db: str | os.PathLike | None = None,
              checkpoint_id: str | None = None) -> TrainResult:
        """Train on `data` (a dataset id, name or export folder) and write the checkpoint to `out`."""
        ...


def resolve_weights(spec: str) -> str:
    """'BACKEND[:NAME]' or PATH -> the local checkpoint folder a trainer or tokenizer starts from.

    A model backend that keeps local weights says where (`ModelPlugin.weights`: the embedded backend's
    dequantized copy; transformers: the path). Anything else is taken as a path.
    """
    from clawsdk.models.base import ModelPlugin
    from clawsdk.plugins import get_registry

    spec = str(spec)
    if not spec:
        raise ValueError("give a base model: embedded, transformers:PATH or PATH")
    backend, _, name = spec.partition(":")
    factory = get_registry().tables["models"].get(backend)
    located = None if factory is None else ModelPlugin.of(factory).weights(name)
    return spec if located is None else located


__all__ = ["TrainResult", "Trainer", "resolve_weights"]
