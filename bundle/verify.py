"""`laya-bundle verify CHECKPOINT BUNDLE`, and `verify()` for the worker before it touches CUDA.

Checks, naming the file for each difference: the manifest's seal (any changed byte of
manifest.json), the library, the four RoPE tables and tables.json against the manifest's hashes,
the five checkpoint artifacts against the hashes recorded at table export, that the checkpoint's
model dimensions are those the kernels were compiled for, and that the manifest was written for
the host-stub convention this loader speaks. Reading files only: no CUDA, no TileLang.
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from bundle.export_tables import TABLE_FILES
from bundle.manifest import MANIFEST, TABLES_JSON, Manifest
from laya_common.checkpoint import AGENT_CONFIG, ARTIFACTS, ENCODER_CONFIG, sha256_file
from laya_common.model import ModelConfig, ModelDims

TILELANG_ABI = "0.1.14"  # the version whose host stub (init/call/get_last_error) the loader calls
REQUIRED_TABLES = (*TABLE_FILES.values(), TABLES_JSON)


@dataclass(frozen=True)
class Mismatch:
    file: str  # path of the file that differs
    problem: str

    def __str__(self) -> str:
        return f"{self.file}: {self.problem}"


def verify(bundle: Path | str, checkpoint: Path | str) -> list[Mismatch]:
    """Every way the bundle and checkpoint differ from what the manifest records; empty means usable."""
    bundle, checkpoint = Path(bundle), Path(checkpoint)
    try:
        manifest = Manifest.read(bundle)
    except FileNotFoundError:
        return [Mismatch(str(bundle / MANIFEST), "missing; run `laya-bundle build`")]
    except (ValueError, KeyError, TypeError) as e:
        return [Mismatch(str(bundle / MANIFEST), f"unusable: {e}")]

    found = []
    if manifest.versions.get("tilelang") != TILELANG_ABI:
        found.append(
            Mismatch(
                str(bundle / MANIFEST),
                f"built with TileLang {manifest.versions.get('tilelang')}, "
                f"the loader speaks the host stub of {TILELANG_ABI}",
            )
        )
    found += _hashes(bundle, {manifest.library["file"]: manifest.library["sha256"]})
    missing_tables = [name for name in REQUIRED_TABLES if name not in manifest.tables]
    if missing_tables:
        found.append(
            Mismatch(str(bundle / MANIFEST), f"records no {', '.join(missing_tables)}; run `laya-bundle export-tables`")
        )
    found += _hashes(bundle, {name: t["sha256"] for name, t in manifest.tables.items()})
    if set(manifest.checkpoint) != set(ARTIFACTS):
        found.append(
            Mismatch(
                str(bundle / MANIFEST),
                "records no hashes of the five checkpoint artifacts; run `laya-bundle export-tables`",
            )
        )
    found += _hashes(checkpoint, manifest.checkpoint)
    found += _model_dims(checkpoint, manifest.model)
    return found


def _hashes(root: Path, expected: dict[str, str]) -> list[Mismatch]:
    found = []
    for name, digest in expected.items():
        path = root / name
        if not path.is_file():
            found.append(Mismatch(str(path), "missing"))
        elif (actual := sha256_file(path)) != digest:
            found.append(Mismatch(str(path), f"sha256 {actual[:16]}... differs from the recorded {digest[:16]}..."))
    return found


def _model_dims(checkpoint: Path, built_for: ModelDims) -> list[Mismatch]:
    try:
        dims = ModelDims.of(ModelConfig.from_checkpoint(checkpoint))
    except (FileNotFoundError, ValueError, KeyError) as e:
        return [Mismatch(str(checkpoint / ENCODER_CONFIG), f"unreadable model configuration: {e}")]
    diff = {k: (v, getattr(dims, k)) for k, v in asdict(built_for).items() if getattr(dims, k) != v}
    if not diff:
        return []
    text = ", ".join(f"{k} {want} (checkpoint: {got})" for k, (want, got) in diff.items())
    return [Mismatch(f"{checkpoint / ENCODER_CONFIG} + {AGENT_CONFIG}", f"kernels were compiled for {text}")]


def main(*, checkpoint: Path, bundle: Path) -> int:
    found = verify(bundle, checkpoint)
    for m in found:
        print(f"laya-bundle verify: {m}", file=sys.stderr)
    if found:
        print(f"laya-bundle verify: refused: {len(found)} difference(s)", file=sys.stderr)
        return 1
    print(f"{bundle}: library, manifest, tables and checkpoint {checkpoint} verified")
    return 0
