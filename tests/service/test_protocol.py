"""The Jev /v1/systemone surface as laya-serve 0.3.20 defines it (its own server tests), held against the live API.

Black box: the main stack over HTTP (gunicorn, a real worker), raw sockets where a client library would tidy up
the bytes a hostile or unusual client sends.
"""

from __future__ import annotations

import http.client
import json
from urllib.parse import urlparse

import pytest
import requests

from service.helpers import API_KEY

# laya-serve's own example: a Jev client names its own model, which is no Laya checkpoint
JEV_REQUEST = {
    "model": "jev-1",
    "state": {"body": "billed twice, refund please"},
    "questions": {
        "dept": {"type": "choice", "instructions": "which team?", "criteria": {"billing": None, "tech": None}}
    },
}
MAX_BODY_BYTES = 1 << 20  # the API's default LAYA_MAX_BODY_BYTES


def raw_post(stack, body: bytes | None = None, *, chunks: list[bytes] | None = None, **headers: bytes | str):
    """(status, JSON body) of a POST /v1/systemone sent byte for byte: headers as given, the body whole (with
    Content-Length) or as `chunks` (Transfer-Encoding: chunked, no Content-Length)."""
    url = urlparse(stack.base_url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
    conn.putrequest("POST", "/v1/systemone")
    conn.putheader("Content-Type", "application/json")
    for name, value in headers.items():
        conn.putheader(name, value)
    if chunks is None:
        conn.putheader("Content-Length", str(len(body)))
    else:
        conn.putheader("Transfer-Encoding", "chunked")
    conn.endheaders()
    try:
        if chunks is None:
            conn.send(body)
        else:
            for chunk in chunks:
                conn.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            conn.send(b"0\r\n\r\n")
    except (BrokenPipeError, ConnectionResetError):
        pass  # the server may answer and close before the client has sent everything
    response = conn.getresponse()
    return response.status, json.loads(response.read())


def authorized(**headers):
    return {"Authorization": f"Bearer {API_KEY}", **headers}


@pytest.mark.parametrize(
    "model_id", ["jev-1", None, "", "convaiinnovations/laya", " English ", "EN", "laya", "default"]
)
def test_a_jev_model_id_gets_the_default_models_answer_byte_for_byte(stack, model_id):
    english = stack.post("/v1/systemone", json={**JEV_REQUEST, "model": "english"})
    body = {k: v for k, v in JEV_REQUEST.items() if k != "model"}
    if model_id is not None:
        body["model"] = model_id
    r = stack.post("/v1/systemone", json=body)
    assert r.status_code == 200 and english.status_code == 200, r.text
    assert r.content == english.content
    assert r.headers["x-laya-model"] == "english"
    assert set(r.json()) >= {"answers", "usage"} and list(r.json()["answers"]) == ["dept"]  # what hs-jev decodes


@pytest.mark.parametrize("model_id", ["multilingual", "convaiinnovations/laya-multilingual", "typed", "Decisions"])
def test_a_laya_model_this_service_does_not_serve_is_422_naming_it(stack, model_id):
    r = stack.post("/v1/systemone", json={**JEV_REQUEST, "model": model_id})
    assert r.status_code == 422 and r.json()["field"] == "model"
    assert "it serves english" in r.json()["detail"]


@pytest.mark.parametrize(
    "body", [b"not json", b"", b"\xff\xfe\x00bad", b'{"questions": ', b'{"questions": {}, "state": "\xff\xfe"}']
)
def test_a_body_that_is_not_json_or_not_utf8_is_400(stack, body):
    status, answer = raw_post(stack, body, **authorized())
    assert (status, answer["error"]) == (400, "bad_request")


@pytest.mark.parametrize(
    "authorization", [None, b"Bearer s\xe9cret", b"B\xebarer " + API_KEY.encode(), b"Bearer \xff\xfe"]
)
def test_a_missing_or_non_ascii_authorization_is_401(stack, authorization):
    headers = {} if authorization is None else {"Authorization": authorization}
    status, answer = raw_post(stack, json.dumps(JEV_REQUEST).encode(), **headers)
    assert (status, answer["error"]) == (401, "unauthorized")


def test_an_oversized_body_is_413_with_or_without_content_length(stack):
    """The question's own text makes it large (state and question count are small), as in laya-serve's test."""
    question = {"type": "choice", "instructions": "A" * (MAX_BODY_BYTES + 1024), "criteria": {"y": None, "z": None}}
    oversized = json.dumps({"state": "ok", "questions": {"a": question}}).encode()
    status, answer = raw_post(stack, oversized, **authorized())
    assert (status, answer["error"]) == (413, "payload_too_large")
    chunks = [oversized[i : i + 65536] for i in range(0, len(oversized), 65536)]
    status, answer = raw_post(stack, chunks=chunks, **authorized())
    assert (status, answer["error"]) == (413, "payload_too_large")


def test_a_chunked_body_within_the_cap_is_answered(stack):
    body = json.dumps(JEV_REQUEST).encode()
    status, answer = raw_post(stack, chunks=[body[:10], body[10:]], **authorized())
    assert status == 200 and list(answer["answers"]) == ["dept"]
    assert (
        answer == requests.post(stack.url("/v1/systemone"), json=JEV_REQUEST, headers=authorized(), timeout=60).json()
    )
