"""docker-compose.yml: redis with its append-only file, the api, one worker per model with its GPU."""

from __future__ import annotations

from pathlib import Path

import yaml

COMPOSE = Path(__file__).resolve().parents[2] / "docker-compose.yml"


def test_compose_structure():
    services = yaml.safe_load(COMPOSE.read_text())["services"]
    assert set(services) == {"redis", "api", "worker", "worker-typed-decisions"}
    redis, api = services["redis"], services["api"]
    workers = [services["worker"], services["worker-typed-decisions"]]

    assert "--appendonly" in redis["command"] and redis["command"][redis["command"].index("--appendonly") + 1] == "yes"
    assert any(v.endswith(":/data") for v in redis["volumes"])

    for service in (redis, api, *workers):
        assert service["healthcheck"]["test"][0] == "CMD"
        assert service["restart"] in ("unless-stopped", "always")
    assert "/health" in " ".join(api["healthcheck"]["test"])
    assert api["command"] == ["laya-api"]
    for service in (api, *workers):
        assert service["environment"]["LAYA_REDIS_URL"] == "redis://redis:6379/0"
        assert service["depends_on"]["redis"]["condition"] == "service_healthy"

    # one worker per model, each on its own GPU with its own checkpoint
    assert [w["environment"]["LAYA_MODEL"] for w in workers] == ["english", "typed-decisions"]
    assert services["worker-typed-decisions"]["profiles"] == ["typed-decisions"]
    gpus = []
    for worker in workers:
        assert worker["command"] == ["laya-worker"] and worker["environment"]["LAYA_CHECKPOINT"] == "/checkpoint"
        assert any(v.endswith(":/checkpoint:ro") for v in worker["volumes"])
        (device,) = worker["deploy"]["resources"]["reservations"]["devices"]
        assert device["driver"] == "nvidia" and device["capabilities"] == ["gpu"]
        gpus += device["device_ids"]
    assert len(set(gpus)) == len(gpus)
