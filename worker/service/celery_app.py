"""`laya-worker`: the Celery worker that owns one executor (one GPU) and serves one model's queues.

One process does it all: it loads the checkpoint and answers a real warmup request, and only then starts
Celery's solo pool on the model's queues (one per class of work, taken in the order of laya_common.broker.queues),
running each task in this process, one at a time; once the consumer is ready, it announces readiness in Redis
(what /health reads). Tasks are acknowledged after their answer
is written (acks late, prefetch 1). If the process dies, the task it held goes back to the queue
once its heartbeat has expired, taken by another worker or the next one to start. An executor
failure stops the worker with status 1; run it under a supervisor that starts a fresh one.
"""

from __future__ import annotations

import argparse
import os
import sys

from celery import Celery
from celery.signals import task_received, worker_ready, worker_shutting_down

from laya_common import contract
from laya_common.broker import transport
from laya_common.settings import or_exit
from laya_common.version import add_version_flag
from worker.service import lifecycle, tracing
from worker.service.settings import WorkerSettings, env_help


def make_celery(settings: WorkerSettings) -> Celery:
    app = Celery("laya-worker")
    app.conf.update(
        contract.celery_config(
            settings.redis_url,
            visibility_timeout_s=settings.visibility_timeout_s,
            health_check_interval_s=settings.health_check_interval_s,
        ),
        task_default_queue=settings.queues[0],
        broker_transport=transport.NAME,
        include=["worker.service.tasks"],
    )
    return app


settings = or_exit("laya-worker", WorkerSettings.from_env)  # a bad LAYA_* value: one line, exit 2
celery = make_celery(settings)


@task_received.connect
def _stamp_received(request, **_: object) -> None:
    tracing.on_received(request)


@worker_ready.connect
def _announce(**_: object) -> None:
    lifecycle.announce()


@worker_shutting_down.connect
def _stop_taking(**_: object) -> None:
    """Sent in the main process when a shutdown begins (SIGTERM, SIGINT): a task answering requests back to back
    takes no more and returns once what it holds is answered, so that the worker can stop."""
    lifecycle.stop_taking()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="laya-worker", description=__doc__, epilog=env_help(), formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--loglevel", default="info", help="Celery log level (default: info)")
    add_version_flag(p)
    args = p.parse_args(argv)
    # OpenMP threads that spin between ops steal the few cores an API and Redis on the same host need
    # (seen on a busy 2-core machine; no stored measurement, so no figure here).
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        settings.check_files()
    except FileNotFoundError as e:
        print(f"laya-worker: {e}", file=sys.stderr)
        return 2
    celery.log.setup(loglevel=args.loglevel.upper())  # as the worker sets it up, for the engine's start too
    try:
        lifecycle.start(settings, celery)
    except Exception:
        return 1  # logged, and the worker's record says why
    try:
        celery.worker_main(
            [
                "worker",
                "--pool",
                "solo",
                "--concurrency",
                "1",
                "--queues",
                ",".join(settings.queues),
                "--hostname",
                f"{settings.model}.{os.getpid()}@%h",
                "--loglevel",
                args.loglevel,
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
            ]
        )
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    else:
        code = 0
    finally:
        lifecycle.stop()
    return 1 if lifecycle.failed() else code


if __name__ == "__main__":
    sys.exit(main())
