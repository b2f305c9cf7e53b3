"""The packages `python -m build` makes, and the base install: what an API host gets from `pip install laya-service`.

One fresh virtual environment holds only the wheel and its base dependencies (no torch); its `laya-api` serves
the main stack, whose worker runs elsewhere (in this checkout's environment).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from laya_common.version import git_commit, package_version
from service.helpers import NOUL, Service, request_body

ROOT = Path(__file__).resolve().parents[2]
# a fresh host: nothing of a checkout on the path, whatever the shell running the tests has there
FRESH_HOST = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
WORKER_ONLY = {"torch", "numpy", "safetensors", "tokenizers", "huggingface-hub", "tqdm", "tilelang"}


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    """An sdist, and the wheel built from it (python -m build), using this environment's setuptools."""
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return out


@pytest.fixture(scope="module")
def base_bin(tmp_path_factory, dist) -> Path:
    """bin/ of a fresh virtual environment with `pip install dist/*.whl` in it: the base install."""
    venv = tmp_path_factory.mktemp("base-venv")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    (wheel,) = dist.glob("*.whl")
    subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)],
        check=True,
        capture_output=True,
        timeout=600,
        env=FRESH_HOST,
    )
    return venv / "bin"


def run(command: list, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in command], capture_output=True, text=True, timeout=120, env=FRESH_HOST, **kw)


def test_the_sdist_and_the_wheel_carry_the_commit_they_were_built_from(dist):
    stamp = f"COMMIT = {git_commit()!r}"
    (sdist,) = dist.glob("*.tar.gz")
    with tarfile.open(sdist) as tar:
        names = tar.getnames()
        top = names[0].split("/")[0]
        assert stamp in tar.extractfile(f"{top}/laya_common/_commit.py").read().decode()
    assert f"{top}/tests/service/test_base_install.py" in names  # the tests travel with the sdist
    (wheel,) = dist.glob("*.whl")
    with zipfile.ZipFile(wheel) as whl:
        assert stamp in whl.read("laya_common/_commit.py").decode()
        assert not any(name.startswith(("tests/", "recipe/")) for name in whl.namelist())  # tools, not the product


def test_the_base_install_is_the_api_without_torch(base_bin):
    listed = json.loads(run([base_bin / "pip", "list", "--format=json"]).stdout)
    installed = {p["name"].lower().replace("_", "-") for p in listed}
    assert {"flask", "marshmallow", "celery", "redis", "gunicorn", "prometheus-client"} <= installed
    assert not installed & WORKER_ONLY
    assert run([base_bin / "python", "-c", "from app import create_app; create_app()"]).returncode == 0
    assert "No module named 'torch'" in run([base_bin / "python", "-c", "import torch"]).stderr
    assert "usage: laya-api" in run([base_bin / "laya-api", "--help"], check=True).stdout
    version = run([base_bin / "laya-api", "--version"], check=True).stdout
    assert version == f"laya-api {package_version()} (commit {git_commit()})\n"


def test_the_base_install_serves_with_the_worker_elsewhere(base_bin, stack, launcher):
    service = Service(stack.redis_url)
    launcher.api(service, bin_dir=base_bin)
    health = service.get("/health")
    assert health.status_code == 200 and health.json()["models"] == {"english": 1}
    info = service.get("/openapi.json").json()["info"]
    assert (info["version"], info["x-commit"]) == (package_version(), git_commit())
    payload = request_body("Please refund the duplicate charge.", q=NOUL)
    r = service.post("/v1/systemone", json=payload)
    assert r.status_code == 200 and r.content == stack.post("/v1/systemone", json=payload).content
