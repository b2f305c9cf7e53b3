"""The cuda executor: the bundle's kernels on a Hopper GPU, one CUDA graph per shape bucket.

It runs the chain of one pass (worker/engine/executors/chain.py) on the weights and workspaces it keeps on
the device (device_weights.py). For each bucket (rows exactly, tokens padded to TOKEN_STEP) the chain is bound
once (arguments checked, pointers fixed) and captured into a CUDA graph, at warmup or on first use; a request
then copies its inputs into the static input buffer from a pinned slot and replays. The scorer at the option
markers, the act head and the readback run after the replay, outside capture, in fp32: the bundle's two
readout kernels (or torch's ops, with `torch_readout`). Two passes may be in flight, each with its own pinned
slot.

Nothing here imports TileLang: the kernels come from the bundle's library through `bundle.loader`.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor

from laya_common.contract import LIMITS
from laya_common.model import ModelConfig
from worker.engine.batch import Admits, Batch, Executor, Outputs
from worker.engine.executors.chain import Chain, Step, partials_size, split_entries_lacking
from worker.engine.executors.device_weights import DeviceWeights, Workspaces
from worker.engine.executors.gemm_routes import CUBLAS, GemmRoutes
from worker.engine.executors.readout import INPUT_DTYPES, KernelReadout, Readout, host_inputs

log = logging.getLogger("laya.executor")

MAX_ROWS = LIMITS["max_questions"]  # rows per forward pass: a request's rows (one per question) fit one
TOKEN_STEP = 16  # rows are padded to a multiple of this many tokens: max_len / 16 buckets per row count
MIB = 1 << 20
MAX_BOUND = 4096  # input and output layouts kept per rows x tokens x markers; past it the table starts over


class BundleRefused(ValueError):
    """The bundle does not verify against the checkpoint; the message names every file that differs."""


def verified_kernels(bundle: Path | str, checkpoint: Path | str):
    """The bundle's kernels, after `bundle.verify` accepted bundle and checkpoint (files only: no CUDA yet)."""
    from bundle.loader import Kernels
    from bundle.verify import verify

    found = verify(bundle, checkpoint)
    if found:
        raise BundleRefused(f"bundle {bundle} refused: " + "; ".join(map(str, found)))
    return Kernels(bundle)


def hopper_problem(device: torch.device) -> str | None:
    """Why the bundle's sm_90a kernels cannot run on `device`, or None when they can."""
    if device.type != "cuda":
        return f"device {device} is not a CUDA device"
    if not torch.cuda.is_available():
        return "no CUDA GPU is visible"
    major, minor = torch.cuda.get_device_capability(device)
    if (major, minor) != (9, 0):
        return f"{torch.cuda.get_device_name(device)} is sm_{major}{minor}; the bundle holds sm_90a code (H100/H200)"
    return None


PASSES_IN_FLIGHT = 2  # launched, unread passes: while the host works the GPU runs one with the next queued


class _Slot:
    """The pinned host buffers of one pass in flight (its inputs' staging, its outputs' landing) and the GPU
    events around it. A slot is reused only after its pass's result was read, so the GPU is done with both."""

    def __init__(self, n_inputs: int, n_outputs: int, device: torch.device) -> None:
        cuda = device.type == "cuda"
        self.staging = torch.zeros(n_inputs, dtype=torch.int32, pin_memory=cuda)
        self.host = self.staging.numpy()
        self.landing = torch.zeros(n_outputs, dtype=torch.float32, pin_memory=cuda)
        self.events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) if cuda else None
        self.in_flight = False


class _Bound(NamedTuple):
    """What a pass of R rows of L tokens with K option markers copies and reads, fixed by that shape: each input
    part's place in the staging buffer, the input copy's source (per slot) and destination, the readout's
    arguments and the outputs' landing (per slot). Made once per shape: a launch's views cost microseconds
    each on the host, and the host's launching is what a short request waits for."""

    layout: list[tuple[int, int]]
    staged: list[Tensor]
    inputs: Tensor
    readout_args: tuple[Tensor, ...]
    landings: list[Tensor]


class PendingPass:
    """A forward pass launched on the GPU; `result()` waits for it and returns its Outputs."""

    def __init__(self, executor: CudaExecutor, slot: _Slot, landing: Tensor, n_markers: int) -> None:
        self._executor, self._slot, self._landing, self._k = executor, slot, landing, n_markers

    def result(self) -> Outputs:
        with self._executor.failing_for_good():
            return self._executor._collect(self._slot, self._landing, self._k)


class CudaExecutor(Executor):
    name = "cuda"
    passes_in_flight = PASSES_IN_FLIGHT

    def __init__(
        self,
        cfg: ModelConfig,
        weights: dict[str, Tensor],
        *,
        kernels,
        device: str | torch.device = "cuda",
        graphs: bool = True,
        original_rope: bool = False,
        routes: GemmRoutes | None = None,
        rope_tables: dict[str, tuple[Tensor, Tensor]] | None = None,
        torch_readout: bool = False,
    ) -> None:
        """`kernels`: a loaded `bundle.loader.Kernels` (its `init()` runs here, the first CUDA work).

        `rope_tables` (kind -> cos, sin as [max_len, head_dim] fp32) are needed with `original_rope`.
        `torch_readout`: the scorer and act head in torch ops (about 20 launches) instead of two kernels.
        """
        self.cfg, self.kernels = cfg, kernels
        self.device = torch.device(device)
        self.graphs = graphs and self.device.type == "cuda"
        self.admits = Admits(max_rows=MAX_ROWS, max_tokens=cfg.max_len, token_step=TOKEN_STEP)
        self.routes = routes or GemmRoutes.for_bundle(kernels.manifest.tile_config)
        if lacking := split_entries_lacking(self.routes, kernels.manifest.entries):
            where = kernels.describe()["path"]
            raise BundleRefused(f"bundle {where} has no {', '.join(lacking)} for the split-K routes: rebuild it")
        self.rope_entry = "rope_table_bf16" if original_rope else "rope_fp32_bf16"
        if original_rope and rope_tables is None:
            raise ValueError("original RoPE reads the bundle's exported tables; none were given")
        kernels.init()
        allocated0 = self._allocated()
        self.weights = DeviceWeights(cfg, weights, self.device)
        if torch_readout:
            self.readout = Readout(self.weights.scorer, self.weights.act_head)
        elif "readout_scores_f32" not in kernels.manifest.entries:
            where = kernels.describe()["path"]
            raise BundleRefused(f"bundle {where} has no readout kernels: rebuild it (laya-bundle build)")
        else:
            self.readout = KernelReadout(
                kernels,
                self.weights.scorer,
                self.weights.act_head,
                max_markers=MAX_ROWS * cfg.max_len,
                max_rows=MAX_ROWS,
            )
        max_tokens = MAX_ROWS * cfg.max_len
        geglu_on_cublas = any(
            self.routes.route("gemm_geglu_bf16", r * t) == CUBLAS
            for r in range(1, MAX_ROWS + 1)
            for t in self._token_buckets()
        )
        self.ws = Workspaces(
            cfg,
            max_tokens,
            self.device,
            geglu_on_cublas=geglu_on_cublas,
            partials=partials_size(kernels.manifest) if self.routes.split_ranges else 0,  # none held where unused
        )
        # per request: ids (M) | lengths (R) | qtype (R), then the readout's at (R*K) | keep (R*K) | bias (R*K) |
        # log_k (R) | k_feature (R); 32-bit words, float32 ones by their bits
        n_inputs = max_tokens + 4 * MAX_ROWS + 3 * MAX_ROWS * cfg.max_len
        self.inputs = torch.zeros(n_inputs, dtype=torch.int32, device=self.device)
        n_outputs = MAX_ROWS * (cfg.max_len + cfg.n_act)  # logits at every marker, then the act head's softmax
        self._slots = [_Slot(n_inputs, n_outputs, self.device) for _ in range(PASSES_IN_FLIGHT)]
        self._next_slot = 0
        self._bound: dict[tuple[int, int, int], _Bound] = {}
        self.chain = Chain(
            cfg,
            kernels,
            self.weights,
            self.ws,
            self.inputs,
            self.routes,
            rope_entry=self.rope_entry,
            rope=self._rope_arguments(rope_tables),
        )
        self._bytes_resident = self._allocated() - allocated0
        self._plans: dict[tuple[int, int], list[Step]] = {}
        self._graphs: dict[tuple[int, int], torch.cuda.CUDAGraph] = {}
        self._pool = torch.cuda.graph_pool_handle() if self.graphs else None
        # one capture stream: torch keeps a cuBLAS workspace per stream, so a stream per capture would hold many
        self._capture_stream = torch.cuda.Stream(self.device) if self.graphs else None
        self.failed: str | None = None

    # ---- the forward pass

    def forward(self, batch: Batch) -> Outputs:
        return self.launch(batch).result()

    @torch.no_grad()
    def launch(self, batch: Batch) -> PendingPass:
        """Start a forward pass on the GPU and return at once; `result()` waits for its outputs. Two passes
        may be in flight, so the host prepares and decodes one while the GPU runs the other."""
        if self.failed:
            raise RuntimeError(f"this executor failed earlier and answers nothing more ({self.failed})")
        if self._slots[self._next_slot].in_flight:
            raise RuntimeError(f"{PASSES_IN_FLIGHT} passes are in flight already; wait for one's result first")
        with self.failing_for_good():
            return self._launch(batch)

    @contextlib.contextmanager
    def failing_for_good(self) -> Iterator[None]:
        """Any error inside fails this executor: a CUDA error can be sticky, so no later request may run on
        this context."""
        try:
            yield
        except Exception as e:
            self.failed = f"{type(e).__name__}: {e}"
            raise

    def _launch(self, batch: Batch) -> PendingPass:
        R, L = batch.ids.shape
        K = batch.marker_pos.shape[1]
        if R > MAX_ROWS or self.admits.width(L) != L:
            raise ValueError(f"batch of {R}x{L} is outside the admitted buckets ({self.admits})")
        index = self._next_slot
        slot = self._slots[index]
        self._next_slot = (index + 1) % PASSES_IN_FLIGHT
        parts = (batch.ids, batch.lengths, batch.qtype, *host_inputs(batch))
        bound = self._bound.get((R, L, K)) or self._bind(R, L, K, [part.size for part in parts])
        for part, (start, end) in zip(parts, bound.layout, strict=True):
            slot.host[start:end] = part.ravel().view(np.int32)
        bound.inputs.copy_(bound.staged[index], non_blocking=True)
        if slot.events:
            slot.events[0].record()
        self._run(R, L)
        out = self.readout(*bound.readout_args)
        landing = bound.landings[index]
        landing.copy_(out, non_blocking=True)
        if slot.events:
            slot.events[1].record()  # after the readback: executor time runs from the input copy to the answers
        slot.in_flight = True
        return PendingPass(self, slot, landing, K)

    def _bind(self, R: int, L: int, K: int, sizes: list[int]) -> _Bound:
        """The views of a pass of this shape, whose input parts have these sizes (R, L and K fix them)."""
        ends = np.cumsum(sizes).tolist()
        layout = list(zip([0, *ends[:-1]], ends, strict=True))
        h = self.ws.view("X", R * L).view(R, L, -1)  # the decision head's output stream, fp32
        readout_inputs = [
            self.inputs[start:end] if dtype == np.int32 else self.inputs[start:end].view(torch.float32)
            for dtype, (start, end) in zip(INPUT_DTYPES, layout[3:], strict=True)
        ]
        n, columns = ends[-1], K + self.cfg.n_act
        if len(self._bound) >= MAX_BOUND:
            self._bound.clear()
        bound = self._bound[(R, L, K)] = _Bound(
            layout=layout,
            staged=[slot.staging[:n] for slot in self._slots],
            inputs=self.inputs[:n],
            readout_args=(h, *readout_inputs),
            landings=[slot.landing[: R * columns].view(R, columns) for slot in self._slots],
        )
        return bound

    def _collect(self, slot: _Slot, landing: Tensor, K: int) -> Outputs:
        gpu_ms = None
        if slot.events:
            slot.events[1].synchronize()  # a kernel error surfaces here
            gpu_ms = slot.events[0].elapsed_time(slot.events[1])
        out = landing.numpy()
        slot.in_flight = False
        return Outputs(out[:, :K].copy(), out[:, K:].copy(), gpu_ms)

    def _run(self, R: int, L: int) -> None:
        key = (R, L)
        if not self.graphs:
            for step in self.plan(key):
                step()
            return
        graph = self._graphs.get(key)
        if graph is None:  # a bucket the warmup did not capture: this pass waits for its capture
            t0 = time.perf_counter()
            graph = self._capture(key)
            log.info(
                "laya executor: captured %dx%d on first use in %.1f ms (%d graphs)",
                R,
                L,
                1e3 * (time.perf_counter() - t0),
                len(self._graphs),
            )
        graph.replay()

    def _capture(self, key: tuple[int, int]) -> torch.cuda.CUDAGraph:
        steps = self.plan(key)
        stream = self._capture_stream
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for step in steps:  # once outside capture: cuBLAS handles and workspaces exist before it
                step()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self._pool, stream=stream):
            for step in steps:
                step()
        self._graphs[key] = graph
        return graph

    def warmup(self, buckets: list[tuple[int, int]] | None = None, *, every_bucket: bool = False) -> None:
        """Capture `buckets` now; by default the common ones: one row at every length (a sync request's one
        question), every row count at max_len (long states), and full passes at every length (batch scoring
        packs rows sorted by length, so its passes are full but each window's last). `every_bucket`: every row
        count at every length, so that no request waits for a capture (a batch's first window-ending passes
        and a sync request of 2-15 questions would; 10-30 ms each on the H200)."""
        lengths = self._token_buckets()
        if every_bucket:
            buckets = [(r, t) for t in lengths for r in range(1, MAX_ROWS + 1)]
        elif buckets is None:
            buckets = list(
                dict.fromkeys(
                    [(1, t) for t in lengths]
                    + [(r, self.cfg.max_len) for r in range(2, MAX_ROWS + 1)]
                    + [(MAX_ROWS, t) for t in lengths]
                )
            )
        for R, L in buckets:
            if (R, L) in self._graphs or (not self.graphs and (R, L) in self._plans):
                continue
            self._prime_inputs(R, L)
            if self.graphs:
                self._capture((R, L))
            else:
                for step in self.plan((R, L)):
                    step()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def _prime_inputs(self, R: int, L: int) -> None:
        """Valid inputs for a bucket run without a request: token 0 everywhere, full rows, type 0."""
        M = R * L
        self.inputs[: M + 2 * R].zero_()
        self.inputs[M : M + R].fill_(L)

    # ---- the chain of launches

    def plan(self, key: tuple[int, int]) -> list[Step]:
        """Every launch of a pass over the (rows, tokens) bucket `key`, bound to the static buffers (built once a
        bucket); the profiling recipes time and profile these steps one by one."""
        steps = self._plans.get(key)
        if steps is None:
            steps = self._plans[key] = self.chain.steps(*key)
        return steps

    def _rope_arguments(self, tables: dict[str, tuple[Tensor, Tensor]] | None) -> dict[str, tuple[Tensor, ...]]:
        """Per layer kind, the arguments between QKV and L of the chosen RoPE entry point."""
        if self.rope_entry == "rope_table_bf16":
            return {
                kind: tuple(t.to(self.device, torch.float32).contiguous() for t in tables[kind])
                for kind in ("global", "local")
            }
        from laya_common.rope import inv_freq

        thetas = {"global": self.cfg.global_theta, "local": self.cfg.local_theta}
        return {kind: (inv_freq(theta, self.cfg.head_dim).to(self.device),) for kind, theta in thetas.items()}

    def _token_buckets(self) -> list[int]:
        steps = list(range(TOKEN_STEP, self.cfg.max_len, TOKEN_STEP))
        return steps + [self.cfg.max_len]

    # ---- what it holds and runs

    def _allocated(self) -> int:
        return torch.cuda.memory_allocated(self.device) if self.device.type == "cuda" else 0

    def memory(self) -> dict:
        """Device MiB held: weights, workspaces (inputs included), and what the process allocated beyond them
        (graph pools, cuBLAS workspaces, the readout's cached temporaries; any other torch user in the process
        counts there too). Read at startup, after the warmup's captures."""
        weights, workspaces = self.weights.nbytes(), self.ws.nbytes() + self.inputs.numel() * 4
        held = {"weights_mib": weights / MIB, "workspaces_mib": workspaces / MIB, "graphs": len(self._graphs)}
        if self.device.type == "cuda":
            held["graphs_and_cublas_mib"] = max(0, self._allocated() - self._bytes_resident) / MIB
            held["reserved_mib"] = torch.cuda.memory_reserved(self.device) / MIB
        return {k: round(v, 1) if isinstance(v, float) else v for k, v in held.items()}

    def mapping(self) -> dict[str, dict[str, str]]:
        """Per bucket bound so far ("RxL"), what runs each entry point: a bundle kernel symbol or cublas."""
        return {f"{R}x{L}": {step.entry: step.impl for step in steps} for (R, L), steps in sorted(self._plans.items())}

    def describe(self) -> dict:
        """What this executor is, for the startup line, the heartbeat record and /info."""
        return {
            "executor": self.name,
            "device": torch.cuda.get_device_name(self.device) if self.device.type == "cuda" else str(self.device),
            "bundle": self.kernels.describe(),
            "graphs": self.graphs,
            "rope": self.rope_entry,
            "readout": "torch" if isinstance(self.readout, Readout) else "kernels",
            "gemm_routes": self.routes.summary(),
            "admits": {
                "max_rows": self.admits.max_rows,
                "max_tokens": self.admits.max_tokens,
                "token_step": self.admits.token_step,
            },
            "memory": self.memory(),
        }
