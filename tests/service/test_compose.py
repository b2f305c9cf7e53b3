"""docker-compose.yml and the Dockerfile agree: targets, commands, and the environment variables each command reads.

No Docker engine runs here, so nothing is built: this reads both files as data.
"""

from __future__ import annotations

import json
import re
from importlib import metadata
from pathlib import Path

import pytest
import yaml

from app.config import SETTINGS
from worker import contract
from worker.settings import ENV

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = {ep.name for ep in metadata.distribution("laya-service").entry_points if ep.group == "console_scripts"}
# what each command reads from the environment
READS = {
    "laya-api": {setting.var for setting in SETTINGS.values()},
    "laya-worker": {setting.var for setting in ENV.values()},
    "laya-bundle": set(),
}
TARGET_OF = {"api": "api", "worker": "worker", "worker-typed-decisions": "worker", "bundle": "bundle"}


def dockerfile_stages() -> dict[str, list[tuple[str, str]]]:
    """Stage name ("" before the first FROM) -> its instructions as (INSTRUCTION, arguments), lines joined."""
    text = re.sub(r"\\\n\s*", " ", (ROOT / "Dockerfile").read_text())
    stages: dict[str, list[tuple[str, str]]] = {"": []}
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        instruction, _, rest = line.strip().partition(" ")
        if instruction == "FROM":
            base, _, name = rest.partition(" AS ")
            stages[name] = [("FROM", base)]
        else:
            stages[next(reversed(stages))].append((instruction, rest))
    return stages


STAGES = dockerfile_stages()


def stage(name: str, instruction: str) -> list[str]:
    return [rest for inst, rest in STAGES[name] if inst == instruction]


def env_of(name: str) -> set[str]:
    """The service's variables a stage's ENV sets (PATH and the like are the image's own)."""
    return {pair.split("=")[0] for rest in stage(name, "ENV") for pair in rest.split() if pair.startswith("LAYA_")}


@pytest.fixture(scope="module")
def services() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]


def test_every_service_builds_its_roles_target(services):
    assert set(services) == {"redis", *TARGET_OF}
    for name, target in TARGET_OF.items():
        assert services[name]["build"] == {"context": ".", "target": target, "args": {"GIT_COMMIT": "${GIT_COMMIT:-}"}}
    assert set(STAGES) == {"", "wheel", *TARGET_OF.values()}


def test_the_wheel_is_built_once_and_installed_never_editable():
    builds = [name for name in STAGES if any("python -m build --wheel" in run for run in stage(name, "RUN"))]
    assert builds == ["wheel"]
    for name in ("api", "worker", "bundle"):
        assert stage(name, "COPY") == ["--from=wheel /dist /dist"]
        installs = [run for run in stage(name, "RUN") if "/dist" in run]
        assert installs and all("pip install" in run and ".whl" in run for run in installs)
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert " -e " not in dockerfile and "--editable" not in dockerfile


def test_the_api_image_is_slim_and_torch_free_and_the_worker_image_carries_cuda_13_torch():
    assert stage("api", "FROM") == ["python:3.11-slim"]
    api_runs = " ".join(stage("api", "RUN"))
    assert "[" not in api_runs and "torch" not in api_runs and "apt-get" not in api_runs  # base install, no compiler
    assert stage("api", "USER") == ["laya"] and stage("worker", "USER") == ["laya"]

    args = {rest.split("=")[0]: rest.split("=", 1)[1] for inst, rest in STAGES[""] if inst == "ARG" and "=" in rest}
    assert args["TORCH_VERSION"] == "2.11.0" and args["TORCH_INDEX"].endswith("/cu130")  # as on the GPU machine
    assert args["CUDA_VERSION"].startswith("13.")
    assert stage("worker", "FROM") == ["nvidia/cuda:${CUDA_VERSION}-runtime-ubuntu24.04"]
    assert stage("bundle", "FROM") == ["nvidia/cuda:${CUDA_VERSION}-devel-ubuntu24.04"]  # nvcc
    for name, extras in (("worker", "[worker]"), ("bundle", "[worker,build]")):
        runs = " ".join(stage(name, "RUN"))
        assert '"torch==$TORCH_VERSION"' in runs and '--index-url "$TORCH_INDEX"' in runs
        assert f'"$whl{extras}"' in runs


def test_each_command_is_a_console_script_and_reads_every_variable_it_is_given(services):
    for name, target in TARGET_OF.items():
        (cmd,) = stage(target, "CMD")
        program = json.loads(cmd)[0]
        assert program in SCRIPTS
        command = services[name].get("command", json.loads(cmd))
        assert command[0] == program or command[:2] == ["sh", "-c"] and command[2].startswith(program + " ")
        given = set(services[name].get("environment", {})) | env_of(target)
        assert given <= READS[program], f"{name}: {sorted(given - READS[program])} are read by no {program}"


def test_workers_one_per_model_each_with_its_checkpoint_and_gpu(services):
    api = services["api"]
    assert api["environment"]["LAYA_MODELS"] == "${LAYA_MODELS:-english}"
    workers = [services["worker"], services["worker-typed-decisions"]]
    assert [w["environment"]["LAYA_MODEL"] for w in workers] == ["english", "typed-decisions"]
    assert services["worker-typed-decisions"]["profiles"] == ["typed-decisions"]
    assert services["bundle"]["profiles"] == ["bundle"]
    gpus = []
    for worker in workers:
        assert contract.laya_model(worker["environment"]["LAYA_MODEL"])
        assert worker["environment"]["LAYA_CHECKPOINT"] == "/checkpoint" and "LAYA_CHECKPOINT" in env_of("worker")
        assert any(v.endswith(":/checkpoint:ro") for v in worker["volumes"])
        (device,) = worker["deploy"]["resources"]["reservations"]["devices"]
        assert device["driver"] == "nvidia" and device["capabilities"] == ["gpu"]
        gpus += device["device_ids"]
    assert len(set(gpus)) == len(gpus)
    assert any(v.endswith(":/bundle") for v in services["bundle"]["volumes"])  # written, not read-only


def test_redis_keeps_its_append_only_file_and_every_service_is_health_checked(services):
    redis = services["redis"]
    assert redis["command"][redis["command"].index("--appendonly") + 1] == "yes"
    assert any(v.endswith(":/data") for v in redis["volumes"])
    for name in ("redis", "api", "worker", "worker-typed-decisions"):
        assert services[name]["healthcheck"]["test"][0] == "CMD"
        assert services[name]["restart"] in ("unless-stopped", "always")
    assert "/health" in " ".join(services["api"]["healthcheck"]["test"])
    for name in ("api", "worker", "worker-typed-decisions"):
        assert services[name]["environment"]["LAYA_REDIS_URL"] == "redis://redis:6379/0"
        assert services[name]["depends_on"]["redis"]["condition"] == "service_healthy"
