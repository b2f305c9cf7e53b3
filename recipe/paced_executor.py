"""An executor that runs its passes as a GPU would, beside the host, for measuring the worker's host path on a
machine without one (not a service setting):

    LAYA_EXECUTOR=recipe.paced_executor:make  [LAYA_PACE_MS=1.2]  [LAYA_PACE_DEPTH=2]

It wraps the executor "auto" picks and runs each pass on a thread of its own, one pass after another as a GPU
stream runs them: `launch` returns at once, and `result()` waits for the pass. A pass takes at least
LAYA_PACE_MS (the H200's executor time at 1x77 by default), so the host's work per request can be compared with
a GPU's time per pass on any machine. It holds LAYA_PACE_DEPTH passes in flight, as the cuda executor holds two.
Answers are the wrapped executor's, unchanged. The LAYA_PACE_* variables are read here alone.
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace

from laya_common.settings import Setting
from recipe.wrapped_executor import WrappedExecutor
from worker.engine.batch import Batch, Executor, Outputs


class PacedExecutor(WrappedExecutor):
    SETTINGS = {
        "pass_ms": Setting("LAYA_PACE_MS", 1.2, "the least time a pass takes, in ms"),
        "depth": Setting("LAYA_PACE_DEPTH", 2, "passes launched and not read yet that it holds"),
    }

    def __init__(self, inner: Executor, *, pass_ms: float, depth: int) -> None:
        super().__init__(inner)
        self.pass_s, self.passes_in_flight = pass_ms / 1000, depth
        self._stream = ThreadPoolExecutor(1, thread_name_prefix="paced-pass")

    def launch(self, batch: Batch) -> Future:
        return self._stream.submit(self._run, batch)

    def forward(self, batch: Batch) -> Outputs:
        return self.launch(batch).result()

    def _run(self, batch: Batch) -> Outputs:
        t0 = time.perf_counter()
        outputs = self.inner.forward(batch)
        time.sleep(max(0.0, t0 + self.pass_s - time.perf_counter()))
        return replace(outputs, executor_ms=(time.perf_counter() - t0) * 1000)

    def describe(self) -> dict:
        return {**self.inner.describe(), "paced_ms": self.pass_s * 1000, "passes_in_flight": self.passes_in_flight}


make = PacedExecutor.factory()  # LAYA_EXECUTOR=recipe.paced_executor:make
