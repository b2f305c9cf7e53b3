"""The engine of one worker process: loaded and warmed before any task runs, stopped for good when it fails.

`laya-worker` runs Celery's prefork pool with one child, and its parent starts out consuming no queue.
The child builds the engine and answers a real warmup in `worker_process_init`, announces readiness
in Redis, and only then asks its parent (a remote-control `add_consumer`) to consume the model's
queue, so a warming worker holds no task that an idle one could run. A child started after a crash
first asks the parent to stop consuming until it is warm. An executor failure answers that request
with a 500 envelope, marks the worker failed, and asks the parent for a warm shutdown, which
acknowledges the answered task and exits non-zero. Tasks that reach a failed engine are requeued.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import multiprocessing
import os
import signal
import socket
import time

from worker import contract, tracing
from worker.heartbeat import Heartbeat, record_executor_seconds
from worker.settings import WorkerSettings

log = logging.getLogger("laya.worker")

# Created in the parent before the pool forks, so the parent's exit status can say a child failed.
FAILED = multiprocessing.Value("b", 0)

_runtime: Runtime | None = None


CONTROL_TIMEOUT_S = 5.0  # how long to wait for the parent to confirm it consumes the queue
CONTROL_TRIES = 6


def start(settings: WorkerSettings, celery, node: str) -> None:
    """Load, warm up and announce this process's engine, then let the parent `node` consume its queue.

    On failure, stop the whole worker.
    """
    global _runtime
    from redis import Redis

    redis = Redis.from_url(settings.redis_url)
    heartbeat = Heartbeat(redis, model=settings.model, node=f"{socket.gethostname()}:{os.getpid()}",
                          ttl_s=settings.heartbeat_ttl_s, info={"pid": os.getpid()})
    try:
        celery.control.cancel_consumer(settings.queue, destination=[node], reply=False)  # if after a crash
        engine = _load_engine(settings)
        heartbeat.record["executor"] = engine.executor.name
        _runtime = Runtime(settings, engine, redis, heartbeat)
        heartbeat.start()
        _consume(celery, settings.queue, node)
    except Exception as e:
        log.exception("laya worker: the engine did not start")
        with contextlib.suppress(Exception):  # Redis may be what failed
            heartbeat.fail(f"startup failed ({type(e).__name__}); see the worker's log")
        _stop_worker()
        os._exit(1)
    log.info("laya worker: %s executor warm, serving queue %s", engine.executor.name, settings.queue)


def _consume(celery, queue: str, node: str) -> None:
    """Ask the parent to consume `queue`, until it confirms."""
    for _ in range(CONTROL_TRIES):
        replies = celery.control.add_consumer(queue, destination=[node], reply=True, timeout=CONTROL_TIMEOUT_S)
        if replies:
            return
    raise RuntimeError(f"{node} did not confirm consuming {queue} within {CONTROL_TRIES * CONTROL_TIMEOUT_S:g} s")


def stop() -> None:
    """A graceful exit: withdraw readiness now rather than when the key expires (a failed record stays)."""
    if _runtime is not None and not _runtime.failed:
        _runtime.heartbeat.stop()


def current() -> Runtime:
    if _runtime is None:
        raise RuntimeError("no engine in this process: run the worker with laya-worker (prefork pool, one child)")
    return _runtime


def _load_engine(settings: WorkerSettings):
    from worker.engine import Engine

    engine = Engine(settings.checkpoint, executor=settings.executor, bundle=settings.bundle or None,
                    device=settings.device or None, model_name=settings.model)
    engine.warmup()
    if settings.fail_after >= 0:
        _inject_fault(engine, settings.fail_after)
    return engine


def _inject_fault(engine, after: int) -> None:
    """Tests only (LAYA_TEST_FAIL_AFTER): the executor's forward raises once `after` calls have run."""
    forward, calls = engine.executor.forward, itertools.count()

    def failing_forward(batch):
        if next(calls) >= after:
            raise RuntimeError("injected executor fault (LAYA_TEST_FAIL_AFTER)")
        return forward(batch)

    engine.executor.forward = failing_forward


def _stop_worker() -> None:
    FAILED.value = 1
    os.kill(os.getppid(), signal.SIGTERM)  # warm shutdown: the task in hand is acknowledged first


class Runtime:
    def __init__(self, settings: WorkerSettings, engine, redis, heartbeat: Heartbeat) -> None:
        self.settings, self.engine, self.redis, self.heartbeat = settings, engine, redis, heartbeat
        self.failed = False

    def decide(self, job_id: str, payload: dict, trace: dict[str, float] | None = None) -> dict:
        """One request's envelope: its response, or the error the API will answer with."""
        tracing.stamp(trace, "task_started")
        self._refuse_if_failed()
        started_at, t0 = time.time(), time.perf_counter()
        tracing.stamp(trace, "engine_started")
        try:
            response = self.engine.decide(payload)
        except contract.RequestError as e:
            return contract.error_envelope(e.kind, e.detail, field=e.field)
        except Exception as e:
            return self._failure(e)
        seconds = time.perf_counter() - t0
        tracing.stamp(trace, "engine_finished")
        self._finish(job_id, seconds)
        return contract.ok_envelope(response, _timings(started_at, seconds))

    def decide_batch(self, batch_id: str, batch: dict) -> dict:
        """Score a batch in chunks, appending each state's result to the batch's Redis list in input order.

        States already in the list (a batch redelivered after its worker died) are not scored again.
        """
        self._refuse_if_failed()
        payloads, key = batch_payloads(batch), contract.batch_results_key(batch_id)
        started_at, t0 = time.time(), time.perf_counter()
        for start in range(self.redis.llen(key), len(payloads), self.settings.batch_chunk):
            chunk_t0 = time.perf_counter()
            try:
                results = self.engine.decide_many(payloads[start:start + self.settings.batch_chunk])
            except Exception as e:
                return self._failure(e)
            pipe = self.redis.pipeline()
            pipe.rpush(key, *(json.dumps(r) for r in results))
            pipe.expire(key, self.settings.result_ttl_s)
            record_executor_seconds(pipe, self.settings.model, time.perf_counter() - chunk_t0)
            pipe.execute()
        self.redis.expire(contract.job_key(batch_id), self.settings.result_ttl_s)
        return contract.ok_envelope({"done": len(payloads)}, _timings(started_at, time.perf_counter() - t0))

    def store_trace(self, job_id: str, trace: dict[str, float]) -> None:
        contract.write_trace(self.redis, job_id, trace)

    def _refuse_if_failed(self) -> None:
        if self.failed:
            from celery.exceptions import Reject

            raise Reject("this worker's executor has failed", requeue=True)

    def _finish(self, job_id: str, seconds: float) -> None:
        pipe = self.redis.pipeline()
        record_executor_seconds(pipe, self.settings.model, seconds)
        pipe.expire(contract.job_key(job_id), self.settings.result_ttl_s)  # a job record outlives its queue wait
        pipe.execute()

    def _failure(self, error: Exception) -> dict:
        """The envelope for an exception from the engine; an executor failure also stops this worker."""
        if not isinstance(error, contract.ExecutorError):
            # a bug outside the executor: this request fails, the executor is intact and keeps serving
            log.exception("laya worker: internal error")
            return contract.error_envelope("executor_failure", f"internal error in the worker ({type(error).__name__})")
        log.error("laya worker: executor failure, stopping: %s", error)
        self.failed = True
        detail = f"the {self.engine.executor.name} executor failed; this worker has stopped"
        self.heartbeat.fail(detail)
        _stop_worker()
        return contract.error_envelope("executor_failure", detail)


def batch_payloads(batch: dict) -> list[dict]:
    """A batch's requests: given whole ({"requests"}) or as shared questions over many states."""
    if "requests" in batch:
        return batch["requests"]
    return [{"model": batch["model"], "state": state, "questions": batch["questions"]} for state in batch["states"]]


def _timings(started_at: float, seconds: float) -> dict:
    return {"started_at": started_at, "finished_at": time.time(), "inference_ms": round(seconds * 1000, 3)}
