"""The cuda executor's readout after the replay: option logits at the markers and the act head's softmax.

The arithmetic of `reference.score_markers` and `reference.act_logits` (fp32), in about 20 torch launches
instead of about 40: the host computes what it knows already (each marker's position in the flat stream,
the mask as a multiplier and an additive bias, each row's log(k) and k / 255) and ships it with the ids.
At one short row the host's launching, not the GPU, sets the engine time: on the H200's host a torch op
costs 20-30 us to launch, and the readout launched after the replay took longer than the replay ran
(`recipe.engine_profile`, host stages). It stays outside the graph, as the spec has it.
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
    """The scorer and the act head's weights, applied to a [R, L, D] fp32 stream: [R, K + n_act] out."""

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
