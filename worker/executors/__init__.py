"""Executors run the model on a Batch and return Outputs; they never see JSON.

    class Executor(Protocol):
        name: str
        def forward(self, batch: Batch) -> Outputs: ...
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from worker.batch import Batch, Outputs
from worker.config import ModelConfig


class Executor(Protocol):
    name: str

    def forward(self, batch: Batch) -> Outputs: ...


EXECUTORS = ("reference",)  # "cuda" joins once the bundle-backed executor lands


def make_executor(name: str, cfg: ModelConfig, weights: dict, *, device: str | None = None,
                  bundle: Path | None = None) -> Executor:
    """The executor called `name` ("auto" picks the fastest one available here)."""
    if name == "auto":
        name = "reference"
    if name == "reference":
        from worker.executors.reference import ReferenceExecutor

        return ReferenceExecutor(cfg, weights, device=device)
    raise ValueError(f"unknown executor {name!r}; available: {', '.join(EXECUTORS)}")
