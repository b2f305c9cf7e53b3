"""GET /info: what serves this API, read from the workers' heartbeat records (as text-embeddings-inference has).

Per worker: model, executor and why it was chosen, device, bundle (tile configuration, manifest and library
sha256), GEMM routes and the kernel mapping loaded, limits, device memory, versions and git commit.
"""

from __future__ import annotations

from flask import Blueprint, current_app, jsonify

from app.dispatch import dispatcher
from worker import contract

bp = Blueprint("info", __name__)


@bp.get("/info")
def info():
    workers = [{k: w.get(k) for k in ("model", "node", "state", "info")} for w in dispatcher().workers()]
    models = [m.strip() for m in current_app.config["MODELS"].split(",") if m.strip()]
    return jsonify({"models": models, "limits": contract.LIMITS, "workers": workers})
