"""The API's half of a request trace: stage times for recipe/http_overhead.py.

With LAYA_TRACE=1, a request that sends `x-laya-trace: 1` is stamped (time.time()) at each stage it
passes in this process. The stamps go to Redis (contract.trace_key) after its response has been
written, from a thread of their own: storing them costs the traced request nothing, nor the next
request on its connection, which gunicorn reads only once this one's close callbacks have returned.
The worker adds its stages to the same hash.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time

from flask import Flask, Response, current_app, g, request

from worker import contract

log = logging.getLogger("laya.api")


def init_app(app: Flask) -> None:
    if not app.config["TRACE"]:
        return
    from redis import Redis

    app.extensions["laya_trace"] = TraceWriter(
        Redis.from_url(app.config["REDIS_URL"], socket_connect_timeout=5, socket_timeout=5)
    )

    @app.before_request
    def _received() -> None:
        if request.headers.get(contract.TRACE_HEADER):
            g.trace = {"api_received": time.time()}


def active() -> bool:
    return g.get("trace") is not None


def stamp(stage: str) -> None:
    trace = g.get("trace")
    if trace is not None:
        trace[stage] = time.time()


def store_after(response: Response, job_id: str) -> None:
    """Once `response` has been written: stamp that, and store this request's stamps."""
    trace = g.get("trace")
    if trace is None:
        return
    writer = current_app.extensions["laya_trace"]

    def written() -> None:
        trace["api_responded"] = time.time()
        writer.put(job_id, trace)

    response.call_on_close(written)


class TraceWriter:
    """Stores traces from one daemon thread per process (started on first use, so in each gunicorn worker)."""

    def __init__(self, redis) -> None:
        self.redis, self.pending = redis, queue.SimpleQueue()
        self._pid: int | None = None  # the process whose writer thread runs
        self._lock = threading.Lock()

    def put(self, job_id: str, stamps: dict[str, float]) -> None:
        with self._lock:
            if self._pid != os.getpid():
                self._pid = os.getpid()
                threading.Thread(target=self._run, name="laya-trace-writer", daemon=True).start()
        self.pending.put((job_id, stamps))

    def _run(self) -> None:
        while True:
            job_id, stamps = self.pending.get()
            try:
                contract.write_trace(self.redis, job_id, stamps)
            except Exception:  # a lost trace leaves its sample incomplete, which the recipe reports
                log.exception("laya api: storing a trace failed")
