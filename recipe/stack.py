"""A whole service for recipes: a private redis-server on a free port, laya-worker(s) and laya-api, stopped together.

    python -m recipe.stack --checkpoint DIR --logs DIR -- COMMAND [ARG ...]

starts one (append-only file on, LAYA_TRACE=1 on the API), runs COMMAND with LAYA_FRONTEND and
LAYA_REDIS_URL pointing at it, then stops everything and exits with COMMAND's status. The worker's
executor comes from LAYA_EXECUTOR (default auto). Recipes that break the service on purpose
(recipe/faults.py, recipe/load.py) drive a Stack directly.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

from laya_common import contract
from worker.commands.stack import wait_until

START_TIMEOUT_S = 600  # a worker's load + warmup of the large checkpoint, or of the tiny one on a busy CPU
BIN = Path(sys.executable).parent
CHECKOUT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def checkout_env() -> dict[str, str]:
    """This environment with the checkout on PYTHONPATH: recipes are not installed with the package, and a worker
    a recipe starts may run one of them (LAYA_EXECUTOR=recipe.faulty_executor:make). After what PYTHONPATH holds
    already: recipe/ab.sh puts an older tree of the service there, ahead of this one."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (os.environ.get("PYTHONPATH"), str(CHECKOUT))))}


def command(name: str) -> str:
    """A console script of this project: next to this interpreter (a venv), else on PATH."""
    local = BIN / name
    return str(local) if local.exists() else (shutil.which(name) or name)


class Stack:
    """One Redis, the workers and one API; every process's output goes to a log file in `logs`."""

    def __init__(
        self,
        checkpoint: Path,
        logs: Path,
        *,
        aof: bool = True,
        heartbeat_ttl_s: int = 15,
        worker_env: dict[str, str] | None = None,
    ) -> None:
        self.checkpoint, self.logs, self.aof, self.worker_env = Path(checkpoint), Path(logs), aof, worker_env or {}
        self.heartbeat_ttl_s = heartbeat_ttl_s
        self.logs.mkdir(parents=True, exist_ok=True)
        self.redis_port, self.api_port = free_port(), free_port()
        self.redis_url = f"redis://127.0.0.1:{self.redis_port}/0"
        self.frontend = f"http://127.0.0.1:{self.api_port}"
        self.redis_process: subprocess.Popen | None = None
        self.api: subprocess.Popen | None = None
        self.workers: list[subprocess.Popen] = []
        self._started = 0

    def __enter__(self) -> Stack:
        # its processes run in sessions of their own, out of reach of a `timeout` that stops this one:
        # a SIGTERM unwinds through __exit__ and stops them too
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def _start(self, name: str, cmd: list[str], env: dict[str, str]) -> subprocess.Popen:
        self._started += 1
        with open(self.logs / f"{self._started:02d}-{name}.log", "wb") as log:
            return subprocess.Popen(
                cmd, env={**checkout_env(), **env}, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )

    # --- processes ---

    def start_redis(self) -> None:
        """redis-server on this stack's port and data directory (a restart finds its append-only file)."""
        data = self.logs / "redis-data"
        data.mkdir(exist_ok=True)
        self.redis_process = self._start(
            "redis",
            [
                shutil.which("redis-server") or "redis-server",
                "--bind",
                "127.0.0.1",
                "--port",
                str(self.redis_port),
                "--dir",
                str(data),
                "--save",
                "",
                "--appendonly",
                "yes" if self.aof else "no",
            ],
            {},
        )
        wait_until(self._redis_answers, 30, "redis-server")

    def stop_redis(self) -> None:
        """SIGTERM, as an orderly restart does: the append-only file is flushed first."""
        stop(self.redis_process)

    def start_worker(self, **env: str) -> subprocess.Popen:
        worker = self._start(
            "worker",
            [command("laya-worker"), "--loglevel", "warning"],
            {
                "LAYA_REDIS_URL": self.redis_url,
                "LAYA_CHECKPOINT": str(self.checkpoint),
                "LAYA_EXECUTOR": os.environ.get("LAYA_EXECUTOR", "auto"),
                "LAYA_HEARTBEAT_TTL_S": str(self.heartbeat_ttl_s),
                **self.worker_env,
                **env,
            },
        )
        self.workers.append(worker)
        return worker

    def start_api(self, **env: str) -> subprocess.Popen:
        self.api = self._start(
            "api",
            [command("laya-api")],
            {
                "LAYA_REDIS_URL": self.redis_url,
                "LAYA_HOST": "127.0.0.1",
                "LAYA_PORT": str(self.api_port),
                "LAYA_TRACE": "1",
                **env,
            },
        )
        wait_until(lambda: self._get("/health") is not None, 60, "laya-api to answer")
        return self.api

    def start(self) -> Stack:
        """Redis, one worker and the API, waited for until healthy."""
        self.start_redis()
        self.start_worker()
        self.start_api()
        self.wait_healthy()
        return self

    def stop(self) -> None:
        for process in [self.api, *self.workers, self.redis_process]:
            stop(process)

    # --- state ---

    def health(self) -> int | None:
        """/health's status, or None while the API does not answer."""
        return self._get("/health")

    def wait_healthy(self, timeout_s: float = START_TIMEOUT_S) -> None:
        def healthy() -> bool:
            for worker in self.workers:
                if worker.poll() not in (None, 0) and all(w.poll() is not None for w in self.workers):
                    raise RuntimeError(f"every worker exited (last status {worker.returncode}); see {self.logs}")
            return self.health() == 200

        wait_until(healthy, timeout_s, "/health to answer 200", interval_s=0.1)

    def wait_ready(self, worker: subprocess.Popen, timeout_s: float = START_TIMEOUT_S) -> None:
        """Until `worker` itself reports ready (a dead worker's record says ready until it expires)."""

        def ready() -> bool:
            if worker.poll() is not None:
                raise RuntimeError(f"the worker exited with status {worker.returncode}; see {self.logs}")
            return any(w.get("pid") == worker.pid for w in self.ready_workers())

        wait_until(ready, timeout_s, f"worker {worker.pid} to be warm", interval_s=0.1)

    def ready_workers(self) -> list[dict]:
        from redis import Redis

        return [w for w in contract.read_workers(Redis.from_url(self.redis_url)) if w["state"] == "ready"]

    def _redis_answers(self) -> bool:
        from redis import Redis
        from redis.exceptions import RedisError

        try:
            return bool(Redis.from_url(self.redis_url, socket_connect_timeout=1).ping())
        except RedisError:
            return False

    def _get(self, path: str) -> int | None:
        try:
            with urllib.request.urlopen(self.frontend + path, timeout=5) as response:
                return response.status
        except urllib.error.HTTPError as e:
            return e.code
        except OSError:
            return None


def stop(process: subprocess.Popen | None, sig: int = signal.SIGTERM, timeout_s: float = 60) -> int | None:
    if process is None:
        return None
    if process.poll() is None:
        process.send_signal(sig)
        try:
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return process.returncode


def add_stack_arguments(p: argparse.ArgumentParser, writes: str) -> None:
    """--checkpoint and --output, as every recipe that starts its own service reads them."""
    p.add_argument("--checkpoint", type=Path, required=True, help="checkpoint directory for the workers")
    p.add_argument("--output", type=Path, required=True, help=f"directory for {writes} and the processes' logs")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m recipe.stack", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--checkpoint", type=Path, required=True, help="checkpoint directory for the worker")
    p.add_argument("--logs", type=Path, required=True, help="directory for the processes' logs and Redis data")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARG ...] to run against the stack")
    args = p.parse_args(argv)
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not cmd:
        p.error("give the command to run after --")
    with Stack(args.checkpoint, args.logs) as stack:
        stack.start()
        env = {**os.environ, "LAYA_FRONTEND": stack.frontend, "LAYA_REDIS_URL": stack.redis_url}
        return subprocess.run(cmd, env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
