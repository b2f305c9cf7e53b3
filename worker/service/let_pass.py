"""Between two windows of a batch, the sync requests and jobs waiting run first.

A worker runs one task at a time, and a batch is one task that may run for minutes. So the batch, at the
boundary between two of its forward passes, at most every LAYA_BATCH_YIELD_MS, asks whether a sync request or
a job waits for this worker's model; if one does, the engine lets its own passes in flight finish and this
takes every waiting one (sync requests first, each recorded as unacknowledged as the worker's consumer would:
laya_common.broker.transport's TAKE) and runs it as the Celery task would, then the batch goes on. An
interactive caller then waits for one such window of the batch at most, and each request still runs alone in
its pass.
"""

from __future__ import annotations

import base64
import json
import logging
import time

from laya_common import contract
from laya_common.broker import queues
from worker.service.delivery import Delivery

log = logging.getLogger("laya.worker")


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
        while (taken := self.runtime.take_interactive()) is not None:
            self._run_message(*taken)
        self._next_look = time.monotonic() + self.every_s  # the batch gets a whole window before the next look

    def _run_message(self, queue: str, raw: bytes) -> None:
        message = json.loads(raw)
        headers, properties = message["headers"], message["properties"]
        info = properties.get("delivery_info") or {}
        delivery = Delivery(
            headers["id"],
            properties.get("delivery_tag"),
            bool(info.get("redelivered") or headers.get("redelivered")),
            queues.parse(queue)[1],
        )
        trace = {"worker_received": time.time()} if headers.get(contract.TRACE_MESSAGE_HEADER) else None
        try:
            payload = task_argument(message, contract.TASK_DECIDE)
        except ValueError as e:
            log.error("laya worker: refused message %s from %s: %s", delivery.id, queue, e)
            self.runtime.refuse(delivery, str(e))
            return
        self.runtime.decide(delivery, payload, trace=trace)


def task_argument(message: dict, task: str) -> dict:
    """The one argument of a Celery task message (protocol 2, JSON) running `task`. ValueError for another task or
    a body that is not JSON: the worker's Celery accepts JSON only (contract.celery_config), and so does this."""
    if message["headers"].get("task") != task:
        raise ValueError(f"task {message['headers'].get('task')!r}; only {task} is run between batch windows")
    if message.get("content-type") != "application/json":
        raise ValueError(f"content type {message.get('content-type')!r}; only application/json is accepted")
    body = message["body"]
    if message["properties"].get("body_encoding") == "base64":
        body = base64.b64decode(body)
    args, _kwargs, _embed = json.loads(body)
    return args[0]
