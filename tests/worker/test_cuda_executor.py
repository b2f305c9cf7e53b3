"""The cuda executor's CPU-side logic, with the bundle's kernels emulated in torch (tests/emulated_kernels.py):
the chain binds the right buffers in the right order and answers as the fp32 reference does within bf16's reach;
buckets, GEMM routes, startup checks and failures. The same executor on the real kernels: tests/gpu."""

from __future__ import annotations

import collections
import itertools

import numpy as np
import pytest
from emulated_kernels import EmulatedKernels
from executor_requests import CHOICE, NOUL, REQUESTS, REQUESTS04

from laya_common.contract import V04, ExecutorError
from laya_common.model import GLOBAL, ModelConfig
from laya_common.rope import rope_tables
from worker.engine.batch import Admits, Batch
from worker.engine.checkpoint import load_weights
from worker.engine.engine import Engine
from worker.engine.executors import ExecutorOptions, make_executor
from worker.engine.executors.cuda import PASSES_IN_FLIGHT, BundleRefused, CudaExecutor
from worker.engine.executors.gemm_routes import (
    ACCUMULATING,
    CUBLAS,
    CUBLAS_ACCUMULATE,
    ROUTES,
    SMALL_M,
    TILELANG,
    GemmRoutes,
)
from worker.engine.sequences import Row

# every GEMM on the bundle, the stream accumulated by its *_acc_f32 kernels at every M
TILELANG_ONLY = GemmRoutes.for_bundle("optimized", use_cublas=False, split_k=False)
SPLIT_K = GemmRoutes.for_bundle("optimized", split_k=True)  # the split-K GEMMs at small M
ALL_CUBLAS = GemmRoutes("all-cublas", {entry: ((1, None),) for entry in ROUTES["optimized"]})
# bf16 weights and activations against the fp32 reference, on a random tiny model whose scorer is 32x wider than
# its fan-in (so options differ by whole logits): the emulated chain shows up to 0.047 across routes and RoPE
# modes, one encoder weight zeroed 0.22 (the test below)
MAX_PROBABILITY_DIFFERENCE = 0.05


def probabilities(response: dict) -> list[float]:
    values = []
    for answer in response["answers"].values():
        values += list(answer.get("probabilities", {}).values()) + [answer.get("noul", 0.0)]
        values.append(answer["action"]["act_probability"])
    return values


def emulated_engine(checkpoint, *, routes=TILELANG_ONLY, original_rope=False, torch_readout=False) -> Engine:
    cfg = ModelConfig.from_checkpoint(checkpoint)
    tables = None
    if original_rope:
        tables = {
            kind: rope_tables(theta, cfg.head_dim, cfg.max_len, "cpu")
            for kind, theta in (("global", cfg.global_theta), ("local", cfg.local_theta))
        }
    executor = CudaExecutor(
        cfg,
        load_weights(checkpoint),
        kernels=EmulatedKernels(cfg),
        device="cpu",
        routes=routes,
        original_rope=original_rope,
        rope_tables=tables,
        torch_readout=torch_readout,
    )
    return Engine(checkpoint, executor=executor)


@pytest.fixture(scope="module")
def reference_answers(engine):
    return [engine.decide(r) for r in REQUESTS]


@pytest.mark.parametrize("routes", [TILELANG_ONLY, ALL_CUBLAS, SPLIT_K], ids=["tilelang", "cublas", "split-k"])
@pytest.mark.parametrize("original_rope", [False, True], ids=["rope-fp32", "rope-table"])
def test_answers_as_the_fp32_reference_within_bf16(tiny_checkpoint, reference_answers, routes, original_rope):
    engine = emulated_engine(tiny_checkpoint, routes=routes, original_rope=original_rope)
    for request, want in zip(REQUESTS, reference_answers, strict=True):
        got = engine.decide(request)
        assert got["answers"].keys() == want["answers"].keys()
        assert got["usage"] == want["usage"]
        assert [a["type"] for a in got["answers"].values()] == [a["type"] for a in want["answers"].values()]
        diff = np.abs(np.subtract(probabilities(got), probabilities(want))).max()
        assert diff <= MAX_PROBABILITY_DIFFERENCE, f"max |dp| {diff:.4f} for {request['questions'].keys()}"


def test_protocol_0_4_answers_as_the_fp32_reference_within_bf16(tiny_checkpoint, engine):
    """Its controls and option orders change the rows (shorter budgets, options in another order), not the chain."""
    cuda = emulated_engine(tiny_checkpoint)
    for request in REQUESTS04:
        got, want = cuda.decide(request, V04), engine.decide(request, V04)
        assert got["usage"] == want["usage"] and got["answers"].keys() == want["answers"].keys()
        diff = np.abs(np.subtract(probabilities(got), probabilities(want))).max()
        assert diff <= MAX_PROBABILITY_DIFFERENCE, f"max |dp| {diff:.4f} for {request['questions'].keys()}"


def test_answers_depend_on_what_the_chain_binds(tiny_checkpoint, reference_answers):
    """The comparison above can fail: the same chain with one encoder weight zeroed answers otherwise."""
    engine = emulated_engine(tiny_checkpoint)
    engine.executor.weights.layers[1].wo.zero_()
    diffs = [
        np.abs(np.subtract(probabilities(engine.decide(r)), probabilities(w))).max()
        for r, w in zip(REQUESTS, reference_answers, strict=True)
    ]
    assert max(diffs) > MAX_PROBABILITY_DIFFERENCE


def test_one_forward_launches_the_documented_chain(tiny_checkpoint):
    engine = emulated_engine(tiny_checkpoint)
    engine.decide(REQUESTS[1])
    cfg, launches = engine.config, engine.executor.kernels.launches
    n_global = sum(t == GLOBAL for t in cfg.layer_types)
    n_layers, n_head = cfg.num_layers, cfg.head_layers
    assert launches[0] == "embed_norm_bf16" and launches[-3] == "gemm_head_ffn2_bias_acc_f32"
    assert launches[-2:] == ["readout_scores_f32", "readout_heads_f32"]  # after the graph: two launches
    assert collections.Counter(launches) == {
        "embed_norm_bf16": 1,
        "gemm_qkv_bf16": n_layers,
        "rope_fp32_bf16": n_layers,
        "attn_fwd_global_bf16": n_global + n_head,
        "attn_fwd_local_bf16": n_layers - n_global,
        # the GEMMs whose output joins a residual stream add into it (here the bundle's kernels, as routed); a norm
        # without the add follows
        "gemm_attn_out_acc_f32": n_layers,
        "gemm_mlp_out_acc_f32": n_layers,
        "gemm_head_out_bias_acc_f32": n_head,
        "gemm_head_ffn2_bias_acc_f32": n_head,
        "norm_bias_bf16": 2 * n_layers + 2 * n_head - 1,
        "gemm_geglu_bf16": n_layers,
        "type_add_norm_bias_bf16": 1,
        "gemm_head_qkv_bias_bf16": n_head,
        "gemm_head_ffn1_bias_relu_bf16": n_head,
        "readout_scores_f32": 1,
        "readout_heads_f32": 1,
    }


def test_the_readout_kernels_answer_as_the_torch_readout(tiny_checkpoint):
    """What the executor binds to the two readout kernels (stream, markers, weights, buffers) gives the torch
    readout's answers; the kernels' own arithmetic is tests/kernels/test_readout_kernels.py's, on the H200."""
    kernels, torch_ops = emulated_engine(tiny_checkpoint), emulated_engine(tiny_checkpoint, torch_readout=True)
    assert (kernels.executor.describe()["readout"], torch_ops.executor.describe()["readout"]) == ("kernels", "torch")
    for request in REQUESTS + REQUESTS04:
        got, want = kernels.decide(request), torch_ops.decide(request)
        assert got["answers"].keys() == want["answers"].keys()
        np.testing.assert_allclose(probabilities(got), probabilities(want), rtol=0, atol=1e-5)


def test_a_bundle_without_the_readout_kernels_is_refused(tiny_checkpoint):
    cfg = ModelConfig.from_checkpoint(tiny_checkpoint)
    kernels = EmulatedKernels(cfg)
    kernels.manifest.entries = {}
    with pytest.raises(BundleRefused, match="no readout kernels: rebuild it"):
        CudaExecutor(cfg, load_weights(tiny_checkpoint), kernels=kernels, device="cpu", routes=TILELANG_ONLY)


@pytest.mark.parametrize("entry", ["gemm_mlp_out_split_f32", "split_add_norm_bias_bf16"])
def test_a_bundle_without_the_split_k_entries_its_routes_run_is_refused(tiny_checkpoint, entry):
    """Not a silent fall back to cuBLAS: routes that run split-K GEMMs need the bundle's split entries and the norm
    that sums their slices; routes that run none do not."""
    cfg = ModelConfig.from_checkpoint(tiny_checkpoint)
    kernels = EmulatedKernels(cfg)
    del kernels.manifest.entries[entry]
    with pytest.raises(BundleRefused, match=f"has no {entry} for the split-K routes: rebuild it"):
        CudaExecutor(cfg, load_weights(tiny_checkpoint), kernels=kernels, device="cpu", routes=SPLIT_K)
    CudaExecutor(cfg, load_weights(tiny_checkpoint), kernels=kernels, device="cpu", routes=TILELANG_ONLY)


def test_rows_are_padded_to_token_buckets_and_rows_stay_exact(tiny_checkpoint):
    admits = emulated_engine(tiny_checkpoint).executor.admits
    assert [admits.width(n) for n in (1, 16, 17, 32, 33, 511, 512)] == [16, 16, 32, 32, 48, 512, 512]
    rows = [Row(ids=[5] * n, markers=[1, 2], qtype=2) for n in (17, 3, 30)]
    batch = Batch.from_rows(rows, pad_id=0, admits=admits)
    assert batch.ids.shape == (3, 32) and batch.ids.dtype == np.int32
    assert batch.lengths.tolist() == [17, 3, 30] and batch.ids[1, 3:].tolist() == [0] * 29
    with pytest.raises(ValueError, match="1 to 16"):
        Batch.from_rows(rows * 6, pad_id=0, admits=admits)
    with pytest.raises(ValueError, match="admits 1 to 512"):
        admits.width(513)
    assert Admits(max_rows=16, max_tokens=512).width(17) == 17  # the reference keeps exact widths


def test_each_bucket_records_what_runs_each_entry_point(tiny_checkpoint):
    split = "gemm_attn_out_split_f32"
    routes = GemmRoutes("mixed", {"gemm_geglu_bf16": ((1, 128),)}, split_ranges={split: SMALL_M})
    engine = emulated_engine(tiny_checkpoint, routes=routes)
    engine.decide(REQUESTS[0])  # one row of fewer than 128 tokens
    engine.decide(REQUESTS[3])  # 16 rows of max_len tokens
    mapping = engine.executor.mapping()
    small, large = (m for _, m in sorted(mapping.items(), key=lambda kv: int(kv[0].split("x")[0])))
    assert small["gemm_geglu_bf16"] == CUBLAS and large["gemm_geglu_bf16"] == "emulated_gemm_geglu_bf16"
    assert small["gemm_qkv_bf16"] == "emulated_gemm_qkv_bf16"
    assert small["gemm_mlp_out_acc_f32"] == large["gemm_attn_out_acc_f32"] == CUBLAS_ACCUMULATE
    # the split-K attention output at small M, its slices summed by the norm after it; at large M, not
    assert small[split] == f"emulated_{split}" and "gemm_attn_out_acc_f32" not in small
    assert small["split_add_norm_bias_bf16"] == "emulated_split_add_norm_bias_bf16"
    assert split not in large and "split_add_norm_bias_bf16" not in large
    assert "16x512" in mapping


def test_routes_are_chosen_by_entry_and_m():
    routes = GemmRoutes.for_bundle("optimized")
    assert routes.route("gemm_qkv_bf16", 16) == CUBLAS
    ffn1 = "gemm_head_ffn1_bias_relu_bf16"
    assert routes.route(ffn1, 16) == TILELANG and routes.route(ffn1, 17) == routes.route(ffn1, 8192) == CUBLAS
    assert all(routes.route("gemm_geglu_bf16", m) == TILELANG for m in (16, 129, 1024, 8192))
    assert routes.route("attn_fwd_global_bf16", 16) == TILELANG
    assert GemmRoutes.for_bundle("original").route("gemm_qkv_bf16", 16) == TILELANG
    assert GemmRoutes.for_bundle("optimized", use_cublas=False).route("gemm_qkv_bf16", 16) == TILELANG
    # the stream's GEMMs on cuBLAS (the bundle's kernels lost below M = 1024; a persistent tier above won alone and
    # lost inside the pass: docs/records/acc-routed-h100-2026-12-07.json), on the bundle without cuBLAS
    acc = "gemm_mlp_out_acc_f32"
    assert all(routes.route_accumulate(a, m) == CUBLAS_ACCUMULATE for a in ACCUMULATING for m in (16, 1025, 8192))
    assert TILELANG_ONLY.route_accumulate(acc, 16) == TILELANG
    assert "the stream accumulated by the bundle's kernels for" in TILELANG_ONLY.summary()
    assert f"{acc} M 1-any" in TILELANG_ONLY.summary()
    assert f"{ffn1} M 17-any" in routes.summary()
    # the split-K GEMMs by default at small M, only where their tiers reach; nowhere for the original shapes
    mlp_split = "gemm_mlp_out_split_f32"
    assert routes.split(mlp_split, 16) and not routes.split(mlp_split, 129)
    assert not GemmRoutes.for_bundle("optimized", split_k=False).split(mlp_split, 16)
    assert not GemmRoutes.for_bundle("original").split(mlp_split, 16)
    assert SPLIT_K.split(mlp_split, 128) and not SPLIT_K.split(mlp_split, 129)
    assert f"split over K for gemm_attn_out_split_f32 M 1-128, {mlp_split} M 1-128" in SPLIT_K.summary()
    with pytest.raises(ValueError, match="no GEMM routing table for tile configuration 'other'"):
        GemmRoutes.for_bundle("other")


def test_a_failed_kernel_fails_this_request_and_every_later_one(tiny_checkpoint):
    engine = emulated_engine(tiny_checkpoint)
    engine.executor.kernels.fail_on = "attn_fwd_local_bf16"
    with pytest.raises(ExecutorError, match="emulated kernel failure"):
        engine.decide(REQUESTS[0])
    engine.executor.kernels.fail_on = None
    with pytest.raises(ExecutorError, match="failed earlier and answers nothing more"):
        engine.decide(REQUESTS[0])


def test_describes_what_it_holds(tiny_checkpoint):
    engine = emulated_engine(tiny_checkpoint)
    described = engine.executor.describe()
    assert described["executor"] == "cuda" and described["graphs"] is False  # no graphs without CUDA
    assert described["rope"] == "rope_fp32_bf16" and described["gemm_routes"].startswith("tilelang")
    assert described["memory"]["weights_mib"] > 0 and described["memory"]["workspaces_mib"] > 0
    assert described["admits"] == {"max_rows": 16, "max_tokens": 512, "token_step": 16}
    assert engine.startup_line().startswith("cuda executor (given); {")


def test_auto_without_a_bundle_is_the_reference(tiny_checkpoint):
    cfg = ModelConfig.from_checkpoint(tiny_checkpoint)
    executor, why = make_executor(
        "auto", cfg, load_weights(tiny_checkpoint), checkpoint=tiny_checkpoint, options=ExecutorOptions(device="cpu")
    )
    assert executor.name == "reference" and why == "auto: no bundle given"


def test_auto_with_a_bundle_that_does_not_verify_is_the_reference_and_says_why(tiny_checkpoint, tmp_path):
    cfg = ModelConfig.from_checkpoint(tiny_checkpoint)
    executor, why = make_executor(
        "auto",
        cfg,
        load_weights(tiny_checkpoint),
        checkpoint=tiny_checkpoint,
        options=ExecutorOptions(device="cpu", bundle=tmp_path),
    )
    assert executor.name == "reference"
    assert why.startswith(f"auto: bundle {tmp_path} refused: {tmp_path / 'manifest.json'}: missing")


def test_cuda_refuses_a_bundle_that_does_not_verify_naming_the_file(tiny_checkpoint, tmp_path):
    cfg = ModelConfig.from_checkpoint(tiny_checkpoint)
    with pytest.raises(BundleRefused, match=f"{tmp_path / 'manifest.json'}: missing"):
        make_executor("cuda", cfg, {}, checkpoint=tiny_checkpoint, options=ExecutorOptions(bundle=tmp_path))
    with pytest.raises(ValueError, match="needs a bundle directory"):
        make_executor("cuda", cfg, {}, checkpoint=tiny_checkpoint, options=ExecutorOptions())


def test_the_warmup_prepares_the_common_buckets_or_every_one(tiny_checkpoint, monkeypatch):
    executor = emulated_engine(tiny_checkpoint).executor
    prepared = []
    monkeypatch.setattr(executor, "_prime_inputs", lambda R, L: prepared.append((R, L)))
    monkeypatch.setattr(executor, "plan", lambda key: [])
    lengths = executor._token_buckets()
    executor.warmup()
    common = set(prepared)
    assert {(1, t) for t in lengths} | {(16, t) for t in lengths} <= common
    assert len(common) < 16 * len(lengths)
    prepared.clear()
    executor.warmup(every_bucket=True)
    assert set(prepared) == {(r, t) for r in range(1, 17) for t in lengths}


def test_batch_scoring_packs_rows_of_similar_length_and_answers_in_input_order(tiny_checkpoint, monkeypatch):
    engine = emulated_engine(tiny_checkpoint)
    states = [" ".join(["refund"] * n) for n in (300, 5, 200, 12, 400, 60, 150, 30, 250, 90)]
    # a choice row longer than a noul row by its options: sorted by length, a payload's rows part
    wordy = {**CHOICE, "criteria": [f"{c} " + "and all about it " * 6 for c in CHOICE["criteria"]]}
    payloads = [{"state": s, "questions": {"q": NOUL, "c": wordy}} for s in states]
    widths, lengths, rows, events, launch = [], [], [], [], engine.executor.launch

    def recording(batch):
        widths.append(batch.width)
        lengths.append(sorted(batch.lengths.tolist()))
        rows.append({tuple(batch.ids[r, :n]) for r, n in enumerate(batch.lengths)})
        events.append(f"launch {len(widths)}")
        pending, n = launch(batch), len(widths)
        result = pending.result
        monkeypatch.setattr(pending, "result", lambda: events.append(f"result {n}") or result())
        return pending

    monkeypatch.setattr(engine.executor, "launch", recording)
    results = engine.decide_many(payloads)
    assert widths == sorted(widths) and len(widths) == 2  # 20 rows: the 16 shortest, then 4
    every_row = sorted(n for p in payloads for n in (len(row.ids) for row in engine.prepare(p).rows))
    assert lengths == [every_row[:16], every_row[16:]]  # rows, not payloads, sorted by length
    ran_in = [
        {k for row in engine.prepare(p).rows for k, ran in enumerate(rows) if tuple(row.ids) in ran} for p in payloads
    ]
    assert {0, 1} in ran_in  # a payload whose two rows ran in different passes
    assert events == ["launch 1", "launch 2", "result 1", "result 2"]  # the second runs while the first decodes
    for payload, result in zip(payloads, results, strict=True):
        alone = engine.decide(payload)
        assert result["usage"] == alone["usage"]  # every state has another length: this pins the order
        # packed with other rows, a row runs in GEMMs of another M: bf16 results may round otherwise
        assert np.abs(np.subtract(probabilities(result), probabilities(alone))).max() <= MAX_PROBABILITY_DIFFERENCE


def test_two_passes_in_flight_keep_their_own_outputs_and_a_third_must_wait(tiny_checkpoint):
    engine = emulated_engine(tiny_checkpoint)
    executor = engine.executor
    short, long = batches_of(
        engine, {"state": "refund", "questions": {"q": NOUL}}, {"state": "late " * 300, "questions": {"c": CHOICE}}
    )
    first, second = executor.launch(short), executor.launch(long)
    with pytest.raises(RuntimeError, match="in flight"):
        executor.launch(short)
    assert not executor.failed  # refused before any work: the executor goes on
    got_first, got_second = first.result(), second.result()
    for got, batch in ((got_first, short), (got_second, long)):
        alone = executor.forward(batch)
        assert np.array_equal(got.logits, alone.logits) and np.array_equal(got.act_probs, alone.act_probs)
    assert got_first.logits.shape != got_second.logits.shape


def test_passes_of_one_shape_in_flight_at_once_keep_their_own_inputs_and_outputs(tiny_checkpoint):
    engine = emulated_engine(tiny_checkpoint)
    executor = engine.executor
    a, b = batches_of(
        engine,
        {"state": "please refund me", "questions": {"c": CHOICE}},
        {"state": "where is my parcel", "questions": {"c": CHOICE}},
    )
    assert a.ids.shape == b.ids.shape and a.marker_pos.shape == b.marker_pos.shape  # one shape's views, bound once
    alone = [executor.forward(batch) for batch in (a, b)]
    for batches in ((a, b), (b, a), (a, b)):  # each through both slots
        got = [pending.result() for pending in [executor.launch(batch) for batch in batches]]
        for batch, out in zip(batches, got, strict=True):
            want = alone[0 if batch is a else 1]
            assert np.array_equal(out.logits, want.logits) and np.array_equal(out.act_probs, want.act_probs)
    assert not np.array_equal(alone[0].logits, alone[1].logits)


def batches_of(engine, *payloads: dict) -> list[Batch]:
    """Each payload's rows as one pass."""
    return [Batch.from_rows(engine.prepare(p).rows, engine.tokenizer.pad_id, engine.executor.admits) for p in payloads]


def test_windows_answer_in_order_and_the_next_window_is_prepared_while_passes_run(tiny_checkpoint, monkeypatch):
    engine = emulated_engine(tiny_checkpoint)
    states = [" ".join(["refund"] * n) for n in (30, 5, 200, 12, 80, 60, 150, 3, 250, 90, 40, 7)]
    payloads = [{"state": s, "questions": {"q": NOUL, "c": CHOICE}} for s in states]
    payloads[9] = {"state": "x", "questions": {"q": {"type": "nope"}}}  # an error body at its own index
    bounds = [(0, 1), (1, 3), (3, 6), (6, 10), (10, 12)]  # from an eighth, each window at most 1.25x + 1 longer
    want = [r for start, end in bounds for r in engine.decide_many(payloads[start:end])]
    events, launch, prepare = [], engine.executor.launch, engine.prepare

    def launching(batch):
        events.append("launch")
        return launch(batch)

    def preparing(payload, protocol):
        events.append(f"prepare {payloads.index(payload)}")
        return prepare(payload, protocol)

    monkeypatch.setattr(engine.executor, "launch", launching)
    monkeypatch.setattr(engine, "prepare", preparing)
    windows = list(engine.decide_in_windows(payloads, 6))
    assert [start for start, _ in windows] == [start for start, _ in bounds]  # the first short, to start sooner
    assert [r for _, results in windows for r in results] == want
    assert "error" in windows[3][1][3]
    first_launch = events.index("launch")
    assert events[:first_launch] == ["prepare 0"]  # only the first window before any pass
    assert {f"prepare {i}" for i in range(1, 12)} <= set(events[first_launch:])  # the rest between launches


def test_a_window_is_handed_over_while_the_next_runs_and_a_caller_may_stop_at_any_window(tiny_checkpoint, monkeypatch):
    engine = emulated_engine(tiny_checkpoint)
    payloads = [{"state": "refund " * n, "questions": {"q": NOUL, "c": CHOICE}} for n in range(1, 41)]
    events, launch = [], engine.executor.launch

    def recording(batch):
        events.append("launch")
        pending = launch(batch)
        result = pending.result
        monkeypatch.setattr(pending, "result", lambda: events.append("result") or result())
        return pending

    monkeypatch.setattr(engine.executor, "launch", recording)
    windows = engine.decide_in_windows(payloads, 16)
    next(windows)
    # while the caller has this window the executor holds two passes of the next ones: launched, not yet read
    assert events[-1] == "launch" and events.count("launch") == events.count("result") + PASSES_IN_FLIGHT
    del windows  # a caller that stops there: the passes in flight are waited for, not left holding the executor
    assert events[-1] == "result" and events.count("launch") == events.count("result")
    for stop in range(4):  # stopping after any window leaves the executor whole: everything answers again
        for _ in itertools.islice(engine.decide_in_windows(payloads, 16), stop):
            pass
    assert not engine.executor.failed
    assert engine.decide_many(payloads[:3]) == [r for _, rs in engine.decide_in_windows(payloads[:3], 16) for r in rs]
