"""The floor under the sync path: a bare no-op Celery task returning 1 KB over Redis, `send_task(...).get()`.

It uses the project's own Celery settings (`contract.celery_config`: JSON, acks late, prefetch 1) plus
Celery's Redis result backend for `.get()`, and starts a plain `celery worker` with one slot for
each pool measured (prefork with one child, solo, threads). Writes floor.json into --output.

    python -m recipe.celery_floor --redis-url redis://127.0.0.1:6379/0 --output /tmp/celery-floor-1
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from celery import Celery

from laya_common import contract
from laya_common.broker import transport

TASK, QUEUE = "laya.floor.noop", "laya.floor"
REPLY = "x" * 1024
POOLS = ("prefork", "solo", "threads")
WARMUPS, SAMPLES = 30, 300
START_TIMEOUT_S = 60


def make_celery(redis_url: str) -> Celery:
    app = Celery("laya-floor")
    app.conf.update(contract.celery_config(redis_url), result_backend=redis_url, task_default_queue=QUEUE)
    app.task(name=TASK, ignore_result=False)(noop)
    return app


def noop() -> str:
    return REPLY


# the `celery -A recipe.celery_floor worker` target
celery = make_celery(os.environ.get("LAYA_REDIS_URL", contract.DEFAULT_REDIS_URL))


def measure(redis_url: str, pool: str, *, warmups: int = WARMUPS, samples: int = SAMPLES) -> dict:
    """p50/p90/p99 and every sample (ms) of send_task(...).get() against a fresh one-slot worker of `pool`."""
    with FloorWorker(redis_url, pool, warmups=warmups) as floor:
        times = floor.sample(samples)
    return {**percentiles(times), "samples_ms": times}


class FloorWorker:
    """A plain one-slot `celery worker` of `pool` on QUEUE, started and warmed up on entering, stopped on
    leaving; `sample(n)` times n round trips through it, so that a caller can alternate them with its own."""

    def __init__(self, redis_url: str, pool: str, *, warmups: int = WARMUPS) -> None:
        self.redis_url, self.pool, self.warmups = redis_url, pool, warmups
        self.client = make_celery(redis_url)
        self._worker: subprocess.Popen | None = None

    def __enter__(self) -> FloorWorker:
        with self.client.connection_for_write() as conn:
            transport.purge(conn, QUEUE)
        self._worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "recipe.celery_floor",
                "worker",
                "--pool",
                self.pool,
                "--concurrency",
                "1",
                "--queues",
                QUEUE,
                "--hostname",
                f"floor-{self.pool}.{os.getpid()}@%h",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "--loglevel",
                "warning",
            ],
            env={**os.environ, "LAYA_REDIS_URL": self.redis_url},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )
        try:
            self.client.send_task(TASK, queue=QUEUE).get(timeout=START_TIMEOUT_S)  # the worker is up
            for _ in range(self.warmups):
                self.client.send_task(TASK, queue=QUEUE).get(timeout=10)
        except BaseException:
            self.__exit__()
            raise
        return self

    def sample(self, n: int) -> list[float]:
        """n round trips, one at a time, in ms."""
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            self.client.send_task(TASK, queue=QUEUE).get(timeout=10)
            times.append((time.perf_counter() - t0) * 1000)
        return times

    def __exit__(self, *exc) -> None:
        self._worker.terminate()
        self._worker.wait(30)


def percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "p50_ms": statistics.median(ordered),
        "p90_ms": ordered[int(0.9 * (len(ordered) - 1))],
        "p99_ms": ordered[int(0.99 * (len(ordered) - 1))],
    }


def main(*, redis_url: str, output: Path, pools: tuple[str, ...] = POOLS, samples: int = SAMPLES) -> int:
    from recipe.provenance import versions

    floor = {pool: measure(redis_url, pool, samples=samples) for pool in pools}
    output.mkdir(parents=True, exist_ok=True)
    report = {
        "command": sys.argv,
        "warmups": WARMUPS,
        "floor": floor,
        "load_average": os.getloadavg(),
        "cpus": os.cpu_count(),
        "versions": versions(("celery", "kombu", "redis", "billiard")),
    }
    (output / "floor.json").write_text(json.dumps(report, indent=2) + "\n")
    for pool, f in floor.items():
        print(f"celery_floor: {pool:8} p50 {f['p50_ms']:.2f} ms  p90 {f['p90_ms']:.2f}  p99 {f['p99_ms']:.2f}")
    return 0


def cli(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--redis-url",
        default=os.environ.get("LAYA_REDIS_URL", contract.DEFAULT_REDIS_URL),
        help="Redis to measure through (default: $LAYA_REDIS_URL or %(default)s)",
    )
    p.add_argument("--pools", default=",".join(POOLS), help="comma-separated worker pools (default: %(default)s)")
    p.add_argument("--samples", type=int, default=SAMPLES, help="measured round trips per pool (default: %(default)s)")
    p.add_argument("--output", type=Path, required=True, help="directory for floor.json")
    args = p.parse_args(argv)
    return main(redis_url=args.redis_url, output=args.output, pools=tuple(args.pools.split(",")), samples=args.samples)


if __name__ == "__main__":
    sys.exit(cli())
