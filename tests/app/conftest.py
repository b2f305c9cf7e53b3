"""Fast API tests: the app from the factory, with the dispatcher (Celery + Redis) swapped for a stand-in."""

from __future__ import annotations

import pytest

from app import create_app
from app.admission import Fleet
from app.errors import ApiError

API_KEY = "unit-key"


class FakeDispatcher:
    """Answers like the real one without Redis: `envelope` is what the worker 'returns'."""

    def __init__(self) -> None:
        self.envelope = {
            "ok": True,
            "response": {"model": "laya-rl-agent", "answers": {}, "usage": {}},
            "timings": {"inference_ms": 1.0},
        }
        self.ready, self.submitted, self.timeout = True, [], False

    def admit(self, model: str) -> Fleet:
        if not self.ready:
            raise ApiError("unavailable", "no warm worker")
        return Fleet(1)

    def submit(self, payload: dict, fleet: Fleet) -> str:
        self.submitted.append(payload)
        return "job-1"

    def submit_batch(self, argument: dict, items: list, fleet: Fleet) -> str:
        self.submitted.append((argument, items))
        return "batch-1"

    def call(self, payload: dict, fleet: Fleet, timeout_s: float, *, trace: bool = False) -> tuple[str, dict]:
        job_id = self.submit(payload, fleet)
        if self.timeout:
            raise ApiError("timeout", "no answer", id=job_id)
        return job_id, self.envelope

    def job(self, job_id: str) -> dict:
        raise ApiError("not_found", f"no job with id {job_id!r}")

    def workers(self) -> list[dict]:
        return [{"model": "english", "node": "n", "state": "ready"}] if self.ready else []


@pytest.fixture
def app():
    app = create_app(
        {"TESTING": True, "API_KEY": API_KEY, "REDIS_URL": "redis://127.0.0.1:1/0", "MAX_BODY_BYTES": 4096}
    )
    app.extensions["laya"] = FakeDispatcher()
    return app


@pytest.fixture
def dispatcher(app) -> FakeDispatcher:
    return app.extensions["laya"]


@pytest.fixture
def client(app):
    client = app.test_client()
    client.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {API_KEY}"
    return client
