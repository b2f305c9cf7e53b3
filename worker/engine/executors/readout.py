"""The cuda executor's readout after the replay: option logits at the markers and the act head's softmax.

The arithmetic of `reference.score_markers` and `reference.act_logits` (fp32). The host computes what it
knows already (each marker's position in the flat stream, the mask as a multiplier and an additive bias,
each row's log(k) and k / 255) and ships it with the ids. `KernelReadout` runs it as the bundle's two
readout kernels; `Readout`, in about 20 torch launches, is the executor's `torch_readout` option and the
kernels' oracle in tests/gpu. At one short row the host's launching, not the GPU, sets the engine time: on
the H200's host a torch op costs 20-30 us to launch, a bundle kernel's ctypes call a few. Both stay outside
the graph, as the spec has it.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from worker.engine.batch import Batch
from worker.engine.executors.reference import MASKED_LOGIT

INPUT_DTYPES = (np.int32, np.float32, np.float32, np.float32, np.float32)  # at, keep, bias, log_k, k_feature


def host_inputs(batch: Batch) -> tuple[np.ndarray, ...]:
    """What the readout reads besides the stream, in INPUT_DTYPES order: for every (row, option slot) the
    marker's row of the flat stream, 1/0 for a real option and 0/MASKED_LOGIT as its bias; per row log(k)
    and k / 255 for k options (at least 2), the act head's entropy scale and count feature."""
    R, L = batch.ids.shape
    at = (np.arange(R, dtype=np.int32)[:, None] * L + batch.marker_pos).ravel()
    keep = batch.marker_mask.astype(np.float32).ravel()
    bias = np.where(batch.marker_mask, np.float32(0), np.float32(MASKED_LOGIT)).ravel()
    k = np.maximum(batch.marker_mask.sum(1), 2).astype(np.float32)
    return at, keep, bias, np.log(k), k / np.float32(255.0)


class Readout:
    """The scorer and the act head's weights, applied to a [R, L, D] fp32 stream: [R, K + n_act] out, in torch."""

    def __init__(self, scorer: nn.Sequential, act_head: nn.Sequential) -> None:
        norm, linear1, _, linear2 = scorer
        self.norm = (norm.normalized_shape, norm.weight, norm.bias, norm.eps)
        self.score1, self.score2 = (linear1.weight, linear1.bias), (linear2.weight, linear2.bias)
        act1, _, act2 = act_head
        self.act1, self.act2 = (act1.weight, act1.bias), (act2.weight, act2.bias)

    def __call__(self, h: Tensor, at: Tensor, keep: Tensor, bias: Tensor, log_k: Tensor, k_feature: Tensor) -> Tensor:
        R, _, D = h.shape
        K = at.numel() // R
        x = F.layer_norm(h.view(-1, D).index_select(0, at), *self.norm)
        raw = F.linear(F.gelu(F.linear(x, *self.score1)), *self.score2).view(R, K)
        logits = torch.addcmul(bias.view(R, K), raw, keep.view(R, K))  # MASKED_LOGIT past each row's options
        p = torch.softmax(logits, -1)
        entropy = torch.special.entr(p).sum(-1).div_(log_k)
        top2 = p.topk(2, -1).values if K >= 2 else F.pad(p, (0, 1))  # one option: the runner-up is 0
        features = torch.stack([top2[:, 0], top2[:, 0] - top2[:, 1], entropy, k_feature], -1)
        act = F.linear(F.gelu(F.linear(torch.cat([h[:, 0], features], -1), *self.act1)), *self.act2)
        return torch.cat([logits, torch.softmax(act, -1)], dim=1)


class KernelReadout:
    """The same readout as the bundle's readout_scores_f32 and readout_heads_f32: two launches.

    A call's launches are bound once per rows x tokens x markers: the executor passes the same tensors for those
    (its stream buffer and the slices of its static input buffer that the layout of R, L and N fixes). The output
    is a view of this object's buffer, valid until the next call's launch on the stream.
    """

    MAX_BOUND = 4096  # shapes kept bound; past it the table starts over (each is a few hundred bytes)

    def __init__(self, kernels, scorer: nn.Sequential, act_head: nn.Sequential, *, max_markers: int, max_rows: int):
        norm, linear1, _, linear2 = scorer
        act1, _, act2 = act_head
        self.kernels = kernels
        self.scorer = (norm.weight, norm.bias, linear1.weight, linear1.bias, linear2.weight.view(-1))
        self.b2 = linear2.bias
        self.act = (act1.weight, act1.bias, act2.weight, act2.bias)
        self.n_act = act2.weight.shape[0]
        n_blocks = next(a.shape[1] for a in kernels.manifest.entries["readout_scores_f32"].args if a.name == "P")
        device = norm.weight.device
        self.partials = torch.empty(max_markers * n_blocks, dtype=torch.float32, device=device)
        self.n_blocks = n_blocks
        self.units = torch.empty(max_rows * act1.weight.shape[0], dtype=torch.float32, device=device)
        self.out = torch.empty(max_rows * (max_markers // max_rows + self.n_act), dtype=torch.float32, device=device)
        self._bound: dict[tuple, tuple] = {}

    def __call__(self, h: Tensor, at: Tensor, keep: Tensor, bias: Tensor, log_k: Tensor, k_feature: Tensor) -> Tensor:
        R, L, D = h.shape
        N = at.numel()
        C = N // R + self.n_act
        key = (R, L, N)
        launches = self._bound.get(key)
        if launches is None:
            if len(self._bound) >= self.MAX_BOUND:
                self._bound.clear()
            launches = self._bound[key] = self._bind(h.view(R * L, D), at, keep, bias, log_k, k_feature, R, L)
        for launch in launches:
            launch()
        return self.out[: R * C].view(R, C)

    def _bind(self, x, at, keep, bias, log_k, k_feature, R: int, L: int) -> tuple:
        N = at.numel()
        partials = self.partials[: N * self.n_blocks].view(N, self.n_blocks)
        act1 = self.act[0]
        units = self.units[: R * act1.shape[0]].view(R, -1)
        out = self.out[: R * (N // R + self.n_act)].view(R, -1)
        return (
            self.kernels.readout_scores_f32.bind(x, at, *self.scorer, partials, L, act1, units),
            self.kernels.readout_heads_f32.bind(partials, self.b2, keep, bias, log_k, k_feature, units, *self.act, out),
        )
