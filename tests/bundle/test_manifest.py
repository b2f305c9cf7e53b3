"""manifest.json: the seal over its own bytes, and the signatures it declares."""

import dataclasses
import json

import pytest

from bundle.manifest import Arg, EntryPoint, Manifest, Tier, seal_problem
from laya_common.model import ModelConfig, ModelDims


def _manifest() -> Manifest:
    entry = EntryPoint(
        name="gemm_attn_out_bf16",
        family="gemm",
        args=(Arg("A", "bfloat16", ("M", 128)), Arg("W", "bfloat16", (128, 128)), Arg("C", "bfloat16", ("M", 128))),
        dims=("M",),
        tiers=(
            Tier(max_m=128, symbol="laya_gemm_attn_out_bf16_t0", tiles={"block_N": 16}, source_sha256="0" * 64),
            Tier(max_m=None, symbol="laya_gemm_attn_out_bf16_t1", tiles={"block_N": 256}, source_sha256="1" * 64),
        ),
    )
    return Manifest(
        tile_config="optimized",
        arch="sm_90a",
        versions={"tilelang": "0.1.14", "nvcc": "13.0.88"},
        model=ModelDims.of(ModelConfig.from_preset("tiny")),
        library={"file": "liblaya_kernels.so", "sha256": "2" * 64},
        entries={entry.name: entry},
    )


def test_round_trip(tmp_path):
    m = _manifest()
    m.write(tmp_path)
    again = Manifest.read(tmp_path)
    assert again.entries == m.entries and again.model == m.model


@pytest.mark.parametrize("offset", [10, 200, -40])
def test_any_changed_byte_breaks_the_seal(tmp_path, offset):
    raw = bytearray(_manifest().write(tmp_path).read_bytes())
    assert seal_problem(bytes(raw)) is None
    raw[offset] = ord(" ") if raw[offset] != ord(" ") else ord("\t")
    assert seal_problem(bytes(raw)) is not None
    (tmp_path / "manifest.json").write_bytes(raw)
    with pytest.raises(ValueError, match="manifest.json"):
        Manifest.read(tmp_path)


def test_editing_the_seal_itself_is_detected(tmp_path):
    path = _manifest().write(tmp_path)
    d = json.loads(path.read_bytes())
    text = path.read_text().replace(d["self_sha256"], "f" * 64)
    assert seal_problem(text.encode()) is not None


def test_signature_in_tilelang_convention():
    entry = _manifest().entries["gemm_attn_out_bf16"]
    assert entry.c_signature() == [
        "bfloat16_t* __restrict__ A",
        "bfloat16_t* __restrict__ W",
        "bfloat16_t* __restrict__ C",
        "int M",
        "cudaStream_t stream=cudaStreamDefault",
    ]
    assert entry.tier_for(16).symbol.endswith("_t0")
    assert entry.tier_for(129).symbol.endswith("_t1")
    assert entry.admits(1 << 20)  # a last tier without a bound takes any M
    small = dataclasses.replace(entry, tiers=entry.tiers[:1])  # tiers that end at M = 128, as the split-K GEMMs'
    assert small.admits(128) and not small.admits(129)
    with pytest.raises(ValueError, match="no tier admits M=129"):
        small.tier_for(129)
