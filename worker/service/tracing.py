"""The worker's half of a request trace (contract.TRACE_HEADER): stage times for recipe/http_overhead.py.

The process that takes the message from Redis stamps `worker_received` into the request's header,
which travels with the task to whichever process runs it; that process adds its own stages.
"""

from __future__ import annotations

import time

from laya_common import contract
from laya_common.broker.delivery import replace_header


def on_received(request) -> None:
    """Celery's task_received: stamp a traced task's arrival in its request, for the task to carry on."""
    replace_header(request, contract.TRACE_MESSAGE_HEADER, {"worker_received": time.time()})


def of(task_request) -> dict[str, float] | None:
    """The stamps of the task being run, when it is traced."""
    trace = getattr(task_request, contract.TRACE_MESSAGE_HEADER, None)
    return trace if isinstance(trace, dict) else None


def stamp(trace: dict[str, float] | None, stage: str) -> None:
    if trace is not None:
        trace[stage] = time.time()
