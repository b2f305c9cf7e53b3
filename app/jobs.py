"""Async jobs: POST /v1/jobs (a /v1/systemone body) -> 202 + Location (503 + Retry-After past LAYA_MAX_QUEUED_JOBS);
GET /v1/jobs/<id>[?wait=s] -> status and result, after waiting up to `wait` seconds for the job to finish;
DELETE /v1/jobs/<id> cancels it while queued or running."""

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
    job_id = d.submit(payload, d.admit(payload["model"]))
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


@bp.delete("/<job_id>")
def cancel(job_id: str):
    """:raise 404: unknown or expired id. :raise 409: the job has finished."""
    d = dispatcher()
    d.cancel(job_id, "job")
    return jsonify(d.job(job_id))
