"""The bundle's entry points emulated in torch, for running the cuda executor's chain where there is no GPU.

Same names, argument order and in-place outputs as the bundle's kernels (docs/kernels.md); the math is
`kernels/reference.py`'s, rounded to bf16 where a kernel writes bf16. It tests what the chain binds to
what (buffers, weights, layer order, the head, the readout), not the kernels themselves: those are
tested on the H200 (tests/kernels).
"""

from __future__ import annotations

from types import SimpleNamespace

from kernels import reference
from laya_common.model import ModelConfig

HEAD_EPS = 1e-5  # nn.TransformerEncoderLayer's LayerNorm eps, compiled into the head's norm kernels
READOUT_EPS = 1e-5  # the scorer's nn.LayerNorm eps, compiled into readout_scores_f32
SPLIT_SLICES = 3  # slices of K a split-K GEMM writes


class EmulatedKernels:
    def __init__(self, cfg: ModelConfig) -> None:
        self.cfg = cfg
        # the readout kernels' partial sums: one per 8 of the scorer's hidden columns, as kernels/readout.py tiles them
        scores = SimpleNamespace(family="readout", args=(SimpleNamespace(name="P", shape=("N", cfg.hidden_size // 8)),))
        # the split-K GEMMs' fp32 slices, as a bundle declares them (kernels/gemm.py cuts K into up to 8)
        split = SimpleNamespace(
            family="gemm",
            args=(SimpleNamespace(name="P", shape=(SPLIT_SLICES, "M", cfg.hidden_size)),),
            tiers=(SimpleNamespace(max_m=128),),
        )
        norm = SimpleNamespace(family="norm", args=())  # what sums the slices into the stream
        entries = {
            "readout_scores_f32": scores,
            "gemm_attn_out_split_f32": split,
            "gemm_mlp_out_split_f32": split,
            "split_add_norm_bias_bf16": norm,
        }
        self.manifest = SimpleNamespace(tile_config="emulated", entries=entries)
        self.launches: list[str] = []  # every entry point launched, in order
        self.fail_on: str | None = None  # an entry point whose launch raises, as a failing kernel would

    def init(self) -> None:
        pass

    def describe(self) -> dict:
        return {"path": "(emulated in torch)", "tile_config": "emulated"}

    def __getattr__(self, name: str) -> Entry:
        fn = getattr(_Math(self.__dict__["cfg"]), name, None)
        if fn is None:
            raise AttributeError(f"no entry point {name!r}")
        return Entry(self, name, fn)


class Entry:
    def __init__(self, owner: EmulatedKernels, name: str, fn) -> None:
        self.owner, self.name, self.fn = owner, name, fn

    def bind(self, *args):
        owner, name, fn = self.owner, self.name, self.fn

        def launch() -> None:
            owner.launches.append(name)
            if owner.fail_on == name:
                raise RuntimeError(f"{name}: emulated kernel failure")
            fn(*args)

        launch.symbol = f"emulated_{name}"
        return launch


class _Math:
    def __init__(self, cfg: ModelConfig) -> None:
        self.cfg = cfg

    # norms on the fp32 stream
    def embed_norm_bf16(self, Ids, E, W, X, Y):
        X.copy_(reference.layer_norm(E[Ids.long()], W, None, self.cfg.norm_eps))
        Y.copy_(X)

    def add_norm_bf16(self, X, R, W, Y):
        X.add_(R.float())
        Y.copy_(reference.layer_norm(X, W, None, self.cfg.norm_eps))

    def norm_bias_bf16(self, X, W, Bias, Y):
        Y.copy_(reference.layer_norm(X, W, Bias, self.cfg.norm_eps))

    def add_norm_bias_bf16(self, X, R, W, Bias, Y):
        X.add_(R.float())
        Y.copy_(reference.layer_norm(X, W, Bias, HEAD_EPS))

    def type_add_norm_bias_bf16(self, Q, L, Temb, W, Bias, X, Y):
        X.copy_(Y.float() + Temb[Q.long()].repeat_interleave(L, dim=0))
        Y.copy_(reference.layer_norm(X, W, Bias, HEAD_EPS))

    def residual_add_f32(self, X, R):
        X.add_(R.float())

    # RoPE, in place on q and k
    def rope_fp32_bf16(self, QKV, InvFreq, L):
        QKV.copy_(reference.rope_exact(QKV, InvFreq, L, self.cfg.num_heads, self.cfg.head_dim))

    def rope_table_bf16(self, QKV, Cos, Sin, L):
        QKV.copy_(reference.rope_table(QKV, Cos, Sin, L, self.cfg.num_heads, self.cfg.head_dim))

    # attention
    def attn_fwd_global_bf16(self, QKV, Lens, L, O):
        O.copy_(reference.attention(QKV, Lens.long(), L, self.cfg.num_heads, self.cfg.head_dim, window=0))

    def attn_fwd_local_bf16(self, QKV, Lens, L, O):
        O.copy_(reference.attention(QKV, Lens.long(), L, self.cfg.num_heads, self.cfg.head_dim, window=self.cfg.window))

    # GEMMs
    def _gemm(self, A, W, C, bias=None, act="none"):
        C.copy_(reference.gemm(A, W, bias, act))

    def gemm_qkv_bf16(self, A, W, C):
        self._gemm(A, W, C)

    gemm_attn_out_bf16 = gemm_mlp_out_bf16 = gemm_qkv_bf16

    def gemm_geglu_bf16(self, A, Wi, C):
        C.copy_(reference.gemm_geglu(A, Wi))

    def gemm_head_qkv_bias_bf16(self, A, W, Bias, C):
        self._gemm(A, W, C, Bias)

    gemm_head_out_bias_bf16 = gemm_head_ffn2_bias_bf16 = gemm_head_qkv_bias_bf16

    def gemm_head_ffn1_bias_relu_bf16(self, A, W, Bias, C):
        self._gemm(A, W, C, Bias, "relu")

    # GEMMs added into the fp32 stream
    def gemm_attn_out_acc_f32(self, A, W, X):
        X.add_(reference.gemm(A, W))

    gemm_mlp_out_acc_f32 = gemm_attn_out_acc_f32

    def gemm_head_out_bias_acc_f32(self, A, W, Bias, X):
        X.add_(reference.gemm(A, W, Bias))

    gemm_head_ffn2_bias_acc_f32 = gemm_head_out_bias_acc_f32

    # split-K GEMMs, summed into the stream by the norm after them. The whole product in the first slice: the
    # same sums as the accumulating GEMM's, so that an answer here does not depend on which path its M took
    def gemm_attn_out_split_f32(self, A, W, P):
        P.zero_()
        P[0].copy_(reference.gemm(A, W))

    gemm_mlp_out_split_f32 = gemm_attn_out_split_f32

    def split_add_norm_bias_bf16(self, X, P, W, Bias, Y):
        X.add_(P.sum(0))
        Y.copy_(reference.layer_norm(X, W, Bias, self.cfg.norm_eps))

    # the readout after the graph
    def readout_scores_f32(self, X, At, NormW, NormB, W1, B1, W2, P, L, A1, U):
        P.copy_(reference.readout_partials(X, At, NormW, NormB, W1, B1, W2, P.shape[1], READOUT_EPS))
        U.copy_(reference.readout_act_units(X, L, U.shape[0], A1))

    def readout_heads_f32(self, P, B2, Keep, Bias, LogK, KFeature, U, A1, AB1, A2, AB2, Out):
        Out.copy_(reference.readout_heads(P, B2, Keep, Bias, LogK, KFeature, U, A1, AB1, A2, AB2))
