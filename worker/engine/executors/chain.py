"""The chain of one forward pass on the cuda executor: every launch, in order, bound to the resident weights and
the workspaces. This is what a kernel engineer edits; worker/engine/executors/cuda.py runs it (bound once per
shape bucket, captured into a CUDA graph, replayed per request).

A pass is the embeddings, every encoder layer (QKV, RoPE, attention, the output projection accumulated into the
fp32 stream, norm, GeGLU, the down projection accumulated, norm) and the decision head's layers, as
`docs/kernels.md` describes. At small M an encoder projection into the stream is instead a split-K GEMM whose fp32
slices the norm after it sums into the stream. A GEMM runs on the bundle's kernel or, where the routing table says so
(`gemm_routes`), on cuBLAS through torch inside the same graph; the GEMMs whose output is added to a residual
stream accumulate into it in fp32, on cuBLAS (`cublas_accumulate`) or, where the routing table says so, on the
bundle's accumulating kernels.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from laya_common.model import ModelConfig
from worker.engine.executors.device_weights import DeviceWeights, Workspaces
from worker.engine.executors.gemm_routes import CUBLAS, CUBLAS_ACCUMULATE, TILELANG, GemmRoutes

SPLIT_NORM = "split_add_norm_bias_bf16"  # the norm that sums a split-K GEMM's slices into the stream


def split_entries_lacking(routes: GemmRoutes, entries) -> list[str]:
    """The bundle entries a pass on `routes` runs for split-K GEMMs that `entries` (a manifest's) lacks."""
    if not routes.split_ranges:
        return []
    return sorted({*routes.split_ranges, SPLIT_NORM} - set(entries))


class Chain:
    """The launches of one pass over R rows of L tokens, reading the static input buffer `inputs` (ids, lengths,
    question types) and the weights, writing the workspaces; the decision head's output stream ends in X."""

    def __init__(
        self,
        cfg: ModelConfig,
        kernels,
        weights: DeviceWeights,
        ws: Workspaces,
        inputs: Tensor,
        routes: GemmRoutes,
        *,
        rope_entry: str,
        rope: dict[str, tuple[Tensor, ...]],
    ) -> None:
        """`kernels`: the bundle's loaded kernels; `rope`: per layer kind, the arguments `rope_entry` takes
        between QKV and L."""
        self.cfg, self.kernels, self.weights, self.ws, self.inputs = cfg, kernels, weights, ws, inputs
        self.routes, self.rope_entry, self.rope = routes, rope_entry, rope

    def steps(self, R: int, L: int) -> list[Step]:
        """Every launch of one forward pass over R rows of L tokens, arguments bound to the static buffers."""
        w, ws, M = self.weights, self.ws, R * L
        ids, lens, qtype = self.inputs[:M], self.inputs[M : M + R], self.inputs[M + R : M + 2 * R]
        X, Y, QKV, O = ws.view("X", M), ws.view("Y", M), ws.view("QKV", M), ws.view("O", M)
        G = ws.view("G", M, self.cfg.intermediate_size)
        H = ws.view("G", M, 4 * self.cfg.hidden_size)  # the head's FFN activations share G's buffer
        steps = [self._kernel("embed_norm_bf16", ids, w.embedding, w.embedding_norm, X, Y)]
        for i, layer in enumerate(w.layers):
            kind = "global" if layer.is_global else "local"
            nxt = w.layers[i + 1].attn_norm if i + 1 < len(w.layers) else w.final_norm
            steps += [
                self._gemm("gemm_qkv_bf16", Y, layer.wqkv, QKV),
                self._kernel(self.rope_entry, QKV, *self.rope[kind], L),
                self._kernel(f"attn_fwd_{kind}_bf16", QKV, lens, L, O),
                *self._into_stream("gemm_attn_out", O, layer.wo, X, layer.mlp_norm, Y),
                self._geglu(Y, layer.wi, G),
                *self._into_stream("gemm_mlp_out", G, layer.wo2, X, nxt, Y),
            ]
        # the head's stream starts as bf16(final_norm(x)) + the question type's embedding, in X's buffer
        first = w.head[0]
        steps.append(self._kernel("type_add_norm_bias_bf16", qtype, L, w.type_emb, first.n1_w, first.n1_b, X, Y))
        for j, layer in enumerate(w.head):
            steps += [
                self._gemm("gemm_head_qkv_bias_bf16", Y, layer.in_w, QKV, bias=layer.in_b),
                self._kernel("attn_fwd_global_bf16", QKV, lens, L, O),
                self._accumulate("gemm_head_out_bias_acc_f32", O, layer.out_w, X, bias=layer.out_b),
                self._kernel("norm_bias_bf16", X, layer.n2_w, layer.n2_b, Y),
                self._gemm("gemm_head_ffn1_bias_relu_bf16", Y, layer.l1_w, H, bias=layer.l1_b, relu=True),
                self._accumulate("gemm_head_ffn2_bias_acc_f32", H, layer.l2_w, X, bias=layer.l2_b),
            ]
            if j + 1 < len(w.head):
                nxt = w.head[j + 1]
                steps.append(self._kernel("norm_bias_bf16", X, nxt.n1_w, nxt.n1_b, Y))
        return steps

    def _kernel(self, entry: str, *args) -> Step:
        bound = getattr(self.kernels, entry).bind(*args)
        return Step(entry, bound.symbol, bound)

    def _gemm(
        self, entry: str, A: Tensor, W: Tensor, C: Tensor, *, bias: Tensor | None = None, relu: bool = False
    ) -> Step:
        """C = act(A @ W^T (+ bias)): the bundle's kernel, or cuBLAS where the routing table says so."""
        if self.routes.route(entry, A.shape[0]) != CUBLAS:
            return self._kernel(entry, A, W, *(() if bias is None else (bias,)), C)
        return Step(entry, CUBLAS, cublas_gemm(A, W, C, bias=bias, relu=relu))

    def _accumulate(self, entry: str, A: Tensor, W: Tensor, X: Tensor, *, bias: Tensor | None = None) -> Step:
        """X += A @ W^T (+ bias) into an fp32 stream: cuBLAS (then the bias in its own pass) or, where the routing
        table says so, the bundle's accumulating kernel."""
        if self.routes.route_accumulate(entry, A.shape[0]) == TILELANG:
            return self._kernel(entry, A, W, *(() if bias is None else (bias,)), X)
        return Step(entry, CUBLAS_ACCUMULATE, cublas_accumulate(A, W, X, bias=bias))

    def _into_stream(self, gemm: str, A: Tensor, W: Tensor, X: Tensor, norm: Tensor, Y: Tensor) -> list[Step]:
        """X += A @ W^T, then Y = LayerNorm(X) * norm, in two launches: a split-K GEMM writing fp32 slices and the
        norm that sums them into X where the routing table says so, else the accumulating GEMM and a plain norm."""
        split = f"{gemm}_split_f32"
        if self.routes.split(split, A.shape[0]):  # the executor refuses a bundle without the entries the routes run
            slices, _, n = _partials_shape(self.kernels.manifest.entries[split])
            P = self.ws.partials(slices, A.shape[0], n)
            return [
                self._kernel(split, A, W, P),
                self._kernel(SPLIT_NORM, X, P, norm, self.weights.no_bias, Y),
            ]
        return [
            self._accumulate(f"{gemm}_acc_f32", A, W, X),
            self._kernel("norm_bias_bf16", X, norm, self.weights.no_bias, Y),
        ]

    def _geglu(self, A: Tensor, Wi: Tensor, G: Tensor) -> Step:
        """G = gelu(A @ Wi[:F]^T) * (A @ Wi[F:]^T): the fused kernel, or cuBLAS and one elementwise pass."""
        entry = "gemm_geglu_bf16"
        if self.routes.route(entry, A.shape[0]) != CUBLAS:
            return self._kernel(entry, A, Wi, G)
        return Step(entry, CUBLAS, cublas_geglu(A, Wi, G, self.ws.view("G2", A.shape[0])))


def partials_size(manifest) -> int:
    """fp32 elements of the workspace every split-K GEMM of a bundle writes its slices into, at its largest M."""
    sizes = [
        slices * entry.tiers[-1].max_m * n
        for entry in manifest.entries.values()
        if entry.family == "gemm" and any(a.name == "P" for a in entry.args)
        for slices, _, n in [_partials_shape(entry)]
    ]
    return max(sizes, default=0)


def _partials_shape(entry) -> tuple:
    """A split-K entry's P: (slices, "M", N)."""
    return next(a.shape for a in entry.args if a.name == "P")


class Step:
    """One launch of the chain: the entry point it stands for, what runs it (a kernel symbol or cublas), the call."""

    __slots__ = ("entry", "impl", "_run")

    def __init__(self, entry: str, impl: str, run) -> None:
        self.entry, self.impl, self._run = entry, impl, run

    def __call__(self) -> None:
        self._run()


def cublas_gemm(A: Tensor, W: Tensor, C: Tensor, *, bias: Tensor | None = None, relu: bool = False):
    """A launch of C = act(A @ W^T (+ bias)) on cuBLAS through torch, writing into C (capturable)."""
    Wt = W.t()
    # cuBLAS adds the bias in the GEMM's epilogue, as a bf16 vector (what torch's bf16 linear does)
    bias16 = None if bias is None else bias.to(torch.bfloat16)

    def run() -> None:
        if bias16 is None:
            torch.mm(A, Wt, out=C)
        else:
            torch.addmm(bias16, A, Wt, out=C)
        if relu:
            C.relu_()

    return run


def cublas_geglu(A: Tensor, Wi: Tensor, G: Tensor, G2: Tensor):
    """A launch of G = gelu(A @ Wi[:F]^T) * (A @ Wi[F:]^T): cuBLAS into G2 ([M, 2F]), then one elementwise pass."""
    f, Wt = G.shape[1], Wi.t()

    def run() -> None:
        torch.mm(A, Wt, out=G2)
        torch.mul(F.gelu(G2[:, :f]), G2[:, f:], out=G)

    return run


def cublas_accumulate(A: Tensor, W: Tensor, X: Tensor, *, bias: Tensor | None = None):
    """A launch of X += A @ W^T (+ bias) into the fp32 stream: cuBLAS reads and writes X in fp32 in its epilogue,
    so the layer's output is never rounded to bf16, and the fp32 bias follows in a pass of its own (capturable). On
    the CPU, where torch has no bf16 GEMM with an fp32 output, the same sum from fp32 copies (the tests' emulated
    chain)."""
    Wt = W.t()
    if X.device.type != "cuda":
        product = lambda: X.addmm_(A.float(), Wt.float())  # noqa: E731
    else:
        product = lambda: torch.addmm(X, A, Wt, out_dtype=torch.float32, out=X)  # noqa: E731
    if bias is None:
        return product

    def run() -> None:
        product()
        X.add_(bias)

    return run
