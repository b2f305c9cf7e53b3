"""The API's half of a request trace: stage times for recipe/http_overhead.py.

With LAYA_TRACE=1, a request that sends `x-laya-trace: 1` is stamped (time.time()) at each stage it
passes in this process. The stamps go to Redis (contract.trace_key) after its response has been
written, so storing them costs the traced request nothing; the worker adds its stages to the same hash.
"""

from __future__ import annotations

import time

from flask import Flask, Response, current_app, g, request

from laya_common import contract


def init_app(app: Flask) -> None:
    if not app.config["TRACE"]:
        return
    from redis import Redis

    app.extensions["laya_trace"] = Redis.from_url(app.config["REDIS_URL"], socket_connect_timeout=5, socket_timeout=5)

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
    redis = current_app.extensions["laya_trace"]

    def written() -> None:
        trace["api_responded"] = time.time()
        contract.write_trace(redis, job_id, trace)

    response.call_on_close(written)
