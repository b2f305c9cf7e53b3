"""Async jobs: POST /v1/jobs (a /v1/systemone body) -> 202 + Location; GET /v1/jobs/<id> -> status and result."""

from __future__ import annotations

from flask import Blueprint, jsonify

from app.dispatch import dispatcher
from app.payloads import request_payload

bp = Blueprint("jobs", __name__, url_prefix="/v1/jobs")


@bp.post("")
def submit():
    payload = request_payload()
    d = dispatcher()
    d.require_ready(payload["model"])
    job_id = d.submit(payload, record=True)
    return (
        jsonify({"id": job_id, "status": "queued"}),
        202,
        {"Location": f"/v1/jobs/{job_id}", "x-laya-model": payload["model"]},
    )


@bp.get("/<job_id>")
def fetch(job_id: str):
    """:raise 404: unknown or expired id."""
    return jsonify(dispatcher().job(job_id))
