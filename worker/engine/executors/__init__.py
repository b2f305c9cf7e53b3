"""Executors run the model on a Batch and return Outputs; they never see JSON.

An executor subclasses `worker.engine.batch.Executor`: it sets `name` and `admits` and defines `forward` and
`describe`; the rest have defaults it overrides where it has more to offer (the cuda executor launches passes
asynchronously, holds two in flight, captures its graphs in `warmup`, and names its kernels in `mapping`).

`make_executor` builds one by name; "auto" takes the cuda executor when a Hopper GPU and a bundle that
verifies against the checkpoint are both present, and says why it chose what it chose. A name
MODULE:FACTORY calls that factory (cfg, weights, checkpoint=, options=) for an executor of one's own.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from laya_common.model import ModelConfig
from worker.engine.batch import Executor

EXECUTORS = ("reference", "cuda")


@dataclass(frozen=True)
class ExecutorOptions:
    device: str | None = None  # the reference executor's torch device (default: cuda if present, else cpu)
    bundle: Path | None = None  # the cuda executor's bundle directory
    eager: bool = False  # cuda: launch the chain without CUDA graphs
    original_rope: bool = False  # cuda: RoPE from the exported tables, rounded like the reference's bf16 path
    cublas: bool = True  # cuda: let the routing table send GEMMs to cuBLAS
    torch_readout: bool = False  # cuda: the scorer and act head in torch ops instead of the bundle's two kernels
    split_k: bool | None = None  # cuda: the split-K GEMMs at small M as the routing table says, always or never


@dataclass(frozen=True)
class Choice:
    """Which executor a name means here (reference, cuda or MODULE:FACTORY), why, and the cuda executor's kernels
    once its bundle and checkpoint verified."""

    name: str
    why: str
    kernels: object = None


def choose_executor(name: str, checkpoint: Path, options: ExecutorOptions) -> Choice:
    """What `name` means here ("auto" chooses). It reads files only, and verifies the cuda executor's bundle
    against the checkpoint before anything parses the checkpoint: a changed file is then refused by name (a
    changed byte in tokenizer_config.json used to fail as the JSONDecodeError of reading it).

    ValueError (BundleRefused for a bundle that does not verify) when it cannot be had here.
    """
    if ":" in name:
        return Choice(name, f"plugin {name}")
    if name == "auto":
        return Choice(*_auto(checkpoint, options))
    if name not in EXECUTORS:
        raise ValueError(f"unknown executor {name!r}; available: auto, {', '.join(EXECUTORS)}")
    if name == "reference":
        return Choice(name, "asked for")
    if options.bundle is None:
        raise ValueError("the cuda executor needs a bundle directory (laya-run CHECKPOINT BUNDLE, LAYA_CUDA_BUNDLE)")
    from worker.engine.executors.cuda import verified_kernels

    return Choice(name, "asked for", verified_kernels(options.bundle, checkpoint))


def make_executor(
    choice: Choice | str, cfg: ModelConfig, weights: dict, *, checkpoint: Path, options: ExecutorOptions
) -> tuple[Executor, str]:
    """The executor chosen (or called `choice`), and why it is the one ("asked for", or what "auto" found).

    ValueError (BundleRefused for a bundle that does not verify) when it cannot be built here.
    """
    if isinstance(choice, str):
        choice = choose_executor(choice, checkpoint, options)
    if ":" in choice.name:
        return _plugin(choice.name)(cfg, weights, checkpoint=checkpoint, options=options), choice.why
    if choice.name == "reference":
        from worker.engine.executors.reference import ReferenceExecutor

        return ReferenceExecutor(cfg, weights, device=options.device), choice.why
    return _cuda(cfg, weights, options, choice.kernels), choice.why


def _plugin(name: str):
    """The factory a MODULE:FACTORY executor name points at (an executor of one's own, or the fault tests')."""
    import importlib

    module, _, attr = name.partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as e:
        raise ValueError(f"executor {name!r}: {type(e).__name__}: {e}") from None


def _auto(checkpoint: Path, options: ExecutorOptions) -> tuple[str, str, object]:
    """("cuda", why, verified kernels) when both a Hopper GPU and a verified bundle are here, else the reference."""
    if options.bundle is None:
        return "reference", "auto: no bundle given", None
    from worker.engine.executors.cuda import BundleRefused, hopper_problem, verified_kernels

    try:
        kernels = verified_kernels(options.bundle, checkpoint)  # files only: before any CUDA call
    except BundleRefused as e:
        return "reference", f"auto: {e}", None
    import torch

    problem = hopper_problem(torch.device("cuda"))
    if problem:
        return "reference", f"auto: {problem}", None
    return "cuda", f"auto: {torch.cuda.get_device_name()} and bundle {options.bundle} verified", kernels


def _cuda(cfg: ModelConfig, weights: dict, options: ExecutorOptions, kernels) -> Executor:
    """The cuda executor on `kernels`, verified against the checkpoint by `choose_executor`."""
    import torch

    from bundle.export_tables import read_tables
    from worker.engine.executors.cuda import CudaExecutor, hopper_problem
    from worker.engine.executors.gemm_routes import GemmRoutes

    device = torch.device("cuda")
    problem = hopper_problem(device)
    if problem:
        raise ValueError(f"the cuda executor cannot run here: {problem}")
    tables = read_tables(options.bundle, cfg.max_len, cfg.head_dim) if options.original_rope else None
    routes = GemmRoutes.for_bundle(kernels.manifest.tile_config, use_cublas=options.cublas, split_k=options.split_k)
    return CudaExecutor(
        cfg,
        weights,
        kernels=kernels,
        device=device,
        graphs=not options.eager,
        original_rope=options.original_rope,
        routes=routes,
        rope_tables=tables,
        torch_readout=options.torch_readout,
    )
