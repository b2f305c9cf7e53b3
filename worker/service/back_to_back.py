"""Sync requests and jobs answered back to back: while one request's pass runs, the next one's host work proceeds.

A worker runs one Celery task at a time, and between two tasks its consumer takes the next message. So the task of
a sync request or a job does not end with its own answer. While its pass runs (the cuda executor launches passes
asynchronously), the task takes the next waiting sync request or job itself, with laya_common.broker.transport's
TAKE: sync requests first, each class first in first out, each message recorded as unacknowledged just as the
consumer records it. It prepares that request and launches its pass behind the running one, up to the passes
the executor holds (`passes_in_flight`), and takes one more message ahead. Then it reads the oldest pass, and
sends that request's answer and the take of the next message in one round trip; while Redis answers, it launches
the message taken ahead behind the newer pass (worker.service.round_trip), and only then reads the reply. It
returns once nothing waits and every pass it launched is answered; the task of a request first waits up to
LAYA_LINGER_MS on the doorbell for the next one, which then skips Celery's consumer and dispatch, polling for the
first LAYA_SPIN_MS of it rather than sleeping (a lone caller's next request comes within a few ms, and a process
woken from sleep is slower to take and launch it). A batch rings the same bell and ends the wait at once.

Each request still runs alone in its own pass, so its answer is the one it gets alone. Once a shutdown begins (or
the executor fails) it takes nothing more and returns when what it holds is answered; a message it took ahead and
could not begin (an error ended its loop) goes back to the head of its queue. A batch lets waiting requests pass
the same way, between two of its windows (worker.service.let_pass).
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections import deque
from typing import NamedTuple

from laya_common import contract
from laya_common.broker.delivery import Delivery, task_argument

log = logging.getLogger("laya.worker")


class Message(NamedTuple):
    """A sync request or a job to answer: which message it came in, its payload, and its trace (None untraced)."""

    delivery: Delivery
    payload: dict
    trace: dict[str, float] | None


def answer_back_to_back(runtime, first: Message | None = None, *, linger_s: float = 0.0) -> None:
    """Answer `first` (if given, else what waits), then every sync request and job waiting, until none waits; with
    `linger_s`, also each one that arrives within `linger_s` of the last answer.

    `runtime` is the worker's (worker.service.lifecycle.Runtime): `begin` launches a request's pass (or answers it
    at once), `end` reads the pass and sends the answer, taking the next message in the same round trip,
    `wait_interactive` waits for one on the doorbell."""
    depth = max(1, runtime.engine.executor.passes_in_flight)
    in_flight: deque = deque()
    ahead = first if first is not None or not runtime.taking else take(runtime)  # taken, not begun yet
    try:
        while True:
            if ahead is not None and len(in_flight) < depth:
                if "states" in ahead.payload:  # POST /v1/systemone/batch: its passes need the whole executor
                    while in_flight:
                        runtime.end(in_flight.popleft())
                if (task := runtime.begin(ahead)) is not None:
                    in_flight.append(task)
                # taken while the passes in flight run, and begun once one of them is answered
                ahead = take(runtime) if runtime.taking else None
                continue
            if not in_flight:
                # one arriving soon is taken here, not through Celery's consumer and dispatch (LAYA_LINGER_MS)
                if linger_s and runtime.taking and (ahead := read(runtime, runtime.wait_interactive(linger_s))):
                    continue
                return
            # the oldest pass answered and the next message taken in one round trip; while Redis answers, the
            # message taken before is begun behind the newer pass
            overlap = ahead is not None and "states" not in ahead.payload
            stored = runtime.end(in_flight.popleft(), take_next=runtime.taking and (ahead is None or overlap))
            try:
                if overlap:
                    begun, ahead = ahead, None
                    if (task := runtime.begin(begun)) is not None:
                        in_flight.append(task)
            finally:
                taken = stored.taken()  # read even when the launch failed: the connection is free again
            if ahead is None:
                ahead = read(runtime, taken)
    finally:
        while in_flight:  # an error ended the loop: the executor is freed, each message waits for redelivery
            runtime.abandon(in_flight.popleft())
        if ahead is not None:  # taken and not begun: back at the head of its queue now, where Redis allows
            with contextlib.suppress(Exception):
                runtime.put_back(ahead.delivery)


def take(runtime) -> Message | None:
    """The next waiting sync request or job, recorded as unacknowledged; None when none waits."""
    return read(runtime, runtime.take_interactive())


def read(runtime, taken: tuple[str, bytes] | None) -> Message | None:
    """A message as taken ((queue, message as queued), or None) to answer. One that cannot be run is answered
    with a 400 and acknowledged, and the next one is taken."""
    while taken is not None:
        queue, raw = taken
        message = json.loads(raw)
        delivery = Delivery.of_message(queue, message)
        trace = {"worker_received": time.time()} if message["headers"].get(contract.TRACE_MESSAGE_HEADER) else None
        try:
            return Message(delivery, task_argument(message, contract.TASK_DECIDE), trace)
        except ValueError as e:
            log.error("laya worker: refused message %s from %s: %s", delivery.id, queue, e)
            runtime.refuse(delivery, str(e))
        taken = runtime.take_interactive() if runtime.taking else None
    return None
