"""The error table walked through the routes (dispatcher stand-in): every status, one body shape."""

from __future__ import annotations

import pytest

from app.errors import ERROR_STATUS, first_error
from laya_common import contract

GOOD = {"state": "refund please", "questions": {"q": {"type": "noul", "instructions": "Refund?"}}}


def error(response, status: int) -> dict:
    assert response.status_code == status, response.get_data(as_text=True)
    body = response.get_json()
    assert body["status"] == status and ERROR_STATUS[body["error"]] == status and body["detail"]
    return body


def test_the_api_table_extends_the_contract_table():
    assert {k: ERROR_STATUS[k] for k in contract.ERROR_STATUS} == contract.ERROR_STATUS


def test_every_status(client, dispatcher):
    error(client.post("/v1/systemone", data="{", content_type="application/json"), 400)
    error(client.post("/v1/systemone", json=GOOD, headers={"Authorization": "Bearer wrong"}), 401)
    error(client.get("/v1/jobs/nope"), 404)
    error(client.get("/v1/systemone"), 405)
    error(client.post("/v1/systemone", data="{" + " " * 5000 + "}", content_type="application/json"), 413)
    error(client.post("/v1/systemone", data="{}", content_type="text/plain"), 415)
    assert error(client.post("/v1/systemone", json={"state": "x"}), 422)["field"] == "questions"
    dispatcher.envelope = contract.error_envelope("executor_failure", "the reference executor failed")
    error(client.post("/v1/systemone", json=GOOD), 500)
    dispatcher.envelope = contract.error_envelope("validation", "bad labels", field="questions.q.labels")
    assert error(client.post("/v1/systemone", json=GOOD), 422)["field"] == "questions.q.labels"
    dispatcher.timeout = True
    assert error(client.post("/v1/systemone", json=GOOD), 504)["id"] == "job-1"
    dispatcher.ready = False
    error(client.post("/v1/systemone", json=GOOD), 503)
    error(client.get("/health"), 503)


def test_an_unexpected_exception_is_500_without_a_trace(client, dispatcher, monkeypatch):
    def boom(*_, **__):
        raise KeyError("/secret/path.py")

    monkeypatch.setattr(dispatcher, "submit", boom)
    body = error(client.post("/v1/systemone", json=GOOD), 500)
    assert body == {"status": 500, "error": "internal", "detail": "internal error (KeyError)"}


@pytest.mark.parametrize(
    "body",
    [
        b'{"state": NaN, "questions": {}}',
        b'{"state": "x", "questions": {"q": {"type": "noul", "instructions": -Infinity}}}',
        b'{"state": [' + b"[" * 1990 + b"]" * 1990 + b'], "questions": {}}',  # past Python's own recursion limit
        b'{"state": ' + b'{"a": ' * 200 + b"1" + b"}" * 200 + b', "questions": {}}',  # past the service's
    ],
)
def test_json_that_is_not_strict_or_nests_too_deeply_is_400(client, dispatcher, body):
    detail = error(client.post("/v1/systemone", data=body, content_type="application/json"), 400)["detail"]
    assert "not valid JSON" in detail
    assert dispatcher.submitted == []


@pytest.mark.parametrize("body", [b"", b"  \n"])
def test_an_empty_body_is_400_saying_so(client, dispatcher, body):
    detail = error(client.post("/v1/systemone", data=body, content_type="application/json"), 400)["detail"]
    assert "empty" in detail and "examples/" in detail
    assert dispatcher.submitted == []


def test_nesting_up_to_the_limit_is_accepted(client, dispatcher):
    depth = contract.LIMITS["max_json_depth"] - 1  # the body's own object is the first level
    body = b'{"state": ' + b"[" * depth + b"]" * depth + b', "questions": {}}'
    r = client.post("/v1/systemone", data=body, content_type="application/json")
    assert r.status_code == 200, r.get_data(as_text=True)


def test_rejected_requests_are_not_enqueued(client, dispatcher):
    client.post("/v1/systemone", json={"state": 3, "questions": {}})
    client.post("/v1/jobs", data="x", content_type="text/plain")
    assert dispatcher.submitted == []


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        ({"questions": {"q1": {"value": {"type": ["Must be one of"]}}}}, ("questions.q1.type", "Must be one of")),
        ({"states": {3: ["must be a string"]}}, ("states.3", "must be a string")),
        ({"_schema": ["Invalid input type."]}, ("", "Invalid input type.")),
    ],
)
def test_first_error_names_a_dotted_field(messages, expected):
    assert first_error(messages) == expected
