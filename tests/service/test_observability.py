"""GET /health, /info, /openapi.json and /metrics on the running service."""

from __future__ import annotations

import json

import requests

from app.metrics import KNOWN_METHODS
from laya_common import contract
from laya_common.version import git_commit, package_version
from service.helpers import NOUL, request_body


def test_health_counts_warm_workers_and_names_nobodys_work(stack):
    started = stack.post("/v1/jobs", json=request_body("refund?", q=NOUL)).json()["id"]
    body = requests.get(stack.url("/health"), timeout=10).json()  # open: no bearer token
    assert body == {"status": "ok", "models": {"english": 1}}
    assert started not in json.dumps(body)
    (worker,) = [w for w in stack.get("/info").json()["workers"] if w["state"] == "ready"]
    assert worker["model"] == "english" and worker["info"]["executor"]["executor"] == "reference"
    assert (worker["version"], worker["commit"]) == (package_version(), git_commit())  # what each worker runs


def test_info_describes_each_worker_from_its_heartbeat(stack):
    body = stack.get("/info").json()
    assert body["models"] == ["english"] and body["default_model"] == "english"
    assert body["limits"] == {"max_questions": 16, "max_markers": 2048, "max_json_depth": 128} and body["api"]["commit"]
    (worker,) = [w for w in body["workers"] if w["state"] == "ready"]
    info = worker["info"]
    assert info["model"] == "english" and info["executor"]["executor"] == "reference"
    assert info["chosen"] == "asked for"  # the test workers run LAYA_EXECUTOR=reference
    assert info["limits"]["max_len"] == 512 and info["limits"]["rows_per_pass"] == 16
    assert info["versions"]["version"] == worker["version"] and info["versions"]["commit"] == worker["commit"]


def test_openapi_is_generated_from_the_schemas(stack):
    doc = stack.get("/openapi.json").json()
    assert doc["openapi"].startswith("3.")
    assert {
        "/v1/systemone",
        "/v1/jobs",
        "/v1/jobs/{id}",
        "/v1/batches",
        "/v1/batches/{id}",
        "/health",
        "/info",
        "/metrics",
    } <= set(doc["paths"])
    request = doc["components"]["schemas"]["Request"]
    assert request["required"] == ["state", "questions"]
    assert request["properties"]["questions"]["maxProperties"] == 16
    question = doc["components"]["schemas"]["Question"]
    assert question["properties"]["type"]["enum"] == ["noul", "choice", "score"]
    assert set(doc["paths"]["/v1/systemone"]["post"]["responses"]) >= {"200", "413", "415", "422", "503", "504"}
    # every header of our own that an answer carries is documented
    documented = set(doc["paths"]["/v1/systemone"]["post"]["responses"]["200"]["headers"])
    answer = stack.post("/v1/systemone", json=request_body("refund?", q=NOUL))
    assert {h.lower() for h in answer.headers if h.lower().startswith("x-")} <= documented


def test_metrics_count_requests_queue_and_executor_time(stack):
    stack.post("/v1/systemone", json=request_body("refund?", q=NOUL))
    stack.post("/v1/systemone", json={"state": 1})
    text = stack.get("/metrics").text
    assert 'laya_http_requests_total{method="POST",route="/v1/systemone",status="200"}' in text
    assert 'laya_http_requests_total{method="POST",route="/v1/systemone",status="422"}' in text
    assert 'laya_http_request_seconds_bucket{le="0.1",method="POST",route="/v1/systemone"}' in text
    for work_class in ("sync", "jobs", "batches"):
        assert f'laya_queue_depth{{class="{work_class}",model="english"}} ' in text
    assert 'laya_workers_ready{model="english"} 1.0' in text
    count = [line for line in text.splitlines() if line.startswith('laya_executor_seconds_count{model="english"}')]
    assert count and float(count[0].split()[-1]) >= 1


def test_a_request_adds_one_observation_of_its_engine_time_to_the_executor_histogram(stack):
    key = contract.executor_metrics_key("english")

    def histogram() -> dict[str, float]:
        return {k.decode(): float(v) for k, v in stack.redis().hgetall(key).items()}

    before = histogram()
    r = stack.post("/v1/systemone", json=request_body("refund?", q=NOUL))
    assert r.status_code == 200, r.text
    seconds = float(r.headers["x-inference-time"]) / 1000
    after = histogram()
    changed = {k: after[k] - before.get(k, 0.0) for k in after if after[k] != before.get(k, 0.0)}
    bound = next(b for b in contract.EXECUTOR_BUCKETS if seconds <= b)
    assert changed.keys() == {"count", "sum", f"bucket:{bound}"}, changed
    assert changed["count"] == changed[f"bucket:{bound}"] == 1
    assert abs(changed["sum"] - seconds) < 1e-5  # the header is rounded to the microsecond


def test_made_up_methods_and_paths_add_no_metric_series(stack):
    stack.get("/metrics")
    before = stack.get("/metrics").text.count("\n")
    for i in range(50):
        requests.request(f"FOO{i}", stack.url("/v1/systemone"), timeout=10)
        requests.get(stack.url(f"/no-such-route-{i}"), timeout=10)
    text = stack.get("/metrics").text
    methods = {line.split('method="')[1].split('"')[0] for line in text.splitlines() if 'method="' in line}
    assert methods <= KNOWN_METHODS | {"other"} and "other" in methods
    assert "FOO" not in text and "no-such-route" not in text
    assert text.count("\n") - before < 60  # a few new series (other, unmatched), not one per request
