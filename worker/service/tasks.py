"""The Celery tasks: thin wrappers that hand a plain dict to this process's engine.

Each writes its envelope to `contract.result_key(id)` itself (there is no result backend). No torch
here: the engine is built before the worker consumes (`worker.service.lifecycle.start`), never at import.
"""

from __future__ import annotations

from celery import shared_task

from laya_common import contract
from laya_common.broker.delivery import Delivery
from worker.service import lifecycle, tracing
from worker.service.back_to_back import Message


@shared_task(name=contract.TASK_DECIDE, bind=True)
def decide(self, payload: dict) -> None:
    """One /v1/systemone request (or job) -> ok_envelope(response) or error_envelope(kind, ...) at its result key;
    then the sync requests and jobs waiting, back to back (worker.service.back_to_back)."""
    lifecycle.current().answer(Message(Delivery.of(self.request), payload, tracing.of(self.request)))


@shared_task(name=contract.TASK_DECIDE_BATCH, bind=True)
def decide_batch(self, batch: dict) -> None:
    """A batch ({"model", "questions", "states"} or {"requests"}); results go to its Redis list as they come."""
    lifecycle.current().decide_batch(Delivery.of(self.request), batch)
