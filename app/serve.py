"""`laya-api`: the Flask API under gunicorn (threaded workers: a sync call holds a thread while it waits).

Binds LAYA_HOST:LAYA_PORT (default 127.0.0.1:8080). With LAYA_API_PROCESSES > 1 the processes share
their request metrics through PROMETHEUS_MULTIPROC_DIR (a fresh temporary directory unless set).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile

import gunicorn.util
from gunicorn.app.base import BaseApplication

from app import config
from app.errors import json_error
from app.http_worker import LingeringThreadWorker
from app.models import served_models
from worker.version import add_version_flag

GRACEFUL_TIMEOUT_S = 30


def gunicorn_options(settings: dict) -> dict:
    return {
        "bind": f"{settings['HOST']}:{settings['PORT']}",
        "worker_class": LingeringThreadWorker,  # gthread, kept-alive connections served back to back
        "workers": settings["API_PROCESSES"],
        "threads": settings["API_THREADS"],
        # gthread workers notify the arbiter from their main loop, so this bounds a stuck process, not a request
        "timeout": int(settings["SYNC_TIMEOUT_S"]) + 30,
        "graceful_timeout": GRACEFUL_TIMEOUT_S,
        "keepalive": 5,
        "accesslog": None,
        "errorlog": "-",
        "loglevel": "info",
        "proc_name": "laya-api",
        "control_socket_disable": True,  # several APIs on one host would fight over one socket path
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="laya-api",
        description=__doc__,
        epilog=config.env_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--access-log", action="store_true", help="log every request to stderr")
    add_version_flag(p)
    args = p.parse_args(argv)
    try:
        settings = {**config.DEFAULTS, **config.from_env()}
        served_models(settings)
    except ValueError as e:
        print(f"laya-api: {e}", file=sys.stderr)
        return 2
    metrics_dir = None
    if settings["API_PROCESSES"] > 1 and not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        metrics_dir = os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="laya-api-metrics-")
    gunicorn.util.write_error = write_json_error  # gunicorn's workers call it through the module
    options = gunicorn_options(settings)
    if args.access_log:
        options["accesslog"] = "-"
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        options["child_exit"] = _mark_process_dead
    try:
        Server(options).run()
    finally:
        if metrics_dir is not None:
            shutil.rmtree(metrics_dir, ignore_errors=True)
    return 0


def write_json_error(sock, status_int: int, reason: str, mesg: str) -> None:
    """What gunicorn writes for a request its HTTP parser refuses before Flask sees it (a request line over
    4094 bytes: 414, header fields too many or too large: 431, a malformed request: 400): the same status
    with the API's JSON error body, where gunicorn's own is an HTML page."""
    body = json_error(status_int, f"{reason}: {mesg}")
    head = (
        f"HTTP/1.1 {status_int} {reason}\r\nConnection: close\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    sock.sendall(head.encode("latin-1") + body)


def _mark_process_dead(_server, worker) -> None:
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)


class Server(BaseApplication):
    """gunicorn running `create_app()` with options given as a dict, not a config file."""

    def __init__(self, options: dict) -> None:
        self.options = options
        super().__init__()

    def load_config(self) -> None:
        for key, value in self.options.items():
            self.cfg.set(key, value)

    def load(self):
        from app import create_app

        return create_app()


if __name__ == "__main__":
    sys.exit(main())
