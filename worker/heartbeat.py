"""What a worker publishes in Redis for the API: its readiness (a key with a TTL) and its executor times.

`/health` is 200 only while some worker's key says "ready"; the key is written after a real warmup,
refreshed by a thread every third of its TTL, and replaced by a "failed" record when the executor fails.
"""

from __future__ import annotations

import json
import threading
import time
from bisect import bisect_left

from worker import contract

FAILED_TTL_S = 3600  # how long /health can still name a failed worker as the reason it is 503


class Heartbeat:
    def __init__(self, redis, *, model: str, node: str, ttl_s: int, info: dict) -> None:
        self.redis, self.ttl_s = redis, ttl_s
        self.key = contract.worker_key(model, node)
        self.record = {"model": model, "node": node, **info}
        self._stop = threading.Event()
        self._lock = threading.Lock()  # a beat in flight never overwrites the failed record
        self._thread = threading.Thread(target=self._beat, name="laya-heartbeat", daemon=True)

    def start(self) -> None:
        """Announce readiness now and keep it fresh until `fail` or `stop`."""
        self._publish("ready", self.ttl_s)
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
        while not self._stop.wait(self.ttl_s / 3):
            with self._lock:
                if self._stop.is_set():
                    return
                try:
                    self._publish("ready", self.ttl_s)
                except Exception:  # Redis unreachable for a moment: the next beat tries again
                    continue

    def _publish(self, state: str, ttl_s: int, **extra: str) -> None:
        record = json.dumps({**self.record, "state": state, "at": time.time(), **extra})
        pipe = self.redis.pipeline()
        pipe.set(self.key, record, ex=ttl_s)
        pipe.sadd(contract.WORKERS_KEY, self.key)
        pipe.execute()


def record_executor_seconds(pipe, model: str, seconds: float) -> None:
    """Add one observation to the model's executor-time histogram (cumulative buckets, as Prometheus wants)."""
    key = contract.executor_metrics_key(model)
    for bound in contract.EXECUTOR_BUCKETS[bisect_left(contract.EXECUTOR_BUCKETS, seconds):]:
        pipe.hincrby(key, f"le:{bound}", 1)
    pipe.hincrby(key, "count", 1)
    pipe.hincrbyfloat(key, "sum", seconds)
