"""GET /info: what serves this API, read from the workers' heartbeat records (as text-embeddings-inference has).

Per worker: model, executor and why it was chosen, device, bundle (tile configuration, manifest and library
sha256), GEMM routes and the kernel mapping loaded, limits, device memory, versions and git commit.
"""

from __future__ import annotations

from flask import Blueprint, current_app, jsonify

from app.dispatch import dispatcher
from laya_common import contract
from laya_common.version import version_info

bp = Blueprint("info", __name__)


@bp.get("/info")
def info():
    """The served models (the default first), the API's version and limits, and every live worker's record."""
    workers = [
        {k: w.get(k) for k in ("model", "node", "state", "version", "commit", "info")} for w in dispatcher().workers()
    ]
    models = current_app.config["SERVED_MODELS"]
    return jsonify(
        {
            "models": models,
            "default_model": models[0],
            "api": version_info(),
            "limits": contract.LIMITS,
            "workers": workers,
        }
    )
