"""An executor that runs its passes as a GPU would, beside the host, for measuring the worker's host path on a
machine without one (not a service setting):

    LAYA_EXECUTOR=recipe.paced_executor:make  [LAYA_PACE_MS=1.2]  [LAYA_PACE_DEPTH=2]  [LAYA_PACE_INNER=auto]

It wraps the executor "auto" picks (or the one LAYA_PACE_INNER names: recipe.faulty_executor:make) and runs
each pass on a thread of its own, one pass after another as a GPU stream runs them: `launch` returns at once, and
`result()` waits for the pass. A pass takes LAYA_PACE_MS (the H200's executor time at 1x77 by default), so the
host's work per request can be set against a GPU's time per pass on any machine: a pass whose rows it ran before
returns the outputs it had then, without this machine's forward (a load sends the same requests over and over); a
new one runs the wrapped executor's forward first, and takes longer. It holds LAYA_PACE_DEPTH passes in flight, as
the cuda executor holds two. Answers are the wrapped executor's, unchanged. The LAYA_PACE_* variables are read
here alone.
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import fields, replace

from laya_common.settings import Setting
from recipe.wrapped_executor import WrappedExecutor
from worker.engine.batch import Batch, Executor, Outputs

REMEMBERED = 1024  # passes whose outputs are kept


class PacedExecutor(WrappedExecutor):
    SETTINGS = {
        "pass_ms": Setting("LAYA_PACE_MS", 1.2, "the least time a pass takes, in ms"),
        "depth": Setting("LAYA_PACE_DEPTH", 2, "passes launched and not read yet that it holds"),
        "inner": Setting("LAYA_PACE_INNER", "auto", "the executor it paces, by a name LAYA_EXECUTOR takes"),
    }

    def __init__(self, inner: Executor, *, pass_ms: float, depth: int) -> None:
        super().__init__(inner)
        self.pass_s, self.passes_in_flight = pass_ms / 1000, depth
        self._stream = ThreadPoolExecutor(1, thread_name_prefix="paced-pass")
        self._ran: dict[bytes, Outputs] = {}  # a pass's rows -> its outputs, for the REMEMBERED latest

    def launch(self, batch: Batch) -> Future:
        return self._stream.submit(self._run, batch)

    def forward(self, batch: Batch) -> Outputs:
        return self.launch(batch).result()

    def _run(self, batch: Batch) -> Outputs:
        t0 = time.perf_counter()
        key = b"".join(a.tobytes() + repr(a.shape).encode() for a in (getattr(batch, f.name) for f in fields(batch)))
        outputs = self._ran.pop(key, None) or self.inner.forward(batch)
        self._ran[key] = outputs  # the most recent last
        if len(self._ran) > REMEMBERED:
            del self._ran[next(iter(self._ran))]
        time.sleep(max(0.0, t0 + self.pass_s - time.perf_counter()))
        return replace(outputs, executor_ms=(time.perf_counter() - t0) * 1000)

    def describe(self) -> dict:
        return {**self.inner.describe(), "paced_ms": self.pass_s * 1000, "passes_in_flight": self.passes_in_flight}


make = PacedExecutor.factory()  # LAYA_EXECUTOR=recipe.paced_executor:make
