"""What an executor receives (a Batch of rows) and returns (Outputs): no JSON, no questions."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from worker.sequences import Row


@dataclass(frozen=True)
class Batch:
    """Rows for one forward pass, right-padded to the longest row.

    input_ids, attention_mask: [R, L] int64; marker_pos: [R, K] int64 (0 past a row's options);
    marker_mask: [R, K] bool; qtype: [R] int64.
    """

    input_ids: np.ndarray
    attention_mask: np.ndarray
    marker_pos: np.ndarray
    marker_mask: np.ndarray
    qtype: np.ndarray

    @property
    def n_rows(self) -> int:
        return self.input_ids.shape[0]

    @property
    def n_tokens(self) -> int:
        return int(self.attention_mask.sum())

    @classmethod
    def from_rows(cls, rows: list[Row], pad_id: int) -> Batch:
        n, width = len(rows), max(len(row.ids) for row in rows)
        k = max(len(row.markers) for row in rows)
        input_ids = np.full((n, width), pad_id, dtype=np.int64)
        attention_mask = np.zeros((n, width), dtype=np.int64)
        marker_pos = np.zeros((n, k), dtype=np.int64)
        marker_mask = np.zeros((n, k), dtype=bool)
        for i, row in enumerate(rows):
            input_ids[i, : len(row.ids)] = row.ids
            attention_mask[i, : len(row.ids)] = 1
            marker_pos[i, : len(row.markers)] = row.markers
            marker_mask[i, : len(row.markers)] = True
        qtype = np.array([row.qtype for row in rows], dtype=np.int64)
        return cls(input_ids, attention_mask, marker_pos, marker_mask, qtype)


@dataclass(frozen=True)
class Outputs:
    """logits: [R, K] float32, -1e4 past each row's options; act_probs: [R, n_act] float32 softmax."""

    logits: np.ndarray
    act_probs: np.ndarray
