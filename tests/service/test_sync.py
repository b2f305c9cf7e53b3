"""POST /v1/systemone over HTTP, through a real Celery worker: answers, order, parity with laya-run, errors."""

from __future__ import annotations

import json

import pytest

from service.helpers import CHOICE, NOUL, SCORE, laya_run, request_body

REQUESTS = [
    request_body("Please refund the duplicate charge.", refund=NOUL),
    request_body({"text": "My parcel is late again", "n": 3}, topic=CHOICE, anger=SCORE, refund=NOUL),
    request_body(["hello", "my card was charged twice", "café Zürich 🙂"], refund=NOUL, topic=CHOICE),
    request_body("x " * 700, z=SCORE, a=NOUL, m=CHOICE),  # longer than max_len: cut as the reference cuts
]


def ordered(obj: object) -> str:
    """Canonical text that differs when keys, their order, or any value differ."""
    return json.dumps(obj, ensure_ascii=False)


REJECTED = [
    request_body("hi", q={"type": "choice", "instructions": "?", "criteria": []}),
    request_body("hi", q={"type": "noul", "instructions": "?", "criteria": {"yes": "a"}}),
    request_body("hi", q={"type": "score", "instructions": "?", "labels": ["a", "b"]}),
]


@pytest.fixture(scope="module")
def cli_answers(checkpoint) -> list[dict]:
    """laya-run's line for each of REQUESTS + REJECTED (one process: it loads torch once)."""
    return laya_run(checkpoint, REQUESTS + REJECTED)


def test_answers_equal_laya_run(stack, cli_answers):
    for payload, want in zip(REQUESTS, cli_answers[: len(REQUESTS)], strict=True):
        r = stack.post("/v1/systemone", json=payload)
        assert r.status_code == 200, r.text
        assert ordered(r.json()) == ordered(want)
        assert r.text == json.dumps(want, ensure_ascii=False) + "\n"  # byte for byte, as laya-run prints it


def test_answers_keep_question_order(stack):
    names = ["zeta", "alpha", "mu", "beta", "omega"]
    payload = {"state": "Where is my order?", "questions": {n: NOUL for n in names}}
    r = stack.post("/v1/systemone", json=payload)
    assert r.status_code == 200, r.text
    assert list(r.json()["answers"]) == names
    reversed_payload = {"state": "Where is my order?", "questions": {n: NOUL for n in reversed(names)}}
    assert list(stack.post("/v1/systemone", json=reversed_payload).json()["answers"]) == names[::-1]


def test_timing_headers_and_job_id(stack):
    r = stack.post("/v1/systemone", json=REQUESTS[0])
    assert r.status_code == 200
    queue, inference, total = (float(r.headers[h]) for h in ("x-queue-time", "x-inference-time", "x-total-time"))
    assert 0 < inference < total and queue >= 0
    assert 0 < float(r.headers["x-executor-time"]) < inference  # the pass alone, within the engine's time
    assert len(r.headers["x-job-id"]) == 32 and int(r.headers["x-job-id"], 16) >= 0  # 128 bits, in hex


@pytest.mark.parametrize("index", range(len(REJECTED)))
def test_reference_rejections_are_422_naming_the_question(stack, cli_answers, index):
    """Rules only the worker knows come back as the same 422 body laya-run prints."""
    r = stack.post("/v1/systemone", json=REJECTED[index])
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["error"] == "validation" and body["field"].startswith("questions.q") and "'q'" in body["detail"]
    assert body == cli_answers[len(REQUESTS) + index]
    assert r.text == json.dumps(body, ensure_ascii=False) + "\n"
