"""Protocol 0.4.15 over HTTP: chosen per request (x-laya-protocol) or by LAYA_PROTOCOL, 0.3.20 the default; its
request rules with laya-serve 0.4.15's statuses; /v1/systemone/batch; and laya 0.4.15's own HTTP client getting
from this service what laya-serve 0.4.15 gives on the same checkpoint (tests/parity/oracle04.py)."""

from __future__ import annotations

import json

import pytest
from parity.oracle04 import Laya04, without_routing

from laya_common import contract
from service.helpers import API_KEY, CHOICE, NOUL, SCORE, Service, request_body

V04 = {contract.PROTOCOL_HEADER: "0.4"}
CONTROLS = {"max_len": 96, "head_max_len": 48, "min_confidence": {"choice:3-5": 0.9, "default": 0.3}}
QUESTIONS = {"topic": CHOICE, "anger": SCORE, "refund": NOUL}
STATES = ["Please refund the duplicate charge.", {"order": 1234, "status": "late"}, ["hi", "my parcel is late"]]


@pytest.fixture(scope="module")
def laya04(checkpoint):
    server = Laya04(checkpoint)
    yield server
    server.close()


@pytest.fixture(scope="module")
def api04(stack, launcher) -> Service:
    """A second API on the main stack's database whose requests speak 0.4.15 by default (LAYA_PROTOCOL)."""
    service = Service(stack.redis_url)
    launcher.api(service, LAYA_PROTOCOL="0.4.15")
    service.wait_healthy()
    return service


def test_without_a_header_a_request_speaks_0_3_20_and_its_0_4_fields_change_nothing(stack):
    plain = stack.post("/v1/systemone", json=request_body("Refund me, please.", topic=CHOICE))
    with_controls = stack.post("/v1/systemone", json={**request_body("Refund me, please.", topic=CHOICE), **CONTROLS})
    assert plain.status_code == with_controls.status_code == 200, with_controls.text
    assert plain.content == with_controls.content  # byte for byte: 0.3.20 ignores what it does not know
    assert plain.headers[contract.PROTOCOL_HEADER] == with_controls.headers[contract.PROTOCOL_HEADER] == "0.3.20"
    assert set(plain.json()["usage"]) == {"input_tokens", "output_tokens"}


def test_the_header_asks_for_0_4_15_and_the_answer_says_so(stack, laya04):
    body = {**request_body(STATES[0], **QUESTIONS), **CONTROLS}
    r = stack.post("/v1/systemone", json=body, headers=V04)
    assert r.status_code == 200, r.text
    assert r.headers[contract.PROTOCOL_HEADER] == "0.4.15"
    status, want = laya04.post("/v1/systemone", body)
    assert status == 200 and json.dumps(r.json()) == json.dumps(without_routing(want))
    answers = r.json()["answers"]
    assert "x_jev_confidence" in answers["topic"] and "x_jev_confidence" not in answers["refund"]
    assert {a["abstention_threshold"] for a in answers.values()} == {0.9, 0.3}


def test_a_header_naming_no_protocol_served_is_a_400(stack):
    r = stack.post("/v1/systemone", json=request_body("x", q=NOUL), headers={contract.PROTOCOL_HEADER: "0.5"})
    assert r.status_code == 400 and r.json()["field"] == contract.PROTOCOL_HEADER, r.text
    assert "0.3.20" in r.json()["detail"] and "0.4.15" in r.json()["detail"]


@pytest.mark.parametrize(
    ("change", "status"),
    [
        (lambda b: b.pop("state"), 400),
        (lambda b: b.update(state=None), 400),
        (lambda b: b.update(questions=[]), 400),
        (lambda b: b.update(state="caf\ud800"), 400),  # an unpaired surrogate
        (lambda b: b["questions"].update(q={**CHOICE, "criteria": [f"o{i}" for i in range(101)]}), 413),
        (lambda b: b["questions"].update(q={**SCORE, "criteria": [f"l{i}" for i in range(33)]}), 413),
        (lambda b: b.update(state="x" * 50_001), 413),
        (lambda b: b["questions"].update(q={**CHOICE, "criteria": ["a", "a"]}), 422),
        (lambda b: b["questions"].update(q={**CHOICE, "criteria": ["a", None]}), 422),
        (lambda b: b["questions"].update(q={**NOUL, "instructions": "  "}), 422),
        (lambda b: b["questions"].update(q={**NOUL, "option_order": [0, 0]}), 422),
        (lambda b: b.update(hooks=["mine"]), 422),
        (lambda b: b.update(model="org/checkpoint"), 422),
        (lambda b: b.update(max_len="long"), 422),
        (lambda b: b.update(min_confidence=1.5), 422),
        (lambda b: b.update(lang=5), 422),
    ],
)
def test_the_request_rules_of_0_4_15_with_laya_serves_statuses(stack, laya04, change, status):
    body = request_body("Refund me, please.", q=NOUL)
    change(body)
    text = json.dumps(body)  # an unpaired surrogate travels as its JSON escape
    r = stack.post("/v1/systemone", data=text, headers={**V04, "Content-Type": "application/json"})
    assert r.status_code == status, r.text
    assert laya04.post("/v1/systemone", body)[0] == status  # laya-serve 0.4.15 answers the same


def test_max_len_above_what_the_checkpoint_and_executor_admit_is_a_422_naming_both(stack):
    r = stack.post("/v1/systemone", json={**request_body("x", q=NOUL), "max_len": 4096}, headers=V04)
    assert r.status_code == 422 and r.json()["field"] == "max_len", r.text
    assert "checkpoint's max_len is 512" in r.json()["detail"] and "reference executor admits 512" in r.json()["detail"]


def test_a_batch_of_states_answers_as_laya_serve_0_4_15_and_as_one_request_each(stack, laya04):
    body = {"model": "english", "states": STATES, "questions": QUESTIONS, **CONTROLS}
    r = stack.post("/v1/systemone/batch", json=body)
    assert r.status_code == 200, r.text
    assert r.headers[contract.PROTOCOL_HEADER] == "0.4.15"
    status, want = laya04.post("/v1/systemone/batch", body)
    assert status == 200
    want = {**want, "results": [without_routing(result) for result in want["results"]]}
    assert json.dumps(r.json()) == json.dumps(want)
    for state, result in zip(STATES, r.json()["results"], strict=True):
        one = stack.post("/v1/systemone", json={**request_body(state, **QUESTIONS), **CONTROLS}, headers=V04)
        assert one.json() == result


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"questions": {"q": NOUL}}, 400),
        ({"states": [], "questions": {"q": NOUL}}, 400),
        ({"states": ["a", None], "questions": {"q": NOUL}}, 400),
        ({"states": ["a"] * 65, "questions": {"q": NOUL}}, 413),
        ({"states": ["a"], "questions": {"q": {**NOUL, "instructions": ""}}}, 422),
        ({"states": ["a"], "questions": {"q": NOUL}, "batch_size": 0}, 422),
        ({"states": ["a"], "questions": {"q": NOUL}, "sort_by_length": "yes"}, 422),
    ],
)
def test_a_batch_of_states_refused_as_laya_serve_0_4_15_refuses_it(stack, laya04, body, status):
    body = {"model": "english", **body}
    assert stack.post("/v1/systemone/batch", json=body).status_code == status
    assert laya04.post("/v1/systemone/batch", body)[0] == status


def test_laya_0_4_15s_own_client_gets_what_laya_serve_0_4_15_gives(api04, laya04):
    """A 0.4 client sends no header: the API it talks to speaks 0.4.15 by default (LAYA_PROTOCOL)."""
    for state in STATES:
        got_status, got = laya04.client_predict(
            api04.base_url, API_KEY, state=state, questions=QUESTIONS, model="english", **CONTROLS
        )
        status, want = laya04.post(
            "/v1/systemone", {"model": "english", "state": state, "questions": QUESTIONS, **CONTROLS}
        )
        assert got_status == status == 200, got
        assert json.dumps(got) == json.dumps(without_routing(want))
    refused = laya04.client_predict(api04.base_url, API_KEY, state="x", questions={"q": {**NOUL, "instructions": ""}})
    assert refused[0] == "refused" and refused[1].startswith("invalid_request"), refused


def test_a_scoring_batch_speaks_the_protocol_it_was_submitted_in(stack):
    body = {"model": "english", "states": STATES, "questions": QUESTIONS, **CONTROLS}
    r = stack.post("/v1/batches", json=body, headers=V04)
    assert r.status_code == 202 and r.headers[contract.PROTOCOL_HEADER] == "0.4.15", r.text
    results = stack.wait_job(f"/v1/batches/{r.json()['id']}")["results"]
    for state, result in zip(STATES, results, strict=True):
        one = stack.post("/v1/systemone", json={**request_body(state, **QUESTIONS), **CONTROLS}, headers=V04)
        assert one.json() == result
    plain = stack.post("/v1/batches", json=body)  # no header: 0.3.20, the controls ignored
    first = stack.wait_job(f"/v1/batches/{plain.json()['id']}")["results"][0]
    assert first == stack.post("/v1/systemone", json=request_body(STATES[0], **QUESTIONS)).json()
