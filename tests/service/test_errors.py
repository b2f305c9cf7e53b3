"""Every error status over real HTTP: the JSON body shape, never a stack trace or a path.

500 and 503 after an executor failure are in test_failure.py, 504 in test_jobs.py, 400 and 413 (and chunked bodies)
with laya-serve's cases in test_protocol.py; here the rest.
"""

from __future__ import annotations

import json
import socket
from urllib.parse import urlparse

import pytest
import requests

from app.errors import ERROR_STATUS
from laya_common.broker import queues
from service.helpers import API_KEY, NOUL, request_body

GOOD = request_body("Please refund the duplicate charge.", refund=NOUL)


def assert_error_body(r: requests.Response, status: int, field: str | None = None) -> dict:
    assert r.status_code == status, r.text
    assert r.headers["Content-Type"].startswith("application/json")
    body = r.json()
    assert body["status"] == status and ERROR_STATUS[body["error"]] == status and body["detail"]
    assert set(body) <= {"status", "error", "detail", "field", "id", "models"}
    assert "Traceback" not in r.text and "/work" not in r.text and ".py" not in r.text
    if field is not None:
        assert body["field"] == field
    return body


def test_401_without_or_with_a_wrong_token(stack):
    assert_error_body(requests.post(stack.url("/v1/systemone"), json=GOOD, timeout=10), 401)
    r = requests.post(stack.url("/v1/systemone"), json=GOOD, headers={"Authorization": "Bearer nope"}, timeout=10)
    assert_error_body(r, 401)
    assert r.headers["WWW-Authenticate"] == "Bearer"
    assert_error_body(requests.get(stack.url("/v1/jobs/x"), headers={"Authorization": API_KEY}, timeout=10), 401)
    # health and the API description stay open for load balancers and clients
    assert requests.get(stack.url("/health"), timeout=10).status_code == 200
    assert requests.get(stack.url("/openapi.json"), timeout=10).status_code == 200


def test_404_unknown_route_job_and_batch(stack):
    assert_error_body(stack.get("/v1/nothing-here"), 404)
    assert_error_body(stack.get("/v1/jobs/00000000-0000-0000-0000-000000000000"), 404)
    assert_error_body(stack.get("/v1/batches/not-a-batch"), 404)


def test_405_is_json_too(stack):
    r = stack.get("/v1/systemone")
    assert r.status_code == 405 and r.json()["status"] == 405


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
def test_415_content_type_not_json(stack, content_type):
    headers = {"Content-Type": content_type} if content_type else {}
    assert_error_body(stack.post("/v1/systemone", data=json.dumps(GOOD), headers=headers), 415)
    assert_error_body(stack.post("/v1/jobs", data=json.dumps(GOOD), headers=headers), 415)


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"questions": {"q": NOUL}}, "state"),
        ({"state": None, "questions": {"q": NOUL}}, "state"),
        ({"state": 42, "questions": {"q": NOUL}}, "state"),
        ({"state": "x"}, "questions"),
        ({"state": "x", "questions": {f"q{i}": NOUL for i in range(17)}}, "questions"),
        ({"state": "x", "questions": {"q1": {"type": "yesno", "instructions": "?"}}}, "questions.q1.type"),
        ({"state": "x", "questions": {"q1": {"type": "noul"}}}, "questions.q1.instructions"),
        ({"model": "multilingual", "state": "x", "questions": {"q": NOUL}}, "model"),
    ],
)
def test_422_names_the_field(stack, payload, field):
    assert_error_body(stack.post("/v1/systemone", json=payload), 422, field=field)


def test_422_more_than_2048_markers(stack):
    many = {"type": "choice", "instructions": "?", "criteria": [f"o{i}" for i in range(200)]}
    payload = {"state": "x", "questions": {f"q{i}": many for i in range(11)}}  # 2200 options
    body = assert_error_body(stack.post("/v1/systemone", json=payload), 422)
    assert "2048" in body["detail"]


def test_bad_input_changes_nothing(stack):
    """Rejected requests are not enqueued: the queue stays empty and no job record appears."""
    r = stack.redis()
    keys_before = set(r.keys("laya:job:*"))
    for payload in ({"state": 1}, {"state": "x", "questions": {"q": {"type": "bad"}}}):
        assert stack.post("/v1/jobs", json=payload).status_code == 422
    assert stack.post("/v1/batches", json={"states": [], "questions": {"q": NOUL}}).status_code == 422
    assert set(r.keys("laya:job:*")) == keys_before
    assert sum(r.llen(queue) for queue in queues.queue_names("english")) == 0


def raw_exchange(stack, request: bytes) -> tuple[int, dict]:
    """(status, JSON body) of `request`, sent byte for byte on a socket of its own."""
    url = urlparse(stack.base_url)
    with socket.create_connection((url.hostname, url.port), timeout=30) as sock:
        sock.sendall(request)
        sock.shutdown(socket.SHUT_WR)
        reply = b""
        while data := sock.recv(65536):
            reply += data
    head, _, body = reply.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


@pytest.mark.parametrize(
    "framing",
    [
        b"zz\r\n{}\r\n0\r\n\r\n",  # a chunk size that is not hex
        b"2\r\n{}XX0\r\n\r\n",  # a chunk without its CRLF
        b"ffffffffffffffffffff\r\n{}",  # a chunk size past any integer the server takes
    ],
)
def test_400_for_a_chunked_body_with_broken_framing(stack, framing):
    head = (
        "POST /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {API_KEY}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    )
    status, body = raw_exchange(stack, head.encode() + framing)
    assert 400 <= status < 500 and body["status"] == status, body


@pytest.mark.parametrize(
    "query", ["offset=9300000000000000000", "offset=1000000001", "limit=99999999999999999999999", "wait=1e400"]
)
def test_422_for_page_and_wait_values_out_of_range(stack, query):
    batch_id = stack.post("/v1/batches", json={"states": ["hi"], "questions": {"q": NOUL}}).json()["id"]
    assert_error_body(stack.get(f"/v1/batches/{batch_id}?{query}"), 422)
