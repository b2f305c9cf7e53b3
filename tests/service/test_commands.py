"""The three commands: --help, laya-worker's start-up checks, and laya-stack bringing up a healthy stack."""

from __future__ import annotations

import signal
import subprocess

import pytest
import redis
import requests

from service.helpers import BIN, NOUL, free_port, request_body, wait_until


@pytest.mark.parametrize("command", ["laya-api", "laya-worker", "laya-stack"])
def test_every_command_has_help(command):
    out = subprocess.run([str(BIN / command), "--help"], capture_output=True, text=True, timeout=60, check=True)
    assert "usage:" in out.stdout


def test_worker_refuses_to_start_without_a_checkpoint(tmp_path):
    env = {"LAYA_CHECKPOINT": str(tmp_path / "missing"), "LAYA_REDIS_URL": "redis://127.0.0.1:9/0", "PATH": ""}
    out = subprocess.run([str(BIN / "laya-worker")], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 2 and "missing" in out.stderr and "Traceback" not in out.stderr


def test_laya_stack_starts_redis_a_worker_and_the_api_and_stops_them_on_ctrl_c(tmp_path):
    """The README's run command on a machine with no Redis and no checkpoint: synthesized, started, healthy."""
    redis_port, api_port = free_port(), free_port()
    redis_url = f"redis://127.0.0.1:{redis_port}/0"
    env = {"PATH": str(BIN) + ":/usr/bin:/bin", "HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "cache"),
           "LAYA_REDIS_URL": redis_url, "LAYA_PORT": str(api_port), "LAYA_EXECUTOR": "reference",
           "LAYA_DEVICE": "cpu"}
    log = tmp_path / "stack.log"
    with open(log, "wb") as out:
        stack = subprocess.Popen([str(BIN / "laya-stack")], env=env, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{api_port}"
    try:
        wait_until(lambda: stack.poll() is None and "ready at" in log.read_text(), 240, "laya-stack: ready")
        assert requests.get(base + "/health", timeout=10).status_code == 200
        r = requests.post(base + "/v1/systemone", json=request_body("refund please", q=NOUL), timeout=60)
        assert r.status_code == 200 and list(r.json()["answers"]) == ["q"]
        assert (tmp_path / "cache" / "laya" / "tiny-seed0" / "model.safetensors").is_file()
        assert (tmp_path / "cache" / "laya" / "redis" / "appendonlydir").is_dir()  # its own Redis, AOF on
    finally:
        stack.send_signal(signal.SIGINT)
        assert stack.wait(60) == 0, log.read_text()[-3000:]
    with pytest.raises(requests.ConnectionError):
        requests.get(base + "/health", timeout=5)
    with pytest.raises(redis.ConnectionError):
        redis.Redis.from_url(redis_url, socket_connect_timeout=2).ping()
