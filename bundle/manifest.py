"""`manifest.json`: the contract between the bundle build and the runtime that loads the library.

One `Manifest` reads and writes it for both sides. Per entry point it records the declared
argument signature (tensors with dtype and shape, scalar arguments, dynamic dimensions) and one or
more tiers: each tier is one compiled kernel admitting M up to `max_m` rows, with its symbols, tile
values and the sha256 of its generated source. It also records the library's sha256, the tool
versions, the model dimensions the kernels were built for, and, once tables are exported, the
tables' and checkpoint artifacts' hashes.

The file's own integrity: `self_sha256` is the sha256 of the file's bytes with that field's value
replaced by 64 zeros, so any changed byte, that field included, is detected.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from laya_common.model import ModelDims

MANIFEST = "manifest.json"
LIBRARY = "liblaya_kernels.so"
TABLES_JSON = "tables.json"
FORMAT = 1

# C types of the host stub TileLang generates, by dtype name.
C_TYPES = {"bfloat16": "bfloat16_t", "float32": "float", "int32": "int"}

_SELF_FIELD = re.compile(rb'"self_sha256": "([0-9a-f]{64})"')
_ZERO_DIGEST = b"0" * 64


@dataclass(frozen=True)
class Arg:
    """One declared argument: a tensor (dtype, shape of ints and dimension names) or an int32 scalar."""

    name: str
    dtype: str
    shape: tuple[int | str, ...] | None = None  # None: a scalar

    @property
    def is_tensor(self) -> bool:
        return self.shape is not None

    def c_param(self) -> str:
        ctype = C_TYPES[self.dtype]
        return f"{ctype}* __restrict__ {self.name}" if self.is_tensor else f"{ctype} {self.name}"


@dataclass(frozen=True)
class Tier:
    max_m: int | None  # admits M <= max_m; None admits any M
    symbol: str  # prefix of <symbol>_init, <symbol>_call, <symbol>_get_last_error
    tiles: dict
    source_sha256: str

    @property
    def init(self) -> str:
        return f"{self.symbol}_init"

    @property
    def call(self) -> str:
        return f"{self.symbol}_call"

    @property
    def last_error(self) -> str:
        return f"{self.symbol}_get_last_error"


@dataclass(frozen=True)
class EntryPoint:
    name: str
    family: str
    args: tuple[Arg, ...]
    dims: tuple[str, ...]  # dynamic dimensions passed after the arguments, in this order
    tiers: tuple[Tier, ...]

    def c_signature(self) -> list[str]:
        """The parameters of `int call(...)` this declaration implies, in TileLang 0.1.14's convention."""
        names = {a.name for a in self.args}
        dims = [f"int {d}" for d in self.dims if d not in names]
        return [a.c_param() for a in self.args] + dims + ["cudaStream_t stream=cudaStreamDefault"]

    def admits(self, m: int) -> bool:
        """Whether a tier takes M = m (tiers are in increasing max_m; the split-K GEMMs' end at small M)."""
        return self.tiers[-1].max_m is None or m <= self.tiers[-1].max_m

    def tier_for(self, m: int) -> Tier:
        for tier in self.tiers:
            if tier.max_m is None or m <= tier.max_m:
                return tier
        raise ValueError(f"{self.name}: no tier admits M={m}")


@dataclass
class Manifest:
    tile_config: str
    arch: str
    versions: dict  # tilelang, nvcc, ...
    model: ModelDims
    library: dict  # {"file": LIBRARY, "sha256": ...}
    entries: dict[str, EntryPoint]
    tables: dict = field(default_factory=dict)  # file -> {"sha256": ...}, tables.json included
    checkpoint: dict = field(default_factory=dict)  # artifact -> sha256
    format: int = FORMAT

    # ---- reading and writing
    def to_json(self) -> dict:
        d = asdict(self)
        d["entries"] = {name: asdict(e) for name, e in self.entries.items()}
        return {"format": d.pop("format"), "self_sha256": _ZERO_DIGEST.decode(), **d}

    @classmethod
    def from_json(cls, d: dict) -> Manifest:
        if d.get("format") != FORMAT:
            raise ValueError(f"manifest format {d.get('format')!r}, this code reads format {FORMAT}")
        entries = {
            name: EntryPoint(
                name=e["name"],
                family=e["family"],
                args=tuple(
                    Arg(a["name"], a["dtype"], None if a["shape"] is None else tuple(a["shape"])) for a in e["args"]
                ),
                dims=tuple(e["dims"]),
                tiers=tuple(Tier(**t) for t in e["tiers"]),
            )
            for name, e in d["entries"].items()
        }
        return cls(
            tile_config=d["tile_config"],
            arch=d["arch"],
            versions=d["versions"],
            model=ModelDims(**d["model"]),
            library=d["library"],
            entries=entries,
            tables=d.get("tables", {}),
            checkpoint=d.get("checkpoint", {}),
        )

    def write(self, bundle: Path) -> Path:
        """Write `manifest.json` into the bundle directory, sealed with its own digest."""
        text = json.dumps(self.to_json(), indent=2).encode() + b"\n"
        sealed = _SELF_FIELD.sub(f'"self_sha256": "{hashlib.sha256(text).hexdigest()}"'.encode(), text, count=1)
        path = Path(bundle) / MANIFEST
        path.write_bytes(sealed)
        return path

    @classmethod
    def read(cls, bundle: Path) -> Manifest:
        """Read `manifest.json`; ValueError when it is not valid or its bytes do not match its seal."""
        path = Path(bundle) / MANIFEST
        raw = path.read_bytes()
        problem = seal_problem(raw)
        if problem:
            raise ValueError(f"{path}: {problem}")
        return cls.from_json(json.loads(raw))


def seal_problem(raw: bytes) -> str | None:
    """Why these manifest bytes do not match their own `self_sha256`, or None when they do."""
    found = _SELF_FIELD.findall(raw)
    if len(found) != 1:
        return "no self_sha256 field (not a manifest written by laya-bundle, or edited)"
    zeroed = _SELF_FIELD.sub(b'"self_sha256": "' + _ZERO_DIGEST + b'"', raw, count=1)
    actual = hashlib.sha256(zeroed).hexdigest()
    if actual != found[0].decode():
        return f"contents changed since it was written (sha256 {actual[:16]}..., sealed {found[0][:16].decode()}...)"
    return None
