"""Between two windows of a batch, the sync requests and jobs waiting run first.

A worker runs one task at a time, and a batch is one task that may run for minutes. So the batch, at the
boundary between two of its forward passes, at most every LAYA_BATCH_YIELD_MS, asks whether a sync request or
a job waits for this worker's model; if one does, the engine lets its own passes in flight finish and this
takes every waiting one (sync requests first, each recorded as unacknowledged as the worker's consumer would:
laya_common.broker.transport's TAKE) and answers them back to back as a sync request's task does
(worker.service.back_to_back), then the batch goes on. An
interactive caller then waits for one such window of the batch at most, and each request still runs alone in
its pass.
"""

from __future__ import annotations

import time

from worker.service.back_to_back import answer_back_to_back


class LetPass:
    def __init__(self, runtime, *, every_s: float) -> None:
        self.runtime, self.every_s = runtime, every_s
        self._next_look = time.monotonic() + every_s

    def wanted(self) -> bool:
        """A sync request or a job waits, and the batch has had its window since the last look or run."""
        now = time.monotonic()
        if now < self._next_look:
            return False
        self._next_look = now + self.every_s
        return self.runtime.interactive_waiting()

    def run(self) -> None:
        """Answer every sync request and job waiting (the executor is idle: the engine drained its passes)."""
        answer_back_to_back(self.runtime)
        self._next_look = time.monotonic() + self.every_s  # the batch gets a whole window before the next look
