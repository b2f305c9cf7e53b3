"""POST /v1/systemone: enqueue one request and block for its answer (504 with the job id past the timeout; 503 with
Retry-After at once when the sync requests queued ahead cannot be answered within it). POST /v1/systemone/batch
(protocol 0.4.15's route): the same for up to 64 states sharing their questions, answered together."""

from __future__ import annotations

import time

from flask import Blueprint, Response, current_app, g, jsonify, request

from app import tracing
from app.dispatch import dispatcher
from app.errors import ApiError, from_envelope
from app.payloads import request_payload, states_request
from app.protocol import request_protocol
from laya_common import contract

bp = Blueprint("systemone", __name__, url_prefix="/v1")


@bp.post("/systemone")
def systemone() -> Response:
    return answer(request_payload())


@bp.post("/systemone/batch")
def systemone_batch() -> Response:
    """Synchronous and bounded (64 states): one task of the sync class, its states' rows sharing passes. The route
    is protocol 0.4.15's, whatever LAYA_PROTOCOL says; a header naming another protocol is a 400."""
    if request.headers.get(contract.PROTOCOL_HEADER) is not None and request_protocol() != contract.V04:
        raise ApiError("bad_request", f"POST /v1/systemone/batch speaks protocol {contract.V04} only")
    g.protocol = contract.V04
    return answer(states_request())


def answer(payload: dict) -> Response:
    """Queue `payload` as a sync task, wait for its envelope, and answer it."""
    tracing.stamp("api_validated")
    d = dispatcher()
    fleet = d.admit(payload["model"])
    tracing.stamp("api_ready")
    submitted_at = time.time()
    job_id, envelope = d.call(payload, fleet, current_app.config["SYNC_TIMEOUT_S"], trace=tracing.active())
    tracing.stamp("api_woke")
    if not envelope.get("ok"):
        raise from_envelope(envelope)
    response = jsonify(envelope["response"])
    response.headers.update(timing_headers(envelope.get("timings", {}), submitted_at))
    response.headers["x-job-id"] = job_id
    response.headers["x-laya-model"] = payload["model"]
    tracing.store_after(response, job_id)
    return response


def timing_headers(timings: dict, submitted_at: float) -> dict[str, str]:
    """x-queue-time, x-inference-time and x-total-time in ms (TEI's names): worker time vs HTTP time; and
    x-executor-time, the executor's own time over the request's pass (on the GPU for the cuda executor)."""
    queue_ms = max(0.0, (timings.get("started_at", submitted_at) - submitted_at) * 1000)
    total_ms = (time.perf_counter() - g.started) * 1000
    headers = {
        "x-queue-time": f"{queue_ms:.3f}",
        "x-inference-time": f"{timings.get('inference_ms', 0.0):.3f}",
        "x-total-time": f"{total_ms:.3f}",
    }
    if "executor_ms" in timings:
        headers["x-executor-time"] = f"{timings['executor_ms']:.3f}"
    return headers
