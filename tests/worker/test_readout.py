"""The cuda executor's lean readout against the reference's scorer and act head, on the same fp32 stream."""

import numpy as np
import pytest
import torch

from laya_common.model import ModelConfig
from worker.engine.batch import Batch
from worker.engine.executors.readout import INPUT_DTYPES, Readout, host_inputs
from worker.engine.executors.reference import act_logits, readout_modules, score_markers


@pytest.mark.parametrize("options", [[1], [2, 1], [4, 2, 3], [16, 1, 7, 2], [9] * 16])
def test_lean_readout_computes_what_the_reference_does(tiny_checkpoint, options):
    cfg = ModelConfig.from_checkpoint(tiny_checkpoint)
    torch.manual_seed(len(options))
    scorer, act_head = readout_modules(cfg)
    R, L, K = len(options), 48, max(options)
    rng = np.random.default_rng(K)
    marker_pos = np.zeros((R, K), np.int32)
    marker_mask = np.zeros((R, K), bool)
    for r, n in enumerate(options):
        marker_pos[r, :n] = np.sort(rng.choice(np.arange(1, L), n, replace=False))
        marker_mask[r, :n] = True
    ids = np.zeros((R, L), np.int32)
    batch = Batch(ids, np.full(R, L, np.int32), np.zeros(R, np.int32), marker_pos, marker_mask)
    h = torch.randn(R, L, cfg.hidden_size) * 3
    staged = [torch.from_numpy(np.ascontiguousarray(a)) for a in host_inputs(batch)]
    assert [a.dtype for a in host_inputs(batch)] == list(INPUT_DTYPES)
    with torch.no_grad():
        got = Readout(scorer, act_head)(h, *staged)
        logits = score_markers(scorer, h, torch.from_numpy(marker_pos).long(), torch.from_numpy(marker_mask))
        want = torch.cat([logits, torch.softmax(act_logits(act_head, h, logits, torch.from_numpy(marker_mask)), -1)], 1)
    assert got.shape == want.shape == (R, K + cfg.n_act)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert (got[:, :K][~torch.from_numpy(marker_mask)] == -1e4).all()
