"""`laya-bundle export-tables CHECKPOINT OUT`: the four RoPE tables (laya_common.rope), `tables.json`, and the hashes.

Tables are computed as transformers' ModernBERT computes them under bf16 autocast: inv_freq on the
CPU at model construction, positions x inv_freq as an fp32 matmul and cos/sin on the device that
runs the model, cat(freqs, freqs), then cast to bf16. We store those bf16 values widened to fp32
([max_len, head_dim] each, little-endian), computed on the GPU when one is present, since cos/sin
there can differ from the CPU's in the last bit and so round to another bf16.

The manifest then records the sha256 of each table, of `tables.json` and of the five checkpoint
artifacts, and is sealed again.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from bundle.manifest import TABLES_JSON, Manifest
from laya_common.checkpoint import artifact_hashes, sha256_file
from laya_common.model import ModelConfig
from laya_common.rope import ROUNDING_DTYPE, rope_tables

KINDS = ("global", "local")
TABLE_FILES = {(kind, fn): f"rope_{kind}_{fn}.f32" for kind in KINDS for fn in ("cos", "sin")}


def read_tables(bundle: Path, max_len: int, head_dim: int) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """The exported tables of a bundle, per kind ("global", "local"): cos, sin as [max_len, head_dim] fp32."""
    import numpy as np

    def table(kind: str, fn: str) -> torch.Tensor:
        values = np.fromfile(Path(bundle) / TABLE_FILES[(kind, fn)], dtype="<f4")
        return torch.from_numpy(values.astype(np.float32).reshape(max_len, head_dim))

    return {kind: (table(kind, "cos"), table(kind, "sin")) for kind in KINDS}


def main(*, checkpoint: Path, out: Path, device: str | None = None) -> int:
    try:
        manifest = Manifest.read(out)
    except FileNotFoundError:
        print(
            f"laya-bundle export-tables: {out} has no manifest.json; run `laya-bundle build {out}` first",
            file=sys.stderr,
        )
        return 1
    config = ModelConfig.from_checkpoint(checkpoint)
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    thetas = {"global": config.global_theta, "local": config.local_theta}
    files = {}
    for kind in KINDS:
        tables = dict(zip(("cos", "sin"), rope_tables(thetas[kind], config.head_dim, config.max_len, dev), strict=True))
        for fn, table in tables.items():
            name = TABLE_FILES[(kind, fn)]
            (Path(out) / name).write_bytes(table.cpu().contiguous().numpy().astype("<f4").tobytes())
            files[name] = {"kind": kind, "function": fn, "theta": thetas[kind], "sha256": sha256_file(Path(out) / name)}
    checkpoint_hashes = artifact_hashes(checkpoint)
    described = {
        "shape": [config.max_len, config.head_dim],
        "dtype": "float32",
        "byte_order": "little",
        "rounding_dtype": str(ROUNDING_DTYPE).removeprefix("torch."),
        "thetas": thetas,
        "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "files": files,
        "checkpoint": checkpoint_hashes,
    }
    (Path(out) / TABLES_JSON).write_text(json.dumps(described, indent=2) + "\n")
    manifest.tables = {name: {"sha256": f["sha256"]} for name, f in files.items()}
    manifest.tables[TABLES_JSON] = {"sha256": sha256_file(Path(out) / TABLES_JSON)}
    manifest.checkpoint = checkpoint_hashes
    manifest.write(out)
    print(f"{out}: 4 RoPE tables [{config.max_len}, {config.head_dim}] computed on {described['device']}")
    return 0
