"""`laya-worker`: the Celery worker that owns one executor (one GPU) and serves one model's queue.

It runs Celery's prefork pool with one child process: the child loads the checkpoint and answers a
real warmup request, announces readiness in Redis (what /health reads), and only then does the worker
start consuming its queue.
Tasks are acknowledged after they finish (acks_late), one at a time (prefetch 1), and requeued if the
child dies mid-task (reject_on_worker_lost). An executor failure stops the worker with status 1.
`celery -A worker.celery_app worker` works too; this command adds the checks and the fixed pool.
"""

from __future__ import annotations

import argparse
import os
import sys

from celery import Celery
from celery.signals import task_postrun, task_received, worker_process_init, worker_process_shutdown

from worker import contract, lifecycle, tracing
from worker.settings import WorkerSettings, env_help


def make_celery(settings: WorkerSettings) -> Celery:
    app = Celery("laya-worker")
    app.conf.update(
        contract.celery_config(settings.redis_url, result_ttl_s=settings.result_ttl_s,
                               visibility_timeout_s=settings.visibility_timeout_s),
        task_default_queue=settings.queue,
        worker_proc_alive_timeout=settings.startup_timeout_s,  # the child reports up only once warm
        include=["worker.tasks"],
    )
    return app


settings = WorkerSettings.from_env()
celery = make_celery(settings)


@worker_process_init.connect
def _start_engine(sender: str, **_: object) -> None:
    lifecycle.start(settings, celery, node=sender)  # sender: the worker's node name


@worker_process_shutdown.connect
def _stop_engine(**_: object) -> None:
    lifecycle.stop()


@task_received.connect
def _stamp_received(request, **_: object) -> None:
    tracing.on_received(request)


@task_postrun.connect
def _store_trace(task_id: str, task, **_: object) -> None:
    trace = tracing.of(task.request)
    if trace is not None:  # the result backend has written the result by now
        tracing.stamp(trace, "result_written")
        lifecycle.current().store_trace(task_id, trace)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="laya-worker", description=__doc__, epilog=env_help(),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--loglevel", default="info", help="Celery log level (default: info)")
    args = p.parse_args(argv)
    # OpenMP threads that spin between ops steal the few cores an API and Redis on the same host need
    # (on a busy 2-core machine: reference engine time 47 ms -> 16 ms, HTTP overhead 22 ms -> 17 ms).
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        settings.check_files()
    except FileNotFoundError as e:
        print(f"laya-worker: {e}", file=sys.stderr)
        return 2
    try:
        # the queue is excluded at start: the pool child adds it once warm (worker.lifecycle)
        celery.worker_main(["worker", "--pool", "prefork", "--concurrency", "1", "--queues", settings.queue,
                            "--exclude-queues", settings.queue,
                            "--hostname", f"{settings.model}.{os.getpid()}@%h", "--loglevel", args.loglevel,
                            "--without-gossip", "--without-mingle"])
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    else:
        code = 0
    return 1 if lifecycle.FAILED.value else code


if __name__ == "__main__":
    sys.exit(main())
