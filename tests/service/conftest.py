"""The real service for tests: its own redis-server (password on), laya-worker processes and laya-api (gunicorn).

The main stack (database 0) starts once per session; tests that break a worker or restart an API get
their own database and processes, so they never disturb the others.
"""

from __future__ import annotations

import itertools
import shutil
import subprocess
from pathlib import Path

import pytest

from service.helpers import REDIS_PASSWORD, Launcher, Service, free_port, wait_for_redis

_databases = itertools.count(1)  # database 0 is the main stack's


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    """redis://:password@127.0.0.1:<port>: a private redis-server, never the system one."""
    server = shutil.which("redis-server") or "/usr/bin/redis-server"
    port, data = free_port(), tmp_path_factory.mktemp("redis")
    popen = subprocess.Popen(
        [
            server,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(data),
            "--requirepass",
            REDIS_PASSWORD,
            "--databases",
            "256",  # a database for each test that needs its own
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    base = f"redis://:{REDIS_PASSWORD}@127.0.0.1:{port}"
    wait_for_redis(base + "/0", popen, "redis-server")
    yield base
    popen.terminate()
    popen.wait(10)


@pytest.fixture(scope="session")
def checkpoint(tmp_path_factory) -> Path:
    from worker.commands.synthesize import synthesize

    return synthesize(tmp_path_factory.mktemp("checkpoint") / "tiny", size="tiny", seed=0)


@pytest.fixture(scope="session")
def launcher(tmp_path_factory, checkpoint):
    launcher = Launcher(tmp_path_factory.mktemp("logs"), checkpoint)
    yield launcher
    launcher.stop_all()


@pytest.fixture(scope="session")
def stack(redis_server, launcher) -> Service:
    """The main service: one warm worker and one API on database 0."""
    service = Service(redis_server + "/0")
    launcher.worker(service)
    launcher.api(service)
    service.wait_healthy()
    return service


@pytest.fixture
def private_db(redis_server):
    """A Redis database of its own for a test that breaks or restarts things (flushed before use)."""
    return _fresh_database(redis_server)


@pytest.fixture(scope="module")
def module_db(redis_server):
    """A Redis database of its own for a module's service (flushed before use)."""
    return _fresh_database(redis_server)


def _fresh_database(redis_server: str) -> str:
    import redis

    url = f"{redis_server}/{next(_databases)}"
    redis.Redis.from_url(url).flushdb()
    return url


@pytest.fixture
def bounded_redis(tmp_path):
    """(url, client, fill) of a redis-server of its own bounded at 16 MB without eviction; `fill` takes it past the
    bound as another tenant of the Redis might: values of 100 kB, then of 1 kB, then of 10 bytes until each is
    refused (a refusal is decided before a write, so the first ones refused may leave room for a smaller one)."""
    import redis

    port = free_port()
    popen = subprocess.Popen(
        [shutil.which("redis-server") or "/usr/bin/redis-server", "--port", str(port), "--bind", "127.0.0.1"]
        + ["--save", "", "--appendonly", "no", "--dir", str(tmp_path), "--requirepass", REDIS_PASSWORD]
        + ["--maxmemory", "16mb", "--maxmemory-policy", "noeviction"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    url = f"redis://:{REDIS_PASSWORD}@127.0.0.1:{port}/0"
    wait_for_redis(url, popen, "redis-server")
    db = redis.Redis.from_url(url)

    def fill() -> None:
        for size in (100_000, 1_000, 10):
            with pytest.raises(redis.exceptions.OutOfMemoryError):
                for i in range(100_000):
                    db.set(f"filler:{size}:{i}", "x" * size)

    yield url, db, fill
    popen.terminate()
    popen.wait(10)
