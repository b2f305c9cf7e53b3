"""`laya-api`: the Flask API under gunicorn's gevent workers.

Each connection is a greenlet, not a thread: a sync call waiting for its answer, an idle kept-alive
connection and a client that trickles its request in hold no thread that another request needs (with
gunicorn's threads, 32 clients that never finished their headers took the API down). A request's head must
arrive within KEEPALIVE_S of the connection opening or of the previous response, else the connection is
closed; up to LAYA_API_CONNECTIONS connections are open at once per process.

Binds LAYA_HOST:LAYA_PORT (default 127.0.0.1:8080). With LAYA_API_PROCESSES > 1 the processes share
their request metrics through PROMETHEUS_MULTIPROC_DIR (a fresh temporary directory unless set).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile

import gunicorn.util
from gunicorn.app.base import BaseApplication

from app import config
from app.errors import json_error
from app.models import served_models
from app.protocol import default_protocol
from laya_common.version import add_version_flag

GRACEFUL_TIMEOUT_S = 30
# gunicorn's gevent worker reads each request head (the first on a connection too) under a timeout of this many
# seconds: an idle or trickling connection is closed after it
KEEPALIVE_S = 5
FILES_PER_CONNECTION = 2  # its socket, and at most one Redis connection while it waits


def gunicorn_options(settings: dict) -> dict:
    return {
        "bind": f"{settings['HOST']}:{settings['PORT']}",
        "worker_class": "gevent",
        "workers": settings["API_PROCESSES"],
        "worker_connections": settings["API_CONNECTIONS"],
        # the worker notifies the arbiter from its own greenlet, so this bounds a stuck process, not a request
        "timeout": int(settings["SYNC_TIMEOUT_S"]) + 30,
        "graceful_timeout": GRACEFUL_TIMEOUT_S,
        "keepalive": KEEPALIVE_S,
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
        default_protocol(settings)
    except ValueError as e:
        print(f"laya-api: {e}", file=sys.stderr)
        return 2
    if settings["REQUIRE_API_KEY"] and not settings["API_KEY"]:
        print("laya-api: LAYA_REQUIRE_API_KEY=1 but LAYA_API_KEY is empty; set a key (or 0 opens it)", file=sys.stderr)
        return 2
    metrics_dir = None
    if settings["API_PROCESSES"] > 1 and not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        metrics_dir = os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="laya-api-metrics-")
    raise_open_files_limit(FILES_PER_CONNECTION * settings["API_CONNECTIONS"] + 256)
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


def raise_open_files_limit(wanted: int) -> None:
    """Raise this process's soft limit of open files towards `wanted` (at most the hard limit): the default of
    1,024 on many hosts would refuse connections long before LAYA_API_CONNECTIONS."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


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
