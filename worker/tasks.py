"""The Celery tasks: thin wrappers that hand a plain dict to this process's engine and return an envelope.

No torch here: the engine is built in the pool child (`worker.lifecycle.start`), never at import.
"""

from __future__ import annotations

from celery import shared_task

from worker import contract, lifecycle, tracing


@shared_task(name=contract.TASK_DECIDE, bind=True, ignore_result=False)
def decide(self, payload: dict) -> dict:
    """One /v1/systemone request -> ok_envelope(response) or error_envelope(kind, ...)."""
    return lifecycle.current().decide(self.request.id, payload, trace=tracing.of(self.request))


@shared_task(name=contract.TASK_DECIDE_BATCH, bind=True, ignore_result=False)
def decide_batch(self, batch: dict) -> dict:
    """A batch ({"model", "questions", "states"} or {"requests"}); results go to its Redis list as they come."""
    return lifecycle.current().decide_batch(self.request.id, batch)
