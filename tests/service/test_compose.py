"""docker-compose.yml: redis with its append-only file, api and worker with health checks, the GPU reservation."""

from __future__ import annotations

from pathlib import Path

import yaml

COMPOSE = Path(__file__).resolve().parents[2] / "docker-compose.yml"


def test_compose_structure():
    services = yaml.safe_load(COMPOSE.read_text())["services"]
    assert set(services) == {"redis", "api", "worker"}
    redis, api, worker = services["redis"], services["api"], services["worker"]

    assert "--appendonly" in redis["command"] and redis["command"][redis["command"].index("--appendonly") + 1] == "yes"
    assert any(v.endswith(":/data") for v in redis["volumes"])

    for service in (redis, api, worker):
        assert service["healthcheck"]["test"][0] == "CMD"
        assert service["restart"] in ("unless-stopped", "always")
    assert "/health" in " ".join(api["healthcheck"]["test"])
    assert api["command"] == ["laya-api"] and worker["command"] == ["laya-worker"]
    for service in (api, worker):
        assert service["environment"]["LAYA_REDIS_URL"] == "redis://redis:6379/0"
        assert service["depends_on"]["redis"]["condition"] == "service_healthy"

    (device,) = worker["deploy"]["resources"]["reservations"]["devices"]
    assert device["driver"] == "nvidia" and device["capabilities"] == ["gpu"]
    assert worker["environment"]["LAYA_CHECKPOINT"] == "/checkpoint"
