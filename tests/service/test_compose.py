"""docker-compose.yml and the Dockerfile agree: targets, commands, and the environment variables each command reads.

No Docker engine runs here, so nothing is built: this reads both files as data.
"""

from __future__ import annotations

import json
import re
import shlex
from importlib import metadata
from pathlib import Path

import pytest
import yaml

from app.config import SETTINGS
from laya_common import contract
from worker.service.settings import ENV

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = {ep.name for ep in metadata.distribution("laya-service").entry_points if ep.group == "console_scripts"}
# what each command reads from the environment
READS = {
    "laya-api": {setting.var for setting in SETTINGS.values()},
    "laya-worker": {setting.var for setting in ENV.values()},
    "laya-bundle": set(),
}
TARGET_OF = {"api": "api", "worker": "worker", "worker-typed-decisions": "worker", "bundle": "bundle"}
# what compose needs in the environment (or .env) for any command
REQUIRED = {"LAYA_REDIS_PASSWORD": "pw-0123abcd", "LAYA_CHECKPOINT_DIR": "/ckpt"}
REDIS_URL_SERVICES = ("api", "worker", "worker-typed-decisions")
# compose's interpolation: $$, $VAR, ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?error}, ${VAR?error}
INTERPOLATION = re.compile(r"\$(?:(\$)|(\w+)|\{(\w+)(?:(:?[-?])([^}]*))?\})")


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


def interpolated(value: object, env: dict[str, str]) -> object:
    """`value` (the compose file or a part of it) as compose reads it with `env`; ValueError where a required
    variable is missing, with compose's message."""
    if isinstance(value, dict):
        return {key: interpolated(item, env) for key, item in value.items()}
    if isinstance(value, list):
        return [interpolated(item, env) for item in value]
    if not isinstance(value, str):
        return value

    def substitute(m: re.Match) -> str:
        if m[1]:
            return "$"
        name, form, word = m[2] or m[3], m[4] or "", m[5] or ""
        unset = name not in env or (form.startswith(":") and env[name] == "")
        if unset and form.endswith("?"):
            raise ValueError(f"{name}: {word}")
        return word if unset and form.endswith("-") else env.get(name, "")

    return INTERPOLATION.sub(substitute, value)


def composed(**env: str) -> dict:
    """The services as compose runs them with REQUIRED and `env` set."""
    return interpolated(yaml.safe_load((ROOT / "docker-compose.yml").read_text()), {**REQUIRED, **env})["services"]


def redis_server_argv(redis: dict) -> list[str]:
    """The redis-server arguments the redis service's `sh -c` runs, its $VARIABLES taken from its environment."""
    shell, flag, script = redis["command"]
    assert (shell, flag) == ("sh", "-c")
    words = [re.sub(r"\$(\w+)", lambda m: redis["environment"][m[1]], word) for word in shlex.split(script)]
    assert words[:3] == ["exec", "docker-entrypoint.sh", "redis-server"]  # the image's entrypoint: user redis
    return words[3:]


def option(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


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
    redis = composed()["redis"]
    assert option(redis_server_argv(redis), "--appendonly") == "yes"
    assert any(v.endswith(":/data") for v in redis["volumes"])
    for name in ("redis", "api", "worker", "worker-typed-decisions"):
        assert services[name]["healthcheck"]["test"][0] == "CMD"
        assert services[name]["restart"] in ("unless-stopped", "always")
    assert "/health" in " ".join(services["api"]["healthcheck"]["test"])
    for name in REDIS_URL_SERVICES:
        assert services[name]["depends_on"]["redis"]["condition"] == "service_healthy"


def test_no_command_runs_without_a_redis_password():
    with pytest.raises(ValueError, match="^LAYA_REDIS_PASSWORD: set LAYA_REDIS_PASSWORD"):
        interpolated(yaml.safe_load((ROOT / "docker-compose.yml").read_text()), {"LAYA_CHECKPOINT_DIR": "/ckpt"})


def test_redis_requires_the_password_every_url_carries_and_its_health_check_sends_it(services):
    password = REQUIRED["LAYA_REDIS_PASSWORD"]
    composed_services = composed()
    with_url = {
        name for name, service in composed_services.items() if "LAYA_REDIS_URL" in service.get("environment", {})
    }
    assert with_url == set(REDIS_URL_SERVICES)
    for name in REDIS_URL_SERVICES:
        assert composed_services[name]["environment"]["LAYA_REDIS_URL"] == f"redis://:{password}@redis:6379/0"
    redis = composed_services["redis"]
    assert option(redis_server_argv(redis), "--requirepass") == password
    assert redis["healthcheck"]["test"][:2] == ["CMD", "redis-cli"]
    assert redis["environment"]["REDISCLI_AUTH"] == password  # redis-cli's password, read from its environment
    # the file names the password only through the environment
    raw_script = services["redis"]["command"][2]
    assert option(shlex.split(raw_script), "--requirepass") == "$$REDISCLI_AUTH"


def test_redis_memory_is_bounded_and_never_evicts_queued_work():
    argv = redis_server_argv(composed()["redis"])
    assert option(argv, "--maxmemory") == "2gb" and option(argv, "--maxmemory-policy") == "noeviction"
    assert option(redis_server_argv(composed(LAYA_REDIS_MAXMEMORY="512mb")["redis"]), "--maxmemory") == "512mb"


def test_the_api_is_published_on_loopback_and_requires_a_key_unless_told_otherwise():
    api = composed()["api"]
    assert api["ports"] == ["127.0.0.1:8080:8080"]
    assert api["environment"]["LAYA_REQUIRE_API_KEY"] == "1"
    api = composed(LAYA_BIND="0.0.0.0", LAYA_REQUIRE_API_KEY="0")["api"]
    assert api["ports"] == ["0.0.0.0:8080:8080"] and api["environment"]["LAYA_REQUIRE_API_KEY"] == "0"
