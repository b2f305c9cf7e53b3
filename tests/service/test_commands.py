"""The three commands: --help, laya-worker's start-up checks, and laya-stack bringing up a healthy stack."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import redis
import requests

from laya_common.version import git_commit, package_version
from service.helpers import BIN, NOUL, laya_stack, request_body

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


@pytest.mark.parametrize("command", ["laya-api", "laya-worker", "laya-stack", "laya-run", "laya-bundle"])
def test_every_command_has_help_and_version(command):
    out = subprocess.run([str(BIN / command), "--help"], capture_output=True, text=True, timeout=60, check=True)
    assert "usage:" in out.stdout and "--version" in out.stdout
    out = subprocess.run([str(BIN / command), "--version"], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout == f"{command} {package_version()} (commit {git_commit()})\n"


README_RECIPES = sorted(set(re.findall(r"^\.venv/bin/python -m (recipe\.\w+)", README.read_text(), re.M)))


def test_the_readme_runs_recipes_as_it_writes_them():
    """Each recipe the README runs (`.venv/bin/python -m recipe.X`), from the checkout's root: its --help."""
    assert len(README_RECIPES) >= 4, README_RECIPES
    for module in README_RECIPES:
        out = subprocess.run(
            [str(BIN / "python"), "-m", module, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=60
        )
        assert out.returncode == 0 and "usage:" in out.stdout, (module, out.stderr[-2000:])


@pytest.mark.parametrize(
    ("command", "variable", "value"),
    [
        ("laya-worker", "LAYA_EAGER", "maybe"),
        ("laya-worker", "LAYA_EXECUTOR", "tpu"),
        ("laya-worker", "LAYA_WARM_BUCKETS", "some"),
        ("laya-worker", "LAYA_HEARTBEAT_TTL_S", "soon"),
        ("laya-api", "LAYA_PORT", "eighty"),
        ("laya-api", "LAYA_TRACE", "perhaps"),
        ("laya-stack", "LAYA_BATCH_CHUNK", "1.5"),
        ("laya-stack", "LAYA_PORT", "eighty"),  # the API's, checked before anything starts
        ("laya-stack", "LAYA_REDIS_MAXMEMORY", "lots"),
        ("laya-stack", "LAYA_REDIS_MAXMEMORY", "0"),  # no bound at all
    ],
)
def test_a_bad_setting_is_one_line_and_status_2(tmp_path, command, variable, value):
    env = {
        variable: value,
        "LAYA_REDIS_URL": "redis://127.0.0.1:9/0",
        "LAYA_CHECKPOINT": str(tmp_path),
        "HOME": str(tmp_path),
    }
    out = subprocess.run([str(BIN / command)], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{command}: {variable}={value!r}"), out.stderr


def test_worker_refuses_to_start_without_a_checkpoint(tmp_path):
    env = {"LAYA_CHECKPOINT": str(tmp_path / "missing"), "LAYA_REDIS_URL": "redis://127.0.0.1:9/0", "PATH": ""}
    out = subprocess.run([str(BIN / "laya-worker")], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 2 and "missing" in out.stderr and "Traceback" not in out.stderr


def test_laya_stack_starts_redis_a_worker_and_the_api_and_stops_them_on_ctrl_c(tmp_path):
    """The README's run command on a machine with no Redis and no checkpoint: synthesized, started, healthy."""
    with laya_stack(tmp_path) as (base, redis_url):
        assert requests.get(base + "/health", timeout=10).status_code == 200
        r = requests.post(base + "/v1/systemone", json=request_body("refund please", q=NOUL), timeout=60)
        assert r.status_code == 200 and list(r.json()["answers"]) == ["q"]
        assert (tmp_path / "cache" / "laya" / "tiny-seed0" / "model.safetensors").is_file()
        assert (tmp_path / "cache" / "laya" / "redis" / "appendonlydir").is_dir()  # its own Redis, AOF on
    with pytest.raises(requests.ConnectionError):
        requests.get(base + "/health", timeout=5)
    with pytest.raises(redis.ConnectionError):
        redis.Redis.from_url(redis_url, socket_connect_timeout=2).ping()


def test_laya_stack_reads_the_apis_address_as_laya_api_does():
    from app import config
    from worker.commands import stack

    for key, setting in stack.API_ADDRESS.items():
        assert (setting.var, setting.default) == (config.SETTINGS[key].var, config.SETTINGS[key].default)


def test_setup_succeeds_without_nvcc_and_says_what_only_the_bundle_build_needs():
    """The README's first command on a machine without the CUDA toolkit (here: nvcc hidden from PATH)."""
    out = subprocess.run(
        [str(ROOT / "scripts" / "setup.sh")],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stderr
    assert "nvcc" in out.stderr and "bundle" in out.stderr


def test_setup_for_a_gpu_stops_before_installing_anything_when_nvcc_is_missing():
    """`scripts/setup.sh --gpu` is for building a bundle: without nvcc it says so, not after a CUDA torch download."""
    stamps = sorted((ROOT / ".venv").glob(".setup-*"))
    out = subprocess.run(
        [str(ROOT / "scripts" / "setup.sh"), "--gpu"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 1 and "--gpu builds a bundle, which needs nvcc" in out.stderr, out.stderr
    assert sorted((ROOT / ".venv").glob(".setup-*")) == stamps  # nothing installed
