"""The API's only link to the workers: enqueue by task name, wait, and read job, batch and worker state in Redis.

Everything crosses as plain JSON: a task gets the validated payload, and returns an envelope
(`contract.ok_envelope` / `contract.error_envelope`), never an exception.
"""

from __future__ import annotations

import json
import time
import uuid

from celery import Celery
from celery.exceptions import TimeoutError as CeleryTimeout
from flask import Flask, current_app

from app.errors import ApiError, from_envelope
from worker import contract

# Celery states -> the job status the API reports; a finished task's envelope decides done or failed.
_STATUS_BY_STATE = {"PENDING": "queued", "RECEIVED": "queued", "RETRY": "queued", "STARTED": "running"}


class Dispatcher:
    def __init__(self, celery: Celery, redis, *, result_ttl_s: int) -> None:
        self.celery, self.redis, self.result_ttl_s = celery, redis, result_ttl_s

    # --- workers ---

    def workers(self) -> list[dict]:
        """Every worker record that has not expired: ready ones, and failed ones with the reason."""
        keys = sorted(self.redis.smembers(contract.WORKERS_KEY))
        if not keys:
            return []
        records = self.redis.mget(keys)
        expired = [key for key, record in zip(keys, records, strict=True) if record is None]
        if expired:
            self.redis.srem(contract.WORKERS_KEY, *expired)
        return [json.loads(record) for record in records if record is not None]

    def require_ready(self, model: str) -> None:
        """:raise 503: no worker serving `model` has finished its warmup."""
        workers = self.workers()
        if not any(w["state"] == "ready" and w["model"] == model for w in workers):
            raise ApiError("unavailable", no_ready_reason(workers, model))

    # --- single requests ---

    def submit(self, payload: dict, *, record: bool, trace: bool = False) -> str:
        """Enqueue one request on its model's queue; `record` makes the id fetchable at /v1/jobs/<id>,
        `trace` asks the worker to store its stage times too."""
        job_id = str(uuid.uuid4())
        if record:
            self._record(job_id, {"kind": "job", "model": payload["model"]})
        headers = {contract.TRACE_MESSAGE_HEADER: True} if trace else None
        self._send(contract.TASK_DECIDE, payload, job_id, payload["model"], headers=headers)
        return job_id

    def wait(self, job_id: str, model: str, timeout_s: float) -> dict:
        """The envelope of a submitted request.

        :raise 504: not answered within `timeout_s`; the id is recorded so the answer can be fetched later.
        """
        try:
            return self.celery.AsyncResult(job_id).get(timeout=timeout_s, propagate=False)
        except CeleryTimeout:
            self._record(job_id, {"kind": "job", "model": model})
            raise ApiError("timeout", f"no answer within {timeout_s:g} s; the job goes on: fetch it from "
                           f"/v1/jobs/{job_id}", id=job_id) from None

    def job(self, job_id: str) -> dict:
        """{"id", "status", "result"?, "error"?} of a recorded job. :raise 404: unknown id."""
        self._get_record(job_id, "job")
        result = self.celery.AsyncResult(job_id)
        status, envelope = self._status(result)
        body = {"id": job_id, "status": status}
        if envelope is not None:
            if envelope.get("ok"):
                body["result"] = envelope["response"]
            else:
                body["error"] = from_envelope(envelope).to_dict()
        return body

    # --- batches ---

    def submit_batch(self, batch: dict, *, model: str, total: int) -> str:
        """Enqueue a batch ({"model", "questions", "states"} or {"requests"}) on its model's queue."""
        batch_id = str(uuid.uuid4())
        self._record(batch_id, {"kind": "batch", "model": model, "total": total})
        self._send(contract.TASK_DECIDE_BATCH, batch, batch_id, model)
        return batch_id

    def batch(self, batch_id: str, *, offset: int, limit: int) -> dict:
        """A page of a batch's results, in input order, with its progress. :raise 404: unknown id."""
        record = self._get_record(batch_id, "batch")
        key = contract.batch_results_key(batch_id)
        pipe = self.redis.pipeline()
        pipe.llen(key)
        pipe.lrange(key, offset, offset + limit - 1)
        done, page = pipe.execute()
        status, envelope = self._status(self.celery.AsyncResult(batch_id))
        if status == "queued" and done:
            status = "running"  # a redelivered batch resumes where it stopped
        body = {"id": batch_id, "status": status, "done": done, "total": record["total"], "offset": offset,
                "results": [json.loads(r) for r in page]}
        if envelope is not None and not envelope.get("ok"):
            body["error"] = from_envelope(envelope).to_dict()
        if offset + limit < record["total"]:
            body["next"] = f"/v1/batches/{batch_id}?offset={offset + limit}&limit={limit}"
        return body

    # --- metrics ---

    def queue_depth(self, model: str) -> int:
        return self.redis.llen(contract.queue_name(model))

    def executor_histogram(self, model: str) -> dict[str, float]:
        return {k.decode(): float(v) for k, v in self.redis.hgetall(contract.executor_metrics_key(model)).items()}

    # --- helpers ---

    def _send(self, task: str, argument: dict, job_id: str, model: str, headers: dict | None = None) -> None:
        """Enqueue `task(argument)` as `job_id`; if that fails, no record is left claiming a queued job."""
        try:
            self.celery.send_task(task, args=[argument], task_id=job_id, queue=contract.queue_name(model),
                                  headers=headers)
        except Exception:
            self.redis.delete(contract.job_key(job_id))
            raise

    def _record(self, job_id: str, record: dict) -> None:
        self.redis.set(contract.job_key(job_id), json.dumps({**record, "created_at": time.time()}),
                       ex=self.result_ttl_s)

    def _get_record(self, job_id: str, kind: str) -> dict:
        raw = self.redis.get(contract.job_key(job_id))
        record = json.loads(raw) if raw is not None else None
        if record is None or record["kind"] != kind:
            raise ApiError("not_found", f"no {kind} with id {job_id!r} (unknown, or expired after "
                           f"{self.result_ttl_s} s)")
        return record

    @staticmethod
    def _status(result) -> tuple[str, dict | None]:
        """(status, envelope or None) of a task's result."""
        state = result.state
        if state in _STATUS_BY_STATE:
            return _STATUS_BY_STATE[state], None
        if state == "SUCCESS":
            envelope = result.result
            return ("done" if envelope.get("ok") else "failed"), envelope
        # FAILURE or REVOKED: the task raised instead of returning an envelope (never by design)
        return "failed", contract.error_envelope("executor_failure", f"the worker did not answer ({state})")


def no_ready_reason(workers: list[dict], model: str) -> str:
    failed = [w for w in workers if w["state"] == "failed" and w["model"] == model]
    if failed:
        return f"no warm worker for model {model!r}: {failed[0]['node']} failed: {failed[0].get('detail', '')}"
    return f"no warm worker for model {model!r}: none has finished its warmup"


def init_app(app: Flask, celery: Celery) -> None:
    from redis import Redis

    redis = Redis.from_url(app.config["REDIS_URL"], socket_connect_timeout=5, socket_timeout=30,
                           health_check_interval=30)
    app.extensions["laya"] = Dispatcher(celery, redis, result_ttl_s=app.config["RESULT_TTL_S"])


def dispatcher() -> Dispatcher:
    return current_app.extensions["laya"]
