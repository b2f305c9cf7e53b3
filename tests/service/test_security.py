"""The security review, tested: bearer auth, JSON-only Celery, unguessable ids, no secret in logs or /metrics.

Redis with a password is every service test's Redis (conftest.py), Redis over TLS is test_tls.py, and the caps
on bodies, batches, states and pages are test_errors.py and recipe/hostile.py's corpus.
"""

from __future__ import annotations

import json
import os
import pickle
import re
import subprocess
from pathlib import Path

import pytest
import requests

from app.dispatch import new_id
from laya_common import contract
from laya_common.broker import queues, transport
from service.helpers import API_KEY, BIN, NOUL, REDIS_PASSWORD, Service, free_port, request_body, wait_until

PAYLOAD = request_body("Please refund the duplicate charge.", refund=NOUL)


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "",
        "Bearer",
        "Bearer ",
        "Bearer nope",
        f"Basic {API_KEY}",
        f"Bearer {API_KEY}x",
        f"Bearer {API_KEY[:-1]}",
        API_KEY,
        f"Bearer {API_KEY} {API_KEY}",
        "Bearer " + "k" * 8000,
        "Bearer \u00e9t\u00e9",
    ],
)
def test_anything_but_the_bearer_token_is_401(stack, authorization):
    headers = {} if authorization is None else {"Authorization": authorization.encode("latin-1")}
    r = requests.post(stack.url("/v1/systemone"), json=PAYLOAD, headers=headers, timeout=30)
    assert r.status_code == 401 and r.json()["error"] == "unauthorized", r.text
    assert API_KEY not in r.text


def test_a_header_past_the_servers_limit_is_a_json_431(stack):
    r = requests.post(
        stack.url("/v1/systemone"), json=PAYLOAD, timeout=30, headers={"Authorization": "Bearer " + "k" * 9000}
    )
    assert r.status_code == 431 and r.json()["status"] == 431 and r.json()["error"] == "header_fields_too_large"


class _Touch:
    """Unpickling this creates `path`: proof that a pickled message was deserialized."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):
        return (Path.touch, (self.path,))


def test_a_pickled_message_on_the_queue_is_refused_not_executed(private_db, launcher, tmp_path):
    service = Service(private_db)
    launcher.worker(service)
    launcher.api(service)
    service.wait_healthy()
    marker = tmp_path / "unpickled"
    body = pickle.dumps(((_Touch(marker),), {}, {"callbacks": None, "errbacks": None, "chain": None, "chord": None}))
    transport.publish(
        private_db,
        queues.queue_name("english", "jobs"),
        body,
        content_type="application/x-python-serialize",
        content_encoding="binary",
        headers={"lang": "py", "task": contract.TASK_DECIDE, "id": "pickled"},
    )
    redis = service.redis()
    wait_until(lambda: redis.llen(queues.queue_name("english", "jobs")) == 0, 60, "the worker to take the message")
    assert service.post("/v1/systemone", json=PAYLOAD).status_code == 200  # it served on
    assert not marker.exists() and not redis.exists(contract.result_key("pickled"))
    assert "untrusted content" in service.processes[0].tail()  # Celery's refusal, logged


def test_ids_are_128_random_bits_in_hex():
    ids = {new_id() for _ in range(10000)}
    assert len(ids) == 10000 and all(re.fullmatch("[0-9a-f]{32}", i) for i in ids)
    bits = "".join(f"{int(i, 16):0128b}" for i in ids)
    assert 0.49 < bits.count("1") / len(bits) < 0.51  # every bit random, none fixed (uuid4 fixes 6)


def test_no_secret_in_a_log_line_or_in_metrics(stack, launcher):
    stack.post("/v1/systemone", json=PAYLOAD)
    requests.post(stack.url("/v1/systemone"), json=PAYLOAD, headers={"Authorization": "Bearer wrong"}, timeout=30)
    stack.post("/v1/systemone", data=b"{", headers={"Content-Type": "application/json"})
    metrics = stack.get("/metrics").text
    logs = [p.read_text(errors="replace") for p in Path(launcher.logs).glob("*.log")]
    assert logs and any("laya_http_requests_total" in line for line in metrics.splitlines())
    for text in [metrics, *logs]:
        assert API_KEY not in text and REDIS_PASSWORD not in text
    assert any(":**@" in text for text in logs)  # Celery names the broker with its password masked


def test_the_api_compares_tokens_in_constant_time(monkeypatch):
    from app import auth, create_app

    calls = []
    monkeypatch.setattr(auth.hmac, "compare_digest", lambda a, b: calls.append((a, b)) or a == b)
    app = create_app({"TESTING": True, "API_KEY": "k3y", "REDIS_URL": "redis://127.0.0.1:1/0"})
    assert app.test_client().get("/v1/jobs/x", headers={"Authorization": "Bearer nope"}).status_code == 401
    assert calls == [(b"nope", b"k3y")]
    assert json.loads(app.test_client().get("/v1/jobs/x").data)["error"] == "unauthorized"


def test_the_api_refuses_to_start_without_a_key_when_one_is_required():
    env = {**os.environ, "LAYA_REQUIRE_API_KEY": "1", "LAYA_API_KEY": "", "LAYA_PORT": str(free_port())}
    out = subprocess.run([str(BIN / "laya-api")], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 2 and "LAYA_API_KEY" in out.stderr and "Listening" not in out.stderr
