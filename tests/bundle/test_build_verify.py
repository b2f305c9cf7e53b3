"""A real bundle built on a machine with nvcc and no GPU: library, manifest, tables, verify, tampering."""

import csv
import json
import subprocess

import pytest

from bundle.export_tables import TABLE_FILES
from bundle.manifest import LIBRARY, MANIFEST, TABLES_JSON, Manifest
from bundle.verify import main as verify_main
from bundle.verify import verify
from laya_common.checkpoint import ARTIFACTS

pytestmark = [pytest.mark.slow, pytest.mark.nvcc]

ENTRY_POINTS = {
    "gemm_qkv_bf16",
    "gemm_attn_out_bf16",
    "gemm_geglu_bf16",
    "gemm_mlp_out_bf16",
    "gemm_head_qkv_bias_bf16",
    "gemm_head_out_bias_bf16",
    "gemm_head_ffn1_bias_relu_bf16",
    "gemm_head_ffn2_bias_bf16",
    "gemm_attn_out_acc_f32",
    "gemm_mlp_out_acc_f32",
    "gemm_head_out_bias_acc_f32",
    "gemm_head_ffn2_bias_acc_f32",
    "gemm_attn_out_split_f32",
    "gemm_mlp_out_split_f32",
    "embed_norm_bf16",
    "add_norm_bf16",
    "add_norm_bias_bf16",
    "norm_bias_bf16",
    "split_add_norm_bias_bf16",
    "type_add_norm_bias_bf16",
    "residual_add_f32",
    "rope_fp32_bf16",
    "rope_table_bf16",
    "attn_fwd_global_bf16",
    "attn_fwd_local_bf16",
    "readout_scores_f32",
    "readout_heads_f32",
}


def test_build_writes_every_entry_point(built_bundle):
    from bundle.nvcc import exported_symbols

    m = Manifest.read(built_bundle)
    assert set(m.entries) == ENTRY_POINTS
    assert m.tile_config == "optimized" and m.arch == "sm_90a"
    assert m.versions["tilelang"] == "0.1.14" and m.versions["nvcc"]
    exported = exported_symbols(built_bundle / LIBRARY)
    for entry in m.entries.values():
        for tier in entry.tiers:
            assert {tier.init, tier.call, tier.last_error} <= exported
            assert (built_bundle / "src" / f"{tier.symbol}.cu").is_file()


def test_library_needs_no_driver_and_no_tilelang(built_bundle):
    dynamic = subprocess.run(
        ["objdump", "-p", str(built_bundle / LIBRARY)], capture_output=True, text=True, check=True
    ).stdout
    needed = {line.split()[1] for line in dynamic.splitlines() if line.strip().startswith("NEEDED")}
    assert not {n for n in needed if "cuda" in n or "tvm" in n or "tilelang" in n}, needed


def test_kernel_code_is_hopper_code(built_bundle):
    source = (built_bundle / "src" / "laya_gemm_qkv_bf16_t2.cu").read_text()
    assert "wgmma" in source and "CUtensorMap" in source


def test_verify_accepts_an_untouched_bundle(bundle_copy):
    bundle, checkpoint = bundle_copy
    assert verify(bundle, checkpoint) == []
    assert verify_main(checkpoint=checkpoint, bundle=bundle) == 0


def test_tables_and_their_record(exported_bundle):
    import json

    described = json.loads((exported_bundle / TABLES_JSON).read_text())
    assert described["shape"] == [512, 64] and described["rounding_dtype"] == "bfloat16"
    assert set(described["files"]) == set(TABLE_FILES.values())
    assert set(described["checkpoint"]) == set(ARTIFACTS)
    for name in TABLE_FILES.values():
        assert (exported_bundle / name).stat().st_size == 512 * 64 * 4


TAMPERED = [MANIFEST, LIBRARY, TABLES_JSON, *TABLE_FILES.values()]


@pytest.mark.parametrize("name", TAMPERED + [f"checkpoint:{a}" for a in ARTIFACTS])
def test_one_changed_byte_is_refused_naming_the_file(bundle_copy, name, capsys):
    bundle, checkpoint = bundle_copy
    path = checkpoint / name.split(":", 1)[1] if name.startswith("checkpoint:") else bundle / name
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0x01
    path.write_bytes(raw)
    found = verify(bundle, checkpoint)
    assert found, f"a changed byte in {path} went unnoticed"
    assert any(m.file.startswith(str(path)) for m in found), [str(m) for m in found]
    assert verify_main(checkpoint=checkpoint, bundle=bundle) == 1
    assert str(path) in capsys.readouterr().err


def test_the_cuda_engine_names_a_changed_checkpoint_file_before_anything_parses_it(bundle_copy):
    from worker.engine.engine import Engine
    from worker.engine.executors import ExecutorOptions
    from worker.engine.executors.cuda import BundleRefused

    bundle, checkpoint = bundle_copy
    path = checkpoint / "tokenizer" / "tokenizer_config.json"
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0x01  # as recipe.faults does: the JSON no longer parses
    path.write_bytes(raw)
    with pytest.raises(BundleRefused, match=str(path)):  # not the JSONDecodeError of reading it
        Engine(checkpoint, executor="cuda", options=ExecutorOptions(bundle=bundle))


def test_missing_file_is_refused(bundle_copy):
    bundle, checkpoint = bundle_copy
    (bundle / "rope_local_sin.f32").unlink()
    assert [str(m) for m in verify(bundle, checkpoint)] == [f"{bundle / 'rope_local_sin.f32'}: missing"]


def test_bundle_without_tables_is_refused(built_bundle, tiny_checkpoint):
    found = verify(built_bundle, tiny_checkpoint)
    assert any("export-tables" in m.problem for m in found)


def test_checkpoint_of_other_dimensions_is_refused(bundle_copy, tmp_path):
    from worker.commands.synthesize import synthesize

    bundle, _ = bundle_copy
    other = synthesize(tmp_path / "alt", size="tiny-alt", seed=0)
    found = verify(bundle, other)
    assert any("compiled for" in m.problem and "encoder/config.json" in m.file for m in found)


def test_loader_refuses_a_changed_library_before_loading(bundle_copy):
    from bundle.loader import BundleError, Kernels

    bundle, _ = bundle_copy
    path = bundle / LIBRARY
    raw = bytearray(path.read_bytes())
    raw[-100] ^= 0x01
    path.write_bytes(raw)
    with pytest.raises(BundleError, match=LIBRARY):
        Kernels(bundle)


def test_loader_resolves_every_symbol_and_init_needs_a_gpu(exported_bundle):
    import torch

    from bundle.loader import KernelError, Kernels

    kernels = Kernels(exported_bundle)  # opens the library and resolves every symbol, no CUDA call
    assert set(dir(kernels)) >= ENTRY_POINTS
    if not torch.cuda.is_available():
        with pytest.raises(KernelError, match="_init"):
            kernels.init()


def test_a_sweep_candidate_holds_only_its_entries_with_its_tiers(tmp_path, capsys):
    from bundle.build import CANDIDATE_CONFIG, main
    from worker.commands import bundle_cli

    tier = {"max_m": None, "block_M": 128, "block_N": 16, "block_K": 64, "num_stages": 2, "threads": 128}
    shared = {**tier, "max_m": 4096, "block_N": 32, "store": "shared", "swizzle": 4}
    assert main(out=tmp_path / "c", model="tiny", candidates={"gemm_geglu_bf16": [shared, tier]}) == 0
    manifest = Manifest.read(tmp_path / "c")
    assert manifest.tile_config == CANDIDATE_CONFIG
    assert list(manifest.entries) == ["gemm_geglu_bf16"]
    tiers = manifest.entries["gemm_geglu_bf16"].tiers
    assert [t.max_m for t in tiers] == [4096, None]
    assert tiers[0].tiles == {k: v for k, v in shared.items() if k != "max_m"}
    source = (tmp_path / "c" / "src" / f"{tiers[0].symbol}.cu").read_text()
    assert "tma_store" in source  # the shared-memory epilogue writes C with TMA

    assert main(out=tmp_path / "d", model="tiny", candidates={"gemm_nonexistent": [tier]}) == 1
    assert "unknown GEMM or attention entry points: gemm_nonexistent" in capsys.readouterr().err

    attention = {"max_m": None, "block_M": 128, "block_N": 64, "num_stages": 2, "threads": 256, "blocks_per_sm": 2}
    assert main(out=tmp_path / "a", model="tiny", candidates={"attn_fwd_local_bf16": [attention]}) == 0
    (entry,) = Manifest.read(tmp_path / "a").entries.values()
    assert (entry.name, entry.family) == ("attn_fwd_local_bf16", "attention")
    assert entry.tiers[0].tiles == {k: v for k, v in attention.items() if k != "max_m"}
    source = (tmp_path / "a" / "src" / f"{entry.tiers[0].symbol}.cu").read_text()
    # two blocks an SM: 80 registers a thread at launch (65536 / (2 x 384), to a multiple of 8); the producer
    # warpgroup gives back (80 - 24) x 128 and the two consumer warpgroups take (104 - 80) x 256, no more
    assert "__launch_bounds__(384, 2)" in source
    assert "warpgroup_reg_dealloc<24>" in source and "warpgroup_reg_alloc<104>" in source

    # three blocks of 64-query tiles an SM: 80 registers a thread at launch (65536 / (3 x 256)); the consumer
    # warpgroup takes what the producer gives back, (80 - 24) x 128, to 136
    three = {**attention, "block_M": 64, "threads": 128, "blocks_per_sm": 3}
    assert main(out=tmp_path / "b", model="tiny", candidates={"attn_fwd_global_bf16": [three]}) == 0
    (entry,) = Manifest.read(tmp_path / "b").entries.values()
    source = (tmp_path / "b" / "src" / f"{entry.tiers[0].symbol}.cu").read_text()
    assert "__launch_bounds__(256, 3)" in source
    assert "warpgroup_reg_dealloc<24>" in source and "warpgroup_reg_alloc<136>" in source

    four = {**three, "blocks_per_sm": 4}
    assert main(out=tmp_path / "f", model="tiny", candidates={"attn_fwd_local_bf16": [four]}) == 1
    assert "blocks_per_sm must be 1, 2 or 3, not 4" in capsys.readouterr().err

    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert bundle_cli.main(["build", str(tmp_path / "e"), "--model", "tiny", "--candidates", str(bad)]) == 2
    assert f"--candidates {bad}" in capsys.readouterr().err
    assert not (tmp_path / "e").exists()


def test_a_prefetching_tier_fetches_its_weights_before_the_wait(tmp_path, capsys):
    from bundle.build import main

    qkv = {"max_m": None, "block_M": 64, "block_N": 24, "block_K": 64, "num_stages": 2, "threads": 128}
    geglu = {**qkv, "block_N": 16, "store": "shared", "joint": True}
    candidates = {"gemm_qkv_bf16": [{**qkv, "prefetch": True}], "gemm_geglu_bf16": [{**geglu, "prefetch": True}]}
    assert main(out=tmp_path / "c", model="tiny", candidates=candidates) == 0
    for entry in Manifest.read(tmp_path / "c").entries.values():
        source = (tmp_path / "c" / "src" / f"{entry.tiers[0].symbol}.cu").read_text()
        body = source[source.index("__launch_bounds__") :]
        weight_load = "(Wi + " if "geglu" in entry.name else "tma_load(W_desc"  # GeGLU's halves: plain loads
        assert body.index(weight_load) < body.index("cudaGridDependencySynchronize")

    swizzled = {"gemm_geglu_bf16": [{**geglu, "prefetch": True, "swizzle": 10}]}
    assert main(out=tmp_path / "d", model="tiny", candidates=swizzled) == 1
    assert "no swizzle" in capsys.readouterr().err


def test_a_sweep_summary_names_the_fastest_bundle_per_shape():
    from recipe.tile_sweep import summarize

    rows = [
        {"bundle": b, "entry": "gemm_geglu_bf16", "M": m, "median_us": t}
        for b, m, t in [
            ("optimized", "80", "12.0"),
            ("a", "80", "6.0"),
            ("b", "80", "8.0"),
            ("optimized", "8192", "190.0"),
            ("a", "8192", "250.0"),
            ("b", "8192", "200.0"),
        ]
    ]
    by_m = {r["M"]: r for r in summarize(rows, baseline="optimized")}
    assert (by_m[80]["best"], by_m[80]["gain"]) == ("a", 2.0)
    assert (by_m[8192]["best"], by_m[8192]["gain"]) == ("optimized", 1.0)
    assert by_m[8192]["b_us"] == 200.0


def test_a_sweep_summary_of_candidates_for_different_entries_is_one_csv(tmp_path):
    from recipe.tile_sweep import summarize, write_summary

    rows = [
        {"bundle": b, "entry": e, "M": "80", "median_us": t}
        for b, e, t in [
            ("optimized", "gemm_geglu_bf16", "9.0"),
            ("optimized", "gemm_qkv_bf16", "11.0"),
            ("geglu-a", "gemm_geglu_bf16", "8.0"),
            ("qkv-a", "gemm_qkv_bf16", "14.0"),
        ]
    ]
    write_summary(summarize(rows, baseline="optimized"), tmp_path / "sweep.csv")
    with open(tmp_path / "sweep.csv") as f:
        by_entry = {r["entry"]: r for r in csv.DictReader(f)}
    assert (by_entry["gemm_geglu_bf16"]["geglu-a_us"], by_entry["gemm_geglu_bf16"]["qkv-a_us"]) == ("8.0", "")
    assert (by_entry["gemm_qkv_bf16"]["best"], by_entry["gemm_qkv_bf16"]["qkv-a_us"]) == ("optimized", "14.0")


def _sweep_dir(tmp_path, *names):
    for name in names:
        (tmp_path / "sweep" / name).mkdir(parents=True)
        (tmp_path / "sweep" / name / "manifest.json").write_text(json.dumps({"entries": {"gemm_geglu_bf16": {}}}))
    return tmp_path / "sweep"


def test_a_sweep_names_a_candidate_without_timings_and_summarizes_the_rest(tmp_path, monkeypatch, capsys):
    from recipe import tile_sweep

    def time_bundle(bundle, entries, output, *, limit_s):  # the GPU's part: one bundle's kernel_bench
        if bundle.name == "b":
            return f"no timings after {limit_s:g} s (a kernel that never finishes?)"
        output.mkdir(parents=True)
        us = {"optimized": "9.0", "a": "8.0"}[bundle.name]
        (output / "kernel_timings.csv").write_text(f"bundle,entry,M,median_us\n{bundle.name},{entries[0]},80,{us}\n")
        return output / "kernel_timings.csv"

    monkeypatch.setattr(tile_sweep, "time_bundle", time_bundle)
    sweep = _sweep_dir(tmp_path, "a", "b")
    out = tmp_path / "out"
    assert tile_sweep.time_candidates(sweep, baseline=tmp_path / "optimized", output=out) == 0
    assert "b: no timings after 60 s" in capsys.readouterr().err
    assert (out / "failed.txt").read_text() == "b: no timings after 60 s (a kernel that never finishes?)\n"
    with open(out / "sweep.csv") as f:
        (row,) = csv.DictReader(f)
    assert (row["best"], row["a_us"], "b_us" in row) == ("a", "8.0", False)


def test_a_bundle_that_gives_no_timings_says_why(tmp_path):
    from recipe.tile_sweep import time_bundle

    missing = tmp_path / "no-bundle"
    assert time_bundle(missing, ["gemm_geglu_bf16"], tmp_path / "a", limit_s=60) == "kernel_bench exited 1"
    assert time_bundle(missing, ["gemm_geglu_bf16"], tmp_path / "b", limit_s=0.01).startswith("no timings after 0.01 s")
