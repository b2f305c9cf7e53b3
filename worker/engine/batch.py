"""The one contract between the engine and an executor: the executor itself (Executor), what it admits
(Admits), what one forward pass receives (Batch: rows as the kernels consume them) and what it returns
(Outputs)."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Protocol

import numpy as np

from worker.engine.sequences import Row


@dataclass(frozen=True)
class Admits:
    """What one forward pass of an executor takes; the engine takes its limits from this declaration.

    Rows are right-padded to the longest row's length rounded up to `token_step` (at most `max_tokens`):
    1 keeps the reference's exact widths, a larger step makes few shapes (CUDA graph buckets).
    """

    max_rows: int
    max_tokens: int
    token_step: int = 1

    def width(self, longest: int) -> int:
        """The padded row length for a batch whose longest row has `longest` tokens."""
        if not 1 <= longest <= self.max_tokens:
            raise ValueError(f"a row of {longest} tokens; this executor admits 1 to {self.max_tokens}")
        return min(self.max_tokens, -(-longest // self.token_step) * self.token_step)


@dataclass(frozen=True)
class Batch:
    """Rows for one forward pass, in the dtypes and layout the kernels read.

    ids: [R, L] int32, right-padded with the pad id to the executor's width; lengths: [R] int32 real
    tokens per row; qtype: [R] int32; marker_pos: [R, K] int32 (0 past a row's options);
    marker_mask: [R, K] bool.
    """

    ids: np.ndarray
    lengths: np.ndarray
    qtype: np.ndarray
    marker_pos: np.ndarray
    marker_mask: np.ndarray

    @property
    def n_rows(self) -> int:
        return self.ids.shape[0]

    @property
    def width(self) -> int:
        return self.ids.shape[1]

    @classmethod
    def from_rows(cls, rows: list[Row], pad_id: int, admits: Admits) -> Batch:
        if not 1 <= len(rows) <= admits.max_rows:
            raise ValueError(f"{len(rows)} rows; this executor admits 1 to {admits.max_rows} per forward pass")
        n, width = len(rows), admits.width(max(len(row.ids) for row in rows))
        k = max(len(row.markers) for row in rows)
        ids = np.full((n, width), pad_id, dtype=np.int32)
        marker_pos = np.zeros((n, k), dtype=np.int32)
        marker_mask = np.zeros((n, k), dtype=bool)
        for i, row in enumerate(rows):
            ids[i, : len(row.ids)] = row.ids
            marker_pos[i, : len(row.markers)] = row.markers
            marker_mask[i, : len(row.markers)] = True
        lengths = np.array([len(row.ids) for row in rows], dtype=np.int32)
        qtype = np.array([row.qtype for row in rows], dtype=np.int32)
        return cls(ids, lengths, qtype, marker_pos, marker_mask)


@dataclass(frozen=True)
class Outputs:
    """logits: [R, K] float32, -1e4 past each row's options; act_probs: [R, n_act] float32 softmax; executor_ms:
    how long the pass itself took (on the GPU for the cuda executor; the forward call for one that runs it on
    launch), what a load's busy share adds up."""

    logits: np.ndarray
    act_probs: np.ndarray
    executor_ms: float | None = None


class Pending(Protocol):
    def result(self) -> Outputs: ...


class Finished:
    """A pass that ran to completion when it was launched: what the default `launch` gives."""

    def __init__(self, outputs: Outputs) -> None:
        self._outputs = outputs

    def result(self) -> Outputs:
        return self._outputs


class Executor(Protocol):
    name: str
    admits: Admits  # what one forward pass takes; the engine's limits come from it
    passes_in_flight: int = 1  # passes launched and not read yet that it holds before one must be read

    def forward(self, batch: Batch) -> Outputs: ...

    def describe(self) -> dict: ...

    def launch(self, batch: Batch) -> Pending:
        """Start a pass; `result()` waits for its Outputs. By default the pass runs to completion here."""
        t0 = time.perf_counter()
        outputs = self.forward(batch)
        if outputs.executor_ms is None:
            outputs = replace(outputs, executor_ms=(time.perf_counter() - t0) * 1000)
        return Finished(outputs)

    def warmup(self, *, every_bucket: bool = False) -> None:
        """Prepare the shapes requests will need (or every one it has), before the first request. Default: none."""

    def mapping(self) -> dict[str, dict[str, str]]:
        """Which implementation serves each kernel entry point, per shape it has seen. Default: no kernels."""
        return {}
