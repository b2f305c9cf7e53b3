"""laya-stack supervises what it started: a killed Redis or API is started again, and the Redis password reaches
no log line and no command line. One stack serves every test here, started as `helpers.laya_stack` starts one
(its own Redis on a free port, its own cache) but with a password in LAYA_REDIS_URL; the last test stops it.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pytest
import redis
import requests

from service.helpers import BIN, NOUL, STACK_STARTUP_TIMEOUT_S, free_port, request_body, stack_env, wait_until

# distinctive, so finding it in a log or a command line means it was printed; in the URL percent-encoded, and
# with characters redis.conf must quote
PASSWORD = 'stack secret/"7f3a9c"\\'
SECRETS = (PASSWORD.encode(), quote(PASSWORD, safe="").encode())
MAXMEMORY_BYTES = 64 * 1024 * 1024
RESTART_TIMEOUT_S = 120  # a fresh process after its backoff, then a worker reconnecting, on a busy 2-core machine


@dataclass
class Stack:
    popen: subprocess.Popen
    log: Path
    base: str
    redis_url: str

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def pid(self, name: str) -> int:
        """The pid of the latest `name` the stack started, from its log line."""
        return int(re.findall(rf"^laya-stack: started {name}, pid (\d+):", self.text(), re.MULTILINE)[-1])

    def pids(self) -> list[int]:
        return [int(pid) for pid in re.findall(r"^laya-stack: started .+?, pid (\d+):", self.text(), re.MULTILINE)]

    def redis(self) -> redis.Redis:
        return redis.Redis.from_url(self.redis_url)

    def answers(self) -> None:
        """/health turns 200 again, then a sync request is answered."""
        wait_until(lambda: health(self.base) == 200, RESTART_TIMEOUT_S, "/health to answer 200 again", 0.25)
        r = requests.post(self.base + "/v1/systemone", json=request_body("refund please", q=NOUL), timeout=60)
        assert r.status_code == 200 and list(r.json()["answers"]) == ["q"], r.text


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("stack")
    redis_port, api_port = free_port(), free_port()
    redis_url = f"redis://:{quote(PASSWORD, safe='')}@127.0.0.1:{redis_port}/0"
    env = stack_env(tmp, redis_url, api_port, LAYA_REDIS_MAXMEMORY=f"{MAXMEMORY_BYTES // (1024 * 1024)}mb")
    log = tmp / "stack.log"
    with open(log, "wb") as out:
        popen = subprocess.Popen([str(BIN / "laya-stack")], env=env, stdout=out, stderr=subprocess.STDOUT)
    running = Stack(popen, log, f"http://127.0.0.1:{api_port}", redis_url)
    try:
        wait_until(
            lambda: popen.poll() is None and "ready at" in log.read_text(), STACK_STARTUP_TIMEOUT_S, "laya-stack: ready"
        )
        yield running
    finally:
        if popen.poll() is None:
            popen.send_signal(signal.SIGINT)
            popen.wait(60)


def health(base: str) -> int | None:
    try:
        return requests.get(base + "/health", timeout=5).status_code
    except (requests.ConnectionError, requests.Timeout):
        return None


def finished(job: str) -> dict | None:
    body = requests.get(job, timeout=60).json()
    return body if body["status"] in ("done", "failed") else None


def session(pid: int) -> list[int]:
    """The processes of session `pid` (the stack starts each child in a session of its own)."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue  # exited while we looked
        if int(fields[3]) == pid:  # after ")": state, ppid, pgrp, session
            members.append(int(stat.parent.name))
    return members


def test_its_redis_has_the_password_a_bound_without_eviction_and_none_on_a_command_line(stack):
    r = stack.redis()
    assert r.config_get("maxmemory") == {"maxmemory": str(MAXMEMORY_BYTES)}  # from LAYA_REDIS_MAXMEMORY
    assert r.config_get("maxmemory-policy") == {"maxmemory-policy": "noeviction"}
    assert r.config_get("appendonly") == {"appendonly": "yes"}
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(port=r.connection_pool.connection_kwargs["port"]).ping()
    server = stack.pid("redis")
    environ = Path(f"/proc/{server}/environ").read_bytes()
    assert not any(secret in environ for secret in SECRETS)  # LAYA_REDIS_URL is not passed
    # redis-server overwrites its own command line with a title once it runs, so the one it was given is checked
    # where the stack logs it (the last test); the others' are read as ps shows them
    for pid in (server, stack.pid("worker english"), stack.pid("api"), stack.popen.pid):
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        assert not any(secret in cmdline for secret in SECRETS), pid
    assert "redis://:***@127.0.0.1:" in stack.text()  # the URL as the log shows it


def test_a_killed_redis_is_started_again_with_what_it_held(stack):
    accepted = requests.post(stack.base + "/v1/jobs", json=request_body("where is my parcel?", q=NOUL), timeout=60)
    assert accepted.status_code == 202, accepted.text
    job = stack.base + accepted.headers["Location"]
    done = wait_until(lambda: finished(job), RESTART_TIMEOUT_S, "the job to finish")
    assert done["status"] == "done", done
    killed = stack.pid("redis")
    os.kill(killed, signal.SIGKILL)
    wait_until(lambda: stack.pid("redis") != killed, RESTART_TIMEOUT_S, "a fresh redis-server")
    assert "laya-stack: redis exited with status -9; starting a fresh one in " in stack.text()
    stack.answers()
    assert requests.get(job, timeout=60).json() == done  # the append-only file kept it


def test_a_killed_api_is_started_again_and_what_it_left_is_killed(stack):
    killed = stack.pid("api")
    (orphan,) = set(session(killed)) - {killed}  # its gunicorn worker
    # stopped, it cannot see that its master is gone and leave the port by itself, as a hung one would not
    os.kill(orphan, signal.SIGSTOP)
    try:
        os.kill(killed, signal.SIGKILL)
        wait_until(lambda: stack.pid("api") != killed, RESTART_TIMEOUT_S, "a fresh laya-api")
        assert "laya-stack: api exited with status -9; starting a fresh one in " in stack.text()
        wait_until(lambda: not session(killed), RESTART_TIMEOUT_S, "the killed API's worker to be gone")
        stack.answers()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(orphan, signal.SIGKILL)


def test_ctrl_c_stops_everything_with_status_0_and_no_line_shows_the_password(stack):
    started = stack.pids()
    stack.popen.send_signal(signal.SIGINT)
    assert stack.popen.wait(60) == 0, stack.text()[-3000:]
    assert all(not session(pid) for pid in started)
    assert health(stack.base) is None
    with pytest.raises(redis.ConnectionError):
        stack.redis().ping()
    log = stack.log.read_bytes()
    assert b"laya-stack: ready at" in log and not any(secret in log for secret in SECRETS)


def test_a_child_exiting_with_a_bad_setting_stops_the_stack_with_status_2(tmp_path):
    """A restart would repeat a bad setting, so the stack stops instead: here a checkpoint that is not there,
    which only the worker checks."""
    redis_port = free_port()
    env = stack_env(tmp_path, f"redis://127.0.0.1:{redis_port}/0", free_port())
    cmd = [str(BIN / "laya-stack"), "--checkpoint", f"english={tmp_path / 'missing'}"]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 2, out.stderr[-3000:]
    assert "laya-stack: worker english exited with status 2; stopping" in out.stderr
    assert "starting a fresh one" not in out.stderr
    with pytest.raises(redis.ConnectionError):
        redis.Redis(port=redis_port, socket_connect_timeout=2).ping()  # the Redis it started is stopped too
