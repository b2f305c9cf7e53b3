"""ctypes access to the bundle's kernels, for the cuda executor and the kernel tests.

`Kernels(bundle)` reads the manifest, checks the library's hash, opens the library and resolves
every declared symbol (a missing one is an ABI error naming it). `kernels.init()` runs each
kernel's `init` (it raises the shared-memory limit: the first CUDA work). `kernels.<entry>(...)`
then checks every argument against the manifest (tensor or int, dtype, shape, contiguity, device)
and launches on torch's current stream, which makes the launch capturable in a CUDA graph: no
allocation, no synchronization, no host-device copy.

This module imports torch and the standard library only: the GPU machine has no TileLang.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import torch

from bundle.manifest import LIBRARY, MANIFEST, EntryPoint, Manifest
from laya_common.checkpoint import sha256_file

TORCH_DTYPES = {"bfloat16": torch.bfloat16, "float32": torch.float32, "int32": torch.int32}


class BundleError(RuntimeError):
    """The bundle cannot be used: library hash or exported symbols differ from the manifest."""


class KernelError(RuntimeError):
    """A kernel's host stub reported an error (its get_last_error text is the message)."""


class Kernels:
    def __init__(self, bundle: Path | str):
        self.bundle = Path(bundle)
        self.manifest = Manifest.read(self.bundle)
        path = self.bundle / self.manifest.library["file"]
        if sha256_file(path) != self.manifest.library["sha256"]:
            raise BundleError(f"{path}: sha256 differs from {self.bundle / 'manifest.json'}; rebuild the bundle")
        self._lib = ctypes.CDLL(str(path))
        self._launchers = {name: Launcher(entry, self._lib, self) for name, entry in self.manifest.entries.items()}
        self.ready = False

    def init(self) -> None:
        """Run every kernel's init() on the current CUDA device; raise KernelError naming the first failure."""
        for launcher in self._launchers.values():
            launcher.init()
        self.ready = True

    def describe(self) -> dict:
        """Which bundle this is: its directory, tile configuration, hashes and build versions."""
        return {
            "path": str(self.bundle),
            "tile_config": self.manifest.tile_config,
            "manifest_sha256": sha256_file(self.bundle / MANIFEST),
            "library_sha256": self.manifest.library["sha256"],
            "versions": self.manifest.versions,
        }

    def __getattr__(self, name: str) -> Launcher:
        try:
            return self.__dict__["_launchers"][name]
        except KeyError:
            raise AttributeError(f"bundle {self.__dict__.get('bundle')} has no entry point {name!r}") from None

    def __dir__(self):
        return [*super().__dir__(), *self._launchers]


class Launcher:
    """One entry point: argument checks, tier choice by M, the launch."""

    def __init__(self, entry: EntryPoint, lib: ctypes.CDLL, owner: Kernels):
        self.entry = entry
        self._owner = owner
        self._extra_dims = [d for d in entry.dims if d not in {a.name for a in entry.args}]
        self._calls = {}  # tier symbol -> (init, call, last_error)
        for tier in entry.tiers:
            try:
                init, call, last_error = (getattr(lib, s) for s in (tier.init, tier.call, tier.last_error))
            except AttributeError as e:
                raise BundleError(f"{LIBRARY} lacks a symbol the manifest declares for {entry.name}: {e}") from None
            init.restype, init.argtypes = ctypes.c_int, []
            last_error.restype, last_error.argtypes = ctypes.c_char_p, []
            call.restype = ctypes.c_int
            call.argtypes = (
                [ctypes.c_void_p if a.is_tensor else ctypes.c_int for a in entry.args]
                + [ctypes.c_int] * len(self._extra_dims)
                + [ctypes.c_void_p]
            )
            self._calls[tier.symbol] = (init, call, last_error)

    def init(self) -> None:
        for tier in self.entry.tiers:
            init, _, last_error = self._calls[tier.symbol]
            if init() != 0:
                raise KernelError(f"{tier.init}: {last_error().decode(errors='replace')}")

    def __call__(self, *args) -> None:
        """Launch with the entry's arguments in manifest order (tensors and ints) on the current stream."""
        self.bind(*args)()

    def bind(self, *args) -> BoundLaunch:
        """Check the arguments once and return a launch of them that can be repeated (or captured) cheaply.

        The tensors' addresses are fixed at binding: the caller keeps them alive and in place.
        """
        if not self._owner.ready:
            raise KernelError("Kernels.init() has not run")
        dims = self.check(args)
        m = dims.get("M", 1)
        tier = self.entry.tier_for(m)
        _, call, last_error = self._calls[tier.symbol]
        c_args = [a.data_ptr() if isinstance(a, torch.Tensor) else int(a) for a in args]
        c_args += [dims[d] for d in self._extra_dims]
        return BoundLaunch(self.entry.name, tier.symbol, call, last_error, tuple(c_args), empty=m == 0)

    def check(self, args: tuple) -> dict[str, int]:
        """Check every argument against the declaration; return the dynamic dimensions' values."""
        name = self.entry.name
        if len(args) != len(self.entry.args):
            want = ", ".join(a.name for a in self.entry.args)
            raise TypeError(f"{name} takes {len(self.entry.args)} arguments ({want}), got {len(args)}")
        device = torch.device("cuda", torch.cuda.current_device())
        dims: dict[str, int] = {}
        for decl, value in zip(self.entry.args, args, strict=True):
            where = f"{name}: argument {decl.name}"
            if not decl.is_tensor:
                if isinstance(value, torch.Tensor) or not isinstance(value, int):
                    raise TypeError(f"{where} must be an int, got {type(value).__name__}")
                dims[decl.name] = value
                continue
            if not isinstance(value, torch.Tensor):
                raise TypeError(f"{where} must be a tensor, got {type(value).__name__}")
            if value.dtype != TORCH_DTYPES[decl.dtype]:
                raise TypeError(f"{where} must be {decl.dtype}, got {value.dtype}")
            if value.device != device:
                raise ValueError(f"{where} must be on {device}, got {value.device}")
            if not value.is_contiguous():
                raise ValueError(f"{where} must be contiguous")
            if value.dim() != len(decl.shape):
                raise ValueError(f"{where} must have shape {list(decl.shape)}, got {list(value.shape)}")
            for want, got in zip(decl.shape, value.shape, strict=True):
                if isinstance(want, str):
                    want = dims.setdefault(want, got)
                if want != got:
                    raise ValueError(f"{where} must have shape {list(decl.shape)} ({dims}), got {list(value.shape)}")
        self._check_layout(dims)
        return dims

    def _check_layout(self, dims: dict[str, int]) -> None:
        """Rows padded to L tokens: M = R * L, and 1 <= L <= max_len (table rows, attention bounds)."""
        if "L" not in dims:
            return
        L, M = dims["L"], dims["M"]
        if not 1 <= L <= self._owner.manifest.model.max_len:
            raise ValueError(f"{self.entry.name}: L={L} outside 1..{self._owner.manifest.model.max_len}")
        if M % L or ("R" in dims and dims["R"] * L != M):
            raise ValueError(f"{self.entry.name}: M={M} tokens are not {dims.get('R', 'whole')} rows of L={L}")


class BoundLaunch:
    """One entry point's launch with checked arguments: calling it launches on torch's current stream."""

    __slots__ = ("entry", "symbol", "_call", "_last_error", "_args", "_empty")

    def __init__(self, entry: str, symbol: str, call, last_error, args: tuple, *, empty: bool) -> None:
        self.entry, self.symbol = entry, symbol
        self._call, self._last_error, self._args, self._empty = call, last_error, args, empty

    def __call__(self) -> None:
        if self._empty:
            return
        if self._call(*self._args, torch.cuda.current_stream().cuda_stream) != 0:
            raise KernelError(f"{self.entry} ({self.symbol}): {self._last_error().decode(errors='replace')}")
