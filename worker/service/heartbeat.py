"""What a worker publishes in Redis for the API: its readiness (a key with a TTL) and its executor times.

`/health` is 200 only while some worker's key says "ready"; the key is written after a real warmup,
refreshed by a thread every third of its TTL, and replaced by a "failed" record when the executor fails.
Each refresh also says which tasks the worker is running ("tasks": [[id, delivery tag], ...]: a batch, and a
request it lets pass between two of its windows): that is how a job reads "running", and how the other
workers tell a task held by a live worker from one a dead worker left behind (worker.service.redelivery), which each
beat then looks for. And it says how fast the worker drains each class of work ("drain"), from which the API
tells a caller that the work queued ahead cannot be done in time.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from bisect import bisect_left
from collections.abc import Callable

from laya_common import contract

log = logging.getLogger("laya.worker")

FAILED_TTL_S = 3600  # how long /health can still name a failed worker as the reason it is 503


class Heartbeat:
    def __init__(
        self, redis, *, model: str, node: str, ttl_s: int, info: dict, after_beat: Callable[[], None] | None = None
    ) -> None:
        self.redis, self.ttl_s, self.after_beat = redis, ttl_s, after_beat
        self.key = contract.worker_key(model, node)
        self.record = {"model": model, "node": node, **info}
        self.tasks: dict[str, str | None] = {}  # task id -> delivery tag, of each task being run
        self.drain = DrainRates()
        self._stop = threading.Event()
        self._lock = threading.Lock()  # a beat in flight never overwrites the failed record
        self._thread = threading.Thread(target=self._beat, name="laya-heartbeat", daemon=True)

    def start(self) -> None:
        """Announce readiness now and keep it fresh until `fail` or `stop`, doing the per-beat work after each."""
        try:
            self._publish("ready", self.ttl_s)
        except Exception as e:  # Redis unreachable for a moment: the first beat tries again
            self._warn(e)
        self._thread.start()

    def fail(self, detail: str) -> None:
        """Replace readiness by a failed record that says why."""
        self._stop.set()
        with self._lock:
            self._publish("failed", FAILED_TTL_S, detail=detail)

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            self.redis.delete(self.key)

    def _beat(self) -> None:
        while True:
            try:
                if self.after_beat is not None:
                    self.after_beat()
            except Exception as e:  # Redis unreachable for a moment: the next beat tries again
                self._warn(e)
            if self._stop.wait(self.ttl_s / 3):
                return
            try:
                with self._lock:
                    if self._stop.is_set():
                        return
                    self._publish("ready", self.ttl_s)
            except Exception as e:
                self._warn(e)

    def _warn(self, error: Exception) -> None:
        log.warning("laya worker: heartbeat: %s: %s; next try in %.1f s", type(error).__name__, error, self.ttl_s / 3)

    def _publish(self, state: str, ttl_s: int, **extra: str) -> None:
        tasks = [list(task) for task in list(self.tasks.items())]  # a copy: the task thread changes it
        record = json.dumps(
            {**self.record, "state": state, "at": time.time(), "tasks": tasks, "drain": self.drain.rates(), **extra}
        )
        pipe = self.redis.pipeline()
        pipe.set(self.key, record, ex=ttl_s)
        pipe.sadd(contract.WORKERS_KEY, self.key)
        pipe.execute()


class DrainRates:
    """Seconds of the worker's time a task of each class of work took, as a moving average (each new task weighs
    DRAIN_WEIGHT): batches per batch, the others per request. A task answered alone took its time from taking it
    to storing its answer; one taken while another was still in hand (answered back to back) from the other's
    answer to its own, so that tasks in hand together do not count their shared time twice."""

    def __init__(self) -> None:
        self._seconds: dict[str, float] = {}
        self._last_answered = float("-inf")  # time.perf_counter() of the last answer

    def answered(self, work_class: str, taken_at: float, now: float) -> None:
        """A task of `work_class` taken at `taken_at` was answered at `now` (time.perf_counter())."""
        self.observe(work_class, now - max(taken_at, self._last_answered))
        self._last_answered = now

    def observe(self, work_class: str, seconds: float) -> None:
        before = self._seconds.get(work_class)
        self._seconds[work_class] = seconds if before is None else before + DRAIN_WEIGHT * (seconds - before)

    def rates(self) -> dict[str, float]:
        return dict(self._seconds)


DRAIN_WEIGHT = 0.2


def record_executor_seconds(pipe, model: str, seconds: float) -> None:
    """Add one observation to the model's executor-time histogram (its own bucket; /metrics sums them)."""
    key, bucket = contract.executor_metrics_key(model), executor_bucket(seconds)
    if bucket is not None:
        pipe.hincrby(key, bucket, 1)
    pipe.hincrby(key, "count", 1)
    pipe.hincrbyfloat(key, "sum", seconds)


def executor_bucket(seconds: float) -> str | None:
    """The histogram field one observation of `seconds` counts in (None above the last bucket's bound)."""
    i = bisect_left(contract.EXECUTOR_BUCKETS, seconds)
    return f"bucket:{contract.EXECUTOR_BUCKETS[i]}" if i < len(contract.EXECUTOR_BUCKETS) else None
