"""GET /health: 200 while some worker has finished a real warmup and keeps its heartbeat; else 503 with why."""

from __future__ import annotations

from flask import Blueprint, jsonify

from app.dispatch import dispatcher, no_ready_reason
from app.errors import ApiError

bp = Blueprint("health", __name__)


@bp.get("/health")
def health():
    """:raise 503: no worker is ready (none warm yet, failed, or Redis unreachable)."""
    workers = dispatcher().workers()
    if not any(w["state"] == "ready" for w in workers):
        reasons = [no_ready_reason(workers, m) for m in sorted({w["model"] for w in workers})]
        raise ApiError("unavailable", "; ".join(reasons) or "no worker has finished its warmup", workers=workers)
    return jsonify({"status": "ok", "workers": workers})
