"""The API's only link to the workers: admit, enqueue by class of work, wait, cancel, and read job, batch and worker
state in Redis.

Everything crosses as plain JSON: a task gets the validated payload, and writes an envelope
(`contract.ok_envelope` / `contract.error_envelope`, never an exception) to its result key, where a
sync call blocks for it (BLPOP) and a job fetch reads it. Each request goes on its model's queue of its
class of work (laya_common.broker.queues: sync, jobs, batches), through the ENQUEUE script that refuses it past the
queue's bound (app.admission). A batch's states go to a list of their own (contract.batch_input_key), its
message carries what they share.
"""

from __future__ import annotations

import json
import secrets
import time

from celery import Celery
from flask import Flask, current_app
from gevent import monkey

from app import admission, tracing
from app.admission import Fleet
from app.errors import ApiError, from_envelope
from app.hot_wait import HotWait
from laya_common import contract
from laya_common.broker import messages, queues

READY_CACHE_S = 1.0  # how long a submission trusts the last read of the workers' records and Redis's memory
INPUT_PIECE_BYTES = 4 << 20  # a batch's input goes to Redis in pieces of about this size (one RPUSH each)

# KEYS: the result key, the job's record. ARGV: the cancellation envelope, its TTL. Stores the cancellation unless
# the job has an envelope already, which it returns (nil when it cancelled now).
CANCEL = """
local envelope = redis.call('LINDEX', KEYS[1], 0)
if envelope then return envelope end
redis.call('RPUSH', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[2])
redis.call('EXPIRE', KEYS[2], ARGV[2])
return false
"""


class Dispatcher:
    def __init__(
        self, celery: Celery, redis, waiter, *, result_ttl_s: int, max_queued: dict[str, int], hot_wait: HotWait
    ) -> None:
        # waiter: a client whose socket timeout outlasts the longest BLPOP, for sync calls
        self.celery, self.redis, self.waiter, self.result_ttl_s = celery, redis, waiter, result_ttl_s
        self.hot_wait = hot_wait
        self.max_queued = max_queued  # class of work -> the depth at which its queue refuses more
        self._fleets: dict[str, tuple[float, Fleet]] = {}  # model -> (monotonic time read, its warm workers)
        self._memory_full: tuple[float, bool] = (0.0, False)

    # --- workers ---

    def workers(self) -> list[dict]:
        """Every worker record that has not expired: ready ones, and failed ones with the reason."""
        return contract.read_workers(self.redis)

    def admit(self, model: str) -> Fleet:
        """The model's warm workers, when new work may be queued for them.

        :raise 503: no worker serving `model` has finished its warmup, or Redis is near its memory bound.

        A fleet with a warm worker is reused for READY_CACHE_S, and forgotten when a request comes back with
        an executor failure; a request let in meanwhile waits in the queue for a worker, as if it had come first.
        """
        read_at, fleet = self._fleets.get(model, (0.0, None))
        if fleet is None or time.monotonic() - read_at > READY_CACHE_S:
            workers = self.workers()
            fleet = Fleet.of(model, workers)
            if not fleet.ready:
                raise ApiError("unavailable", no_ready_reason(workers, model))
            self._fleets[model] = (time.monotonic(), fleet)
        if self._redis_memory_full():
            raise ApiError(
                "overloaded",
                "Redis is close to its memory bound; the work accepted keeps the room it needs",
                retry_after=admission.UNKNOWN_RETRY_S,
            )
        return fleet

    # --- single requests ---

    def submit(self, payload: dict, fleet: Fleet) -> str:
        """Queue one request as a job, fetchable at /v1/jobs/<id>. :raise 503: the jobs queue is full."""
        job_id, model = new_id(), payload["model"]
        self._record(job_id, {"kind": "job", "model": model})
        depth = self._enqueue("jobs", contract.TASK_DECIDE, payload, job_id, model)
        if depth < 0:
            self.redis.delete(contract.job_key(job_id))
            raise self._queue_full("jobs", fleet, -1 - depth)
        return job_id

    def call(self, payload: dict, fleet: Fleet, timeout_s: float, *, trace: bool = False) -> tuple[str, dict]:
        """Queue one sync request and block for its envelope, both in one Redis round trip (ENQUEUE, then BLPOP
        on its result key in the same pipeline); `trace` asks the worker to store its stage times too.

        :raise 503: the sync requests queued ahead cannot be answered within `timeout_s` (app.admission).
        :raise 504: not answered within `timeout_s`; the id is recorded so the answer can be fetched later.
        """
        job_id, model = new_id(), payload["model"]
        headers = {contract.TRACE_MESSAGE_HEADER: True} if trace else None
        queue, message = self._message("sync", contract.TASK_DECIDE, payload, job_id, model, headers=headers)
        tracing.stamp("api_enqueued")
        result = contract.result_key(job_id)
        pipe = self.waiter.pipeline(transaction=False)
        bound = admission.sync_bound(fleet, timeout_s)
        pipe.eval(queues.ENQUEUE, 3, queue, queues.bell_key(model), result, message, bound, self.result_ttl_s)
        pipe.blpop([result], timeout=timeout_s)
        with self.hot_wait.call():
            depth, reply = pipe.execute()
        if depth < 0:  # the refusal ENQUEUE left at the result key woke the BLPOP at once
            raise ApiError(
                "overloaded",
                f"{-1 - depth} sync requests are queued ahead; they cannot be answered within {timeout_s:g} s",
                retry_after=admission.sync_retry_after(fleet, -1 - depth, timeout_s),
            )
        if reply is None:
            self._record(job_id, {"kind": "job", "model": model})
            raise ApiError(
                "timeout",
                f"no answer within {timeout_s:g} s; the job goes on: fetch it from /v1/jobs/{job_id}",
                id=job_id,
            )
        envelope = json.loads(reply[1])
        if envelope.get("error") == "executor_failure":
            self._fleets.pop(model, None)
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
        if envelope is not None and status in ("done", "failed"):
            if envelope.get("ok"):
                body["result"] = envelope["response"]
            else:
                body["error"] = from_envelope(envelope).to_dict()
        return body

    def cancel(self, job_id: str, kind: str) -> None:
        """Cancel a queued or running job or batch: a worker acknowledges a cancelled task without running it, a
        running batch stops at its next window (what it stored stays). Cancelling twice is cancelling once.

        :raise 404: no `kind` with this id. :raise 409: it has finished already.
        """
        self._check_record(job_id, self.redis.get(contract.job_key(job_id)), kind)
        cancelled = contract.error_envelope("conflict", f"this {kind} was cancelled by its caller")
        stored = self.redis.eval(
            CANCEL,
            2,
            contract.result_key(job_id),
            contract.job_key(job_id),
            json.dumps({**cancelled, "cancelled": True}),
            self.result_ttl_s,
        )
        if stored is not None:
            status, _ = self._status(job_id, stored)
            if status != "cancelled":
                raise ApiError("conflict", f"{kind} {job_id} has finished ({status}); there is nothing to cancel")
        if kind == "batch":
            self.redis.delete(contract.batch_input_key(job_id))  # a worker that has it reads no further

    # --- batches ---

    def submit_batch(self, argument: dict, items: list, fleet: Fleet) -> str:
        """Queue a batch: `argument` ({"model", "total", "questions"?}) in its message, `items` (its states, or its
        requests) in its input list. :raise 503: the batches queue is full."""
        model, bound = argument["model"], self.max_queued["batches"]
        depth = self.redis.llen(queues.queue_name(model, "batches"))
        if depth >= bound:  # before writing a large input that would be refused
            raise self._queue_full("batches", fleet, depth)
        batch_id = new_id()
        self._record(batch_id, {"kind": "batch", "model": model, "total": argument["total"]})
        try:
            self._write_input(batch_id, items)
            depth = self._enqueue("batches", contract.TASK_DECIDE_BATCH, argument, batch_id, model)
        except Exception:
            self.redis.delete(contract.job_key(batch_id), contract.batch_input_key(batch_id))
            raise
        if depth < 0:
            self.redis.delete(contract.job_key(batch_id), contract.batch_input_key(batch_id))
            raise self._queue_full("batches", fleet, -1 - depth)
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
        if status == "failed":
            body["error"] = from_envelope(envelope).to_dict()
        if offset + limit < record["total"]:
            body["next"] = f"/v1/batches/{batch_id}?offset={offset + limit}&limit={limit}"
        return body, page

    # --- metrics ---

    def queue_depths(self, model: str) -> dict[str, int]:
        """Class of work -> messages waiting on the model's queue of that class."""
        pipe = self.redis.pipeline(transaction=False)
        for work_class in queues.CLASSES:
            pipe.llen(queues.queue_name(model, work_class))
        return dict(zip(queues.CLASSES, pipe.execute(), strict=True))

    def executor_histogram(self, model: str) -> dict[str, float]:
        return {k.decode(): float(v) for k, v in self.redis.hgetall(contract.executor_metrics_key(model)).items()}

    # --- helpers ---

    def _enqueue(self, work_class: str, task: str, argument: dict, job_id: str, model: str) -> int:
        """Put `task(argument)` as `job_id` on the model's queue of `work_class`, unless it holds its bound:
        the depth found before it, or -1 - that depth when refused."""
        queue, message = self._message(work_class, task, argument, job_id, model)
        bound = self.max_queued.get(work_class, admission.NO_BOUND)
        return self.redis.eval(queues.ENQUEUE, 3, queue, queues.bell_key(model), "", message, bound, self.result_ttl_s)

    def _message(
        self, work_class: str, task: str, argument: dict, job_id: str, model: str, *, headers: dict | None = None
    ) -> tuple[str, bytes]:
        """(the queue, the message that runs `task(argument)` as `job_id` from it)."""
        queue = queues.queue_name(model, work_class)
        return queue, messages.encode(self.celery, task, argument, task_id=job_id, queue=queue, headers=headers)

    def _write_input(self, batch_id: str, items: list) -> None:
        """A batch's items, one JSON text each, appended to its input list in pieces of about INPUT_PIECE_BYTES,
        so that no more than a piece is ever encoded at once."""
        key, piece, size = contract.batch_input_key(batch_id), [], 0
        for item in items:
            text = contract.wire_json(item)
            piece.append(text)
            size += len(text)
            if size >= INPUT_PIECE_BYTES:
                self.redis.rpush(key, *piece)
                piece, size = [], 0
        pipe = self.redis.pipeline(transaction=False)
        if piece:
            pipe.rpush(key, *piece)
        pipe.expire(key, self.result_ttl_s)
        pipe.execute()

    def _queue_full(self, work_class: str, fleet: Fleet, depth: int) -> ApiError:
        bound = self.max_queued[work_class]
        return ApiError(
            "overloaded",
            f"{depth} {work_class} are queued for this model, its bound (LAYA_MAX_QUEUED_{work_class.upper()})",
            retry_after=admission.queued_retry_after(fleet, work_class, depth, bound),
        )

    def _redis_memory_full(self) -> bool:
        read_at, full = self._memory_full
        if time.monotonic() - read_at > READY_CACHE_S:
            full = admission.memory_full(self.redis.info("memory"))
            self._memory_full = (time.monotonic(), full)
        return full

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
        """(status, envelope or None) of a task, from its stored envelope or the workers running it."""
        if result is not None:
            envelope = json.loads(result)
            if envelope.get("cancelled"):
                return "cancelled", envelope
            return ("done" if envelope.get("ok") else "failed"), envelope
        running = any(
            w["state"] == "ready" and any(task == job_id for task, _ in w.get("tasks", ())) for w in self.workers()
        )
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
    max_queued = {"jobs": app.config["MAX_QUEUED_JOBS"], "batches": app.config["MAX_QUEUED_BATCHES"]}
    app.extensions["laya"] = Dispatcher(
        celery,
        redis,
        waiter,
        result_ttl_s=app.config["RESULT_TTL_S"],
        max_queued=max_queued,
        # only under gevent's hub (laya-api): elsewhere no loop runs the watcher, and threads would share the count
        hot_wait=HotWait(app.config["API_SPIN_MS"] / 1000 if monkey.is_module_patched("socket") else 0.0),
    )


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
