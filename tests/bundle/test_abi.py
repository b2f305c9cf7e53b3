"""The host-stub ABI check: TileLang's generated stub against the signature the manifest declares."""

import re

import pytest

from bundle.manifest import EntryPoint
from bundle.tl_source import AbiMismatch, check_abi, check_dependent_launches, declared_signature, generate, rename
from kernels import attention, gemm


@pytest.fixture(scope="module")
def gemm_source():
    tier = gemm.TILE_CONFIGS["original"]["gemm_head_out_bias_bf16"][0]
    prim_func = gemm.build("gemm_head_out_bias_bf16", 128, 192, tier)
    args, dims = declared_signature(prim_func)
    entry = EntryPoint("gemm_head_out_bias_bf16", "gemm", args, dims, ())
    return entry, generate(prim_func, pass_configs=gemm.PASS_CONFIGS, arch="sm_90a")


def test_generated_stub_matches_the_declaration(gemm_source):
    entry, source = gemm_source
    check_abi(entry.name, source, entry.c_signature())
    assert [a.name for a in entry.args] == ["A", "W", "Bias", "C"]
    assert entry.dims == ("M",)


def test_scalars_and_second_dynamic_dim_follow_the_buffers():
    prim_func = attention.build(
        "attn_fwd_local_bf16", 2, 64, window=64, tier=attention.TILE_CONFIGS["original"]["attn_fwd_local_bf16"][0]
    )
    args, dims = declared_signature(prim_func)
    entry = EntryPoint("attn_fwd_local_bf16", "attention", args, dims, ())
    source = generate(prim_func, pass_configs=attention.PASS_CONFIGS, arch="sm_90a")
    check_abi(entry.name, source, entry.c_signature())
    assert entry.c_signature()[2:5] == ["int L", "bfloat16_t* __restrict__ O", "int M"]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda s: re.sub(r"(int call\([^)]*)float\* (__restrict__ Bias)", r"\1half_t* \2", s), "parameter 2"),
        (lambda s: s.replace(", int M, cudaStream_t", ", int M, int N, cudaStream_t", 1), "parameter 5"),
        (lambda s: re.sub(r"int call\(bfloat16_t\* __restrict__ A, ", "int call(", s, count=1), "parameter 0"),
        (lambda s: s.replace("TL_EXPORT int init()", "TL_EXPORT int init(int device)", 1), "init"),
        (
            lambda s: s.replace("TL_EXPORT const char* get_last_error()", "TL_EXPORT const char* last_error()", 1),
            "no get_last_error",
        ),
    ],
    ids=["dtype", "extra-dim", "missing-arg", "init-args", "renamed-function"],
)
def test_any_difference_fails_with_a_message(gemm_source, edit, message):
    entry, source = gemm_source
    changed = edit(source)
    assert changed != source
    with pytest.raises(AbiMismatch, match=message):
        check_abi(entry.name, changed, entry.c_signature())


def test_rename_leaves_no_generated_symbol(gemm_source):
    _, source = gemm_source
    renamed = rename(source, "laya_x_t0")
    assert not re.search(r"\bmain_kernel\b", renamed)
    for fn in ("init", "call", "get_last_error"):
        assert f" laya_x_t0_{fn}(" in renamed
        assert not re.search(rf"TL_EXPORT (int|const char\*) {fn}\(", renamed)
    assert "laya_x_t0_kernel" in renamed


def test_every_kernel_waits_for_its_predecessor_before_reading(gemm_source):
    """TileLang's stub launches each kernel before the one before it has finished (programmatic dependent launch):
    a kernel that did not wait would, behind a cuBLAS GEMM that signals early, read its output before it is
    written (seen on the H200: wrong answers in CUDA graphs)."""
    _, source = gemm_source
    assert "programmaticStreamSerializationAllowed = 1;" in source, "premise: TileLang's stub allows it"
    check_dependent_launches(source, "laya_x_t0")
    with pytest.raises(AbiMismatch, match="never waits for its predecessor"):
        check_dependent_launches(source.replace("cudaGridDependencySynchronize();", ""), "laya_x_t0")
    with pytest.raises(AbiMismatch, match="one programmatic-serialization attribute per launch"):
        check_dependent_launches(source.replace("programmaticStreamSerializationAllowed = 1;", ""), "laya_x_t0")


def test_a_warp_specialized_kernel_lets_the_next_start_only_after_its_main_loop(gemm_source):
    """Letting the next kernel start at the top of the GEMMs and attention hung the pass with our accumulating
    GEMMs in it; after the main loop it did not (docs/kernels.md)."""
    _, source = gemm_source
    wait, let_next, registers = (
        "cudaGridDependencySynchronize();",
        "cudaTriggerProgrammaticLaunchCompletion();",
        "warpgroup_reg_alloc<",
    )
    assert registers in source, "premise: the GEMM is warp-specialized"
    assert source.index(wait) < source.index(registers) < source.index(let_next) > source.rindex("wgmma_")
    early = source.replace(let_next, "").replace(wait, wait + "\n  " + let_next)
    with pytest.raises(AbiMismatch, match="lets the next kernel start before its main loop"):
        check_dependent_launches(early, "laya_x_t0")
    check_dependent_launches(source.replace(let_next, ""), "laya_x_t0")  # none: the next starts as this one ends
