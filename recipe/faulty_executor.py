"""An executor that fails on purpose, for the fault tests and recipes (not a service setting):

    LAYA_EXECUTOR=recipe.faulty_executor:make  [LAYA_FAULT=raise|cuda]  [LAYA_FAULT_AFTER=N]  [LAYA_FAULT_WIDTH=T]

It wraps the executor "auto" picks (the cuda one with a Hopper GPU and a verified bundle, else the reference
one) and lets the engine's warmup run, then fails the first forward after N more (default 0) whose rows are at
least T tokens wide (default 0: any): raising a Python exception, or with a real CUDA error, an out-of-bounds
index on the GPU whose device-side assert leaves the process's CUDA context unusable, as a faulty kernel would.
From then on every forward fails, as the cuda executor fails for good. The LAYA_FAULT* variables are read here
alone.
"""

from __future__ import annotations

from laya_common.settings import Setting
from recipe.wrapped_executor import WrappedExecutor

WARMUP_FORWARDS = 2  # Engine.warmup answers one request at the smallest shape and one at the largest


class FaultyExecutor(WrappedExecutor):
    """Its passes go through `forward` (the default `launch`), so every one after the warmup fails."""

    SETTINGS = {
        "kind": Setting("LAYA_FAULT", "raise", "how the executor fails", choices=("raise", "cuda")),
        "after": Setting("LAYA_FAULT_AFTER", 0, "forwards answered after the warmup before the first failure"),
        "width": Setting("LAYA_FAULT_WIDTH", 0, "the first failure is a pass whose rows are at least this many tokens"),
    }

    def __init__(self, inner, *, kind: str, after: int, width: int) -> None:
        super().__init__(inner)
        self.kind, self.answered_before_failing, self.width = kind, WARMUP_FORWARDS + after, width
        self.failed = False

    def forward(self, batch):
        if self.answered_before_failing > 0:
            self.answered_before_failing -= 1
        elif self.failed or batch.ids.shape[1] >= self.width:
            self.failed = True
            self._fail()
        return self.inner.forward(batch)

    def describe(self) -> dict:
        return {**self.inner.describe(), "fault": self.kind}

    def _fail(self) -> None:
        if self.kind == "cuda":
            import torch

            table = torch.zeros(1, device="cuda")
            table[torch.tensor([1 << 20], device="cuda")].sum().item()  # raises at the synchronizing .item()
        raise RuntimeError("injected executor fault (recipe.faulty_executor)")


make = FaultyExecutor.factory()  # LAYA_EXECUTOR=recipe.faulty_executor:make
