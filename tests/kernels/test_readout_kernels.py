"""The readout kernels: the scorer at the option markers and the act head, after the graph (GPU)."""

import pytest
import torch
from torch import nn

from kernels import reference
from kernels.readout import ACT_HIDDEN, SCORER_EPS
from worker.engine.executors.reference import MASKED_LOGIT, act_logits, score_markers

pytestmark = pytest.mark.gpu

N_ACT = 3
# (rows, tokens per row, option slots per row): one option, a noul's two, long rows, and every slot of a row
CASES = [(1, 16, 1), (1, 80, 2), (3, 192, 5), (2, 64, 33), (16, 512, 4), (5, 512, 512)]


def _modules(D, gen):
    scorer = nn.Sequential(nn.LayerNorm(D, eps=SCORER_EPS), nn.Linear(D, D), nn.GELU(), nn.Linear(D, 1))
    act_head = nn.Sequential(nn.Linear(D + 4, ACT_HIDDEN), nn.GELU(), nn.Linear(ACT_HIDDEN, N_ACT))
    for module in (scorer, act_head):
        for p in module.parameters():  # weights that make options differ by whole logits, as a trained head's do
            p.data = torch.randn(p.shape, device="cuda", generator=gen) * (3 / p.shape[-1] ** 0.5)
    scorer[0].weight.data += 1
    return scorer.cuda().eval(), act_head.cuda().eval()


def _markers(R, L, K, gen):
    """Marker positions and mask, every row with 1..K real options (a row's first slots)."""
    pos = torch.randint(0, L, (R, K), device="cuda", generator=gen, dtype=torch.int32)
    n_real = torch.randint(1, K + 1, (R, 1), device="cuda", generator=gen)
    mask = torch.arange(K, device="cuda")[None] < n_real
    return pos, mask


def _host_inputs(pos, mask, L):
    """What the executor ships with the ids (worker/engine/executors/readout.py host_inputs)."""
    R = pos.shape[0]
    at = (torch.arange(R, device="cuda", dtype=torch.int32)[:, None] * L + pos).flatten().contiguous()
    keep = mask.float().flatten().contiguous()
    bias = torch.where(mask, 0.0, MASKED_LOGIT).float().flatten().contiguous()
    k = mask.sum(1).clamp(min=2).float()
    return at, keep, bias, k.log().contiguous(), (k / 255).contiguous()


def _weights(scorer, act_head):
    norm, linear1, _, linear2 = scorer
    act1, _, act2 = act_head
    scores = (norm.weight, norm.bias, linear1.weight, linear1.bias, linear2.weight.view(-1).contiguous())
    return scores, linear2.bias, (act1.weight, act1.bias, act2.weight, act2.bias)


def _run(kernels, X, L, inputs, weights, poisoned):
    at, keep, bias, log_k, k_feature = inputs
    scores, b2, act = weights
    R, N = log_k.numel(), at.numel()
    n_blocks = next(a.shape[1] for a in kernels.manifest.entries["readout_scores_f32"].args if a.name == "P")
    P, U = poisoned(N, n_blocks, dtype=torch.float32), poisoned(R, ACT_HIDDEN, dtype=torch.float32)
    Out = poisoned(R, N // R + N_ACT, dtype=torch.float32)
    kernels.readout_scores_f32(X, at, *scores, P, L, act[0], U)
    kernels.readout_heads_f32(P, b2, keep, bias, log_k, k_feature, U, *act, Out)
    torch.cuda.synchronize()
    return P, U, Out


@pytest.mark.parametrize(("R", "L", "K"), CASES)
def test_readout_as_the_fp32_reference(kernels, gen, poisoned, R, L, K):
    D = kernels.manifest.model.hidden_size
    X = torch.randn(R * L, D, device="cuda", generator=gen) * 3
    scorer, act_head = _modules(D, gen)
    pos, mask = _markers(R, L, K, gen)
    inputs, weights = _host_inputs(pos, mask, L), _weights(scorer, act_head)
    P, U, Out = _run(kernels, X, L, inputs, weights, poisoned)
    assert all(torch.isfinite(t).all() for t in (P, U, Out)), "unwritten (NaN) outputs"

    # each kernel against its contract (kernels/reference.py), the second on the first's own outputs
    scores, b2, act = weights
    P_ref = reference.readout_partials(X, inputs[0], *scores, P.shape[1], SCORER_EPS)
    assert reference.rel_error(P, P_ref) < 1e-4
    assert reference.rel_error(U, reference.readout_act_units(X, L, R, act[0])) < 1e-4
    Out_ref = reference.readout_heads(P, b2, *inputs[1:], U, *act)
    torch.testing.assert_close(Out, Out_ref, rtol=1e-5, atol=1e-5)

    # both against the worker's fp32 reference: logits at the markers, then the act head's softmax
    with torch.no_grad():
        h = X.view(R, L, D)
        logits = score_markers(scorer, h, pos.long(), mask)
        act_p = torch.softmax(act_logits(act_head, h, logits, mask), -1)
    torch.testing.assert_close(Out[:, :K], logits, rtol=1e-4, atol=1e-4)
    assert (Out[:, :K][~mask] == MASKED_LOGIT).all()
    torch.testing.assert_close(Out[:, K:], act_p, rtol=1e-4, atol=1e-5)


def test_readout_repeats_bit_for_bit(kernels, gen, poisoned):
    R, L, K = 16, 512, 4
    D = kernels.manifest.model.hidden_size
    X = torch.randn(R * L, D, device="cuda", generator=gen) * 3
    scorer, act_head = _modules(D, gen)
    inputs, weights = _host_inputs(*_markers(R, L, K, gen), L), _weights(scorer, act_head)
    first = _run(kernels, X, L, inputs, weights, poisoned)
    for _ in range(3):
        again = _run(kernels, X, L, inputs, weights, poisoned)
        assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
