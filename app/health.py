"""GET /health: 200 while every served model has a worker that finished a real warmup; else 503 naming the missing.

It is open (no bearer token), so it says what a load balancer needs and nothing of anyone's work: per served
model, how many workers are warm; never a task, a job id or a worker's name.
"""

from __future__ import annotations

from flask import Blueprint, current_app, jsonify

from app.dispatch import dispatcher, no_ready_reason
from app.errors import ApiError
from app.models import ready_workers

bp = Blueprint("health", __name__)


@bp.get("/health")
def health():
    """:raise 503: some model of LAYA_MODELS has no ready worker (none warm yet, failed, or Redis unreachable)."""
    workers = dispatcher().workers()
    ready = ready_workers(workers, current_app.config["SERVED_MODELS"])
    missing = [model for model, count in ready.items() if not count]
    if missing:
        raise ApiError("unavailable", "; ".join(no_ready_reason(workers, m) for m in missing), models=ready)
    return jsonify({"status": "ok", "models": ready})
