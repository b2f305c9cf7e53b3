"""Async jobs: POST /v1/jobs (a /v1/systemone body) -> 202 + Location; GET /v1/jobs/<id>[?wait=s] -> status and
result, after waiting up to `wait` seconds for the job to finish."""

from __future__ import annotations

from flask import Blueprint, jsonify, request

from app.dispatch import dispatcher, wait_if_asked
from app.payloads import request_payload
from app.schemas import WaitSchema

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
    """:raise 404: unknown or expired id. :raise 422: a bad `wait`."""
    wait_if_asked(job_id, "job", WaitSchema().load(request.args)["wait"])
    return jsonify(dispatcher().job(job_id))
