"""The API's only link to the workers: enqueue by task name, wait, and read job, batch and worker state in Redis.

Everything crosses as plain JSON: a task gets the validated payload, and writes an envelope
(`contract.ok_envelope` / `contract.error_envelope`, never an exception) to its result key, where a
sync call blocks for it (BLPOP) and a job fetch reads it.
"""

from __future__ import annotations

import json
import secrets
import time

from celery import Celery
from flask import Flask, current_app

from app import task_message, tracing
from app.errors import ApiError, from_envelope
from worker import contract

READY_CACHE_S = 1.0  # how long a sync call or job submission trusts the last read of worker readiness


class Dispatcher:
    def __init__(self, celery: Celery, redis, waiter, *, result_ttl_s: int) -> None:
        # waiter: a client whose socket timeout outlasts the longest BLPOP, for sync calls
        self.celery, self.redis, self.waiter, self.result_ttl_s = celery, redis, waiter, result_ttl_s
        self._ready_until: dict[str, float] = {}  # model -> monotonic time until which it counts as served

    # --- workers ---

    def workers(self) -> list[dict]:
        """Every worker record that has not expired: ready ones, and failed ones with the reason."""
        return contract.read_workers(self.redis)

    def require_ready(self, model: str) -> None:
        """:raise 503: no worker serving `model` has finished its warmup.

        A yes is reused for READY_CACHE_S, and forgotten when a request comes back with an executor
        failure; a request let in meanwhile waits in the queue for a worker, as if it had come first.
        """
        if time.monotonic() < self._ready_until.get(model, 0.0):
            return
        workers = self.workers()
        if not any(w["state"] == "ready" and w["model"] == model for w in workers):
            raise ApiError("unavailable", no_ready_reason(workers, model))
        self._ready_until[model] = time.monotonic() + READY_CACHE_S

    # --- single requests ---

    def submit(self, payload: dict, *, record: bool) -> str:
        """Enqueue one request on its model's queue; `record` makes the id fetchable at /v1/jobs/<id>."""
        job_id = new_id()
        if record:
            self._record(job_id, {"kind": "job", "model": payload["model"]})
        self._send(contract.TASK_DECIDE, payload, job_id, payload["model"])
        return job_id

    def call(self, payload: dict, timeout_s: float, *, trace: bool = False) -> tuple[str, dict]:
        """Enqueue one request and block for its envelope, both in one Redis round trip (LPUSH, then BLPOP
        on its result key in the same pipeline); `trace` asks the worker to store its stage times too.

        :raise 504: not answered within `timeout_s`; the id is recorded so the answer can be fetched later.
        """
        job_id, model = new_id(), payload["model"]
        headers = {contract.TRACE_MESSAGE_HEADER: True} if trace else None
        queue, message = self._message(contract.TASK_DECIDE, payload, job_id, model, headers=headers)
        tracing.stamp("api_enqueued")
        pipe = self.waiter.pipeline(transaction=False)
        pipe.lpush(queue, message)
        pipe.blpop([contract.result_key(job_id)], timeout=timeout_s)
        _, reply = pipe.execute()
        if reply is None:
            self._record(job_id, {"kind": "job", "model": model})
            raise ApiError(
                "timeout",
                f"no answer within {timeout_s:g} s; the job goes on: fetch it from /v1/jobs/{job_id}",
                id=job_id,
            )
        envelope = json.loads(reply[1])
        if envelope.get("error") == "executor_failure":
            self._ready_until.pop(model, None)
        return job_id, envelope

    def wait(self, job_id: str, kind: str, timeout_s: float) -> None:
        """Block until the job or batch `job_id` has finished (its envelope is stored), `timeout_s` at most.

        :raise 404: no `kind` ("job" or "batch") with this id.
        """
        key = contract.result_key(job_id)
        pipe = self.redis.pipeline(transaction=False)
        pipe.get(contract.job_key(job_id))
        pipe.exists(key)
        record, finished = pipe.execute()
        self._check_record(job_id, record, kind)
        if not finished:
            # moving the one-item list onto itself: wakes when the worker stores the envelope, and leaves it there
            self.waiter.blmove(key, key, timeout_s, "RIGHT", "LEFT")

    def job(self, job_id: str) -> dict:
        """{"id", "status", "result"?, "error"?} of a recorded job. :raise 404: unknown id."""
        pipe = self.redis.pipeline(transaction=False)
        pipe.get(contract.job_key(job_id))
        pipe.lindex(contract.result_key(job_id), 0)
        record, result = pipe.execute()
        self._check_record(job_id, record, "job")
        status, envelope = self._status(job_id, result)
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
        batch_id = new_id()
        self._record(batch_id, {"kind": "batch", "model": model, "total": total})
        self._send(contract.TASK_DECIDE_BATCH, batch, batch_id, model)
        return batch_id

    def batch(self, batch_id: str, *, offset: int, limit: int) -> tuple[dict, list[bytes]]:
        """A page of a batch's results, in input order, with its progress: the body but its "results", and those
        results as the worker stored them (JSON text in wire form). :raise 404: unknown id."""
        key = contract.batch_results_key(batch_id)
        pipe = self.redis.pipeline(transaction=False)
        pipe.get(contract.job_key(batch_id))
        pipe.llen(key)
        pipe.lrange(key, offset, offset + limit - 1)
        pipe.lindex(contract.result_key(batch_id), 0)
        record, done, page, result = pipe.execute()
        record = self._check_record(batch_id, record, "batch")
        status, envelope = self._status(batch_id, result)
        if status == "queued" and done:
            status = "running"  # a redelivered batch resumes where it stopped
        body = {
            "id": batch_id,
            "status": status,
            "done": done,
            "total": record["total"],
            "offset": offset,
        }
        if envelope is not None and not envelope.get("ok"):
            body["error"] = from_envelope(envelope).to_dict()
        if offset + limit < record["total"]:
            body["next"] = f"/v1/batches/{batch_id}?offset={offset + limit}&limit={limit}"
        return body, page

    # --- metrics ---

    def queue_depth(self, model: str) -> int:
        return self.redis.llen(contract.queue_name(model))

    def executor_histogram(self, model: str) -> dict[str, float]:
        return {k.decode(): float(v) for k, v in self.redis.hgetall(contract.executor_metrics_key(model)).items()}

    # --- helpers ---

    def _send(self, task: str, argument: dict, job_id: str, model: str) -> None:
        """Enqueue `task(argument)` as `job_id`; if that fails, no record is left claiming a queued job."""
        try:
            self.redis.lpush(*self._message(task, argument, job_id, model))
        except Exception:
            self.redis.delete(contract.job_key(job_id))
            raise

    def _message(
        self, task: str, argument: dict, job_id: str, model: str, *, headers: dict | None = None
    ) -> tuple[str, bytes]:
        """(the model's queue, the message that runs `task(argument)` as `job_id` from it)."""
        queue = contract.queue_name(model)
        return queue, task_message.encode(self.celery, task, argument, task_id=job_id, queue=queue, headers=headers)

    def _record(self, job_id: str, record: dict) -> None:
        self.redis.set(
            contract.job_key(job_id), json.dumps({**record, "created_at": time.time()}), ex=self.result_ttl_s
        )

    def _check_record(self, job_id: str, raw: bytes | None, kind: str) -> dict:
        """The job's record. :raise 404: none of this kind (unknown id, or expired)."""
        record = json.loads(raw) if raw is not None else None
        if record is None or record["kind"] != kind:
            raise ApiError(
                "not_found", f"no {kind} with id {job_id!r} (unknown, or expired after {self.result_ttl_s} s)"
            )
        return record

    def _status(self, job_id: str, result: bytes | None) -> tuple[str, dict | None]:
        """(status, envelope or None) of a task, from its stored envelope or the worker running it."""
        if result is not None:
            envelope = json.loads(result)
            return ("done" if envelope.get("ok") else "failed"), envelope
        running = any(w["state"] == "ready" and w.get("task") == job_id for w in self.workers())
        return ("running" if running else "queued"), None


def new_id() -> str:
    """A job or batch id: 128 bits from the operating system's CSPRNG, as 32 hex digits; knowing one id
    says nothing about another, so an id is as good as a capability to read that job."""
    return secrets.token_hex(16)


def no_ready_reason(workers: list[dict], model: str) -> str:
    failed = [w for w in workers if w["state"] == "failed" and w["model"] == model]
    if failed:
        return f"no warm worker for model {model!r}: a worker failed: {failed[0].get('detail', '')}"
    return f"no warm worker for model {model!r}: none has finished its warmup"


def init_app(app: Flask, celery: Celery) -> None:
    from redis import Redis

    url, connections = app.config["REDIS_URL"], app.config["API_CONNECTIONS"]
    # each HTTP connection holds at most one connection of each client at a time (redis-py's pool stops at 100)
    redis = Redis.from_url(
        url, socket_connect_timeout=5, socket_timeout=30, health_check_interval=30, max_connections=connections + 8
    )
    waiter = Redis.from_url(
        url,
        socket_connect_timeout=5,
        socket_timeout=app.config["SYNC_TIMEOUT_S"] + 30,
        health_check_interval=30,
        max_connections=connections + 8,
    )
    app.extensions["laya"] = Dispatcher(celery, redis, waiter, result_ttl_s=app.config["RESULT_TTL_S"])


def dispatcher() -> Dispatcher:
    return current_app.extensions["laya"]


def wait_if_asked(job_id: str, kind: str, wait_s: float) -> None:
    """A GET's `?wait=`: block until the job or batch has finished, `wait_s` at most.

    :raise 422: longer than a sync call may wait. :raise 404: no such job or batch.
    """
    if wait_s <= 0:
        return
    limit = current_app.config["SYNC_TIMEOUT_S"]
    if wait_s > limit:
        raise ApiError("validation", f"wait {wait_s:g} s; at most {limit:g} s (LAYA_SYNC_TIMEOUT_S)", field="wait")
    dispatcher().wait(job_id, kind, wait_s)
