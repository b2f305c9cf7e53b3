"""Batch scoring over HTTP: shared questions or JSON lines, progress, input order, pages, per-state errors."""

from __future__ import annotations

import json

from laya_common.contract import wire_json
from service.helpers import CHOICE, NOUL, SCORE, assert_same_answers, wait_until

QUESTIONS = {"refund": NOUL, "topic": CHOICE, "anger": SCORE}
STATES = [f"Customer {i}: " + ("my card was charged twice " * (i % 5)) + "please help" for i in range(13)]


def sync_answer(stack, state, questions=QUESTIONS) -> dict:
    return stack.post("/v1/systemone", json={"state": state, "questions": questions}).json()


def test_batch_of_states_in_input_order_with_progress(stack):
    r = stack.post("/v1/batches", json={"model": "english", "states": STATES, "questions": QUESTIONS})
    assert r.status_code == 202, r.text
    batch_id = r.json()["id"]
    assert r.headers["Location"] == f"/v1/batches/{batch_id}"
    seen = []

    def finished():
        body = stack.get(f"/v1/batches/{batch_id}").json()
        seen.append((body["status"], body["done"]))
        return body if body["status"] == "done" else None

    body = wait_until(finished, 120, "the batch", interval_s=0.02)
    assert body["total"] == body["done"] == len(STATES) == len(body["results"])
    dones = [d for _, d in seen]
    assert dones == sorted(dones)  # progress only moves forward
    assert {s for s, _ in seen} <= {"queued", "running", "done"}
    for state, result in zip(STATES, body["results"], strict=True):
        assert_same_answers(result, sync_answer(stack, state))


def test_batch_results_are_paged(stack):
    batch_id = stack.post("/v1/batches", json={"states": STATES, "questions": {"q": NOUL}}).json()["id"]
    wait_until(lambda: stack.get(f"/v1/batches/{batch_id}").json()["status"] == "done", 120, "the batch")
    page = stack.get(f"/v1/batches/{batch_id}?limit=5").json()
    pages = [page["results"]]
    while "next" in page:
        page = stack.get(page["next"]).json()
        pages.append(page["results"])
    assert [len(p) for p in pages] == [5, 5, 3]
    everything = stack.get(f"/v1/batches/{batch_id}").json()["results"]
    assert [r for p in pages for r in p] == everything
    assert stack.get(f"/v1/batches/{batch_id}?limit=100000").status_code == 422
    assert stack.get(f"/v1/batches/{batch_id}?offset=-1").status_code == 422


def test_json_lines_upload_with_a_state_the_worker_rejects(stack):
    requests_ = [
        {"model": "english", "state": "refund please", "questions": {"a": NOUL, "b": CHOICE}},
        {"state": "bad question", "questions": {"q": {"type": "choice", "instructions": "?", "criteria": []}}},
        {"state": {"turns": ["hi", "where is my parcel?"]}, "questions": {"z": SCORE, "a": NOUL}},
    ]
    body = "\n".join(json.dumps(r) for r in requests_) + "\n"
    r = stack.post("/v1/batches", data=body.encode(), headers={"Content-Type": "application/x-ndjson"})
    assert r.status_code == 202, r.text
    done = wait_until(lambda: (b := stack.get(r.headers["Location"]).json())["status"] == "done" and b, 120, "batch")
    first, error, last = done["results"]
    assert_same_answers(first, sync_answer(stack, "refund please", {"a": NOUL, "b": CHOICE}))
    assert error["status"] == 422 and error["error"] == "validation" and error["field"].startswith("questions.q")
    assert list(last["answers"]) == ["z", "a"]


def test_json_lines_errors_name_the_line(stack):
    lines = [json.dumps({"state": "ok", "questions": {"q": NOUL}}), "{not json", ""]
    r = stack.post("/v1/batches", data="\n".join(lines), headers={"Content-Type": "application/x-ndjson"})
    assert r.status_code == 400 and "line 2" in r.json()["detail"]
    lines[1] = json.dumps({"state": "ok", "questions": {"q": {"type": "nope", "instructions": "?"}}})
    r = stack.post("/v1/batches", data="\n".join(lines), headers={"Content-Type": "application/x-ndjson"})
    assert r.status_code == 422 and r.json()["field"] == "lines.2.questions.q.type"


def test_batch_limits(stack):
    r = stack.post("/v1/batches", json={"states": ["x"] * 10001, "questions": {"q": NOUL}})
    assert r.status_code == 422 and r.json()["field"] == "states"
    r = stack.post("/v1/batches", json={"states": ["x", 5], "questions": {"q": NOUL}})
    assert r.status_code == 422 and r.json()["field"] == "states.1"
    r = stack.post("/v1/batches", data="x", headers={"Content-Type": "text/csv"})
    assert r.status_code == 415


def test_a_fetch_with_wait_answers_once_the_batch_is_done(stack):
    states = [f"{s} " + "word " * 300 for s in STATES]  # a few seconds of the worker's time
    batch_id = stack.post("/v1/batches", json={"states": states, "questions": QUESTIONS}).json()["id"]
    assert stack.get(f"/v1/batches/{batch_id}").json()["status"] in ("queued", "running")
    body = stack.get(f"/v1/batches/{batch_id}", params={"wait": 30, "limit": 5}).json()
    assert body["status"] == "done" and body["done"] == len(states) and len(body["results"]) == 5
    assert body["next"] == f"/v1/batches/{batch_id}?offset=5&limit=5"
    r = stack.get(f"/v1/batches/{batch_id}", params={"wait": "0.5x"})
    assert r.status_code == 422 and r.json()["field"] == "wait"


def test_a_page_is_written_as_every_body_is(stack):
    # each result is spliced in as the worker stored it: the same bytes as the parsed page written again,
    # non-ASCII text kept as UTF-8 as in every other body
    questions = {"thème": {"type": "noul", "instructions": "Le client demande-t-il un remboursement ?"}}
    batch_id = stack.post("/v1/batches", json={"states": STATES[:3], "questions": questions}).json()["id"]
    r = stack.get(f"/v1/batches/{batch_id}", params={"wait": 30, "limit": 2})
    body = r.json()
    assert body["status"] == "done" and len(body["results"]) == 2 and "next" in body
    assert "thème" in body["results"][0]["answers"]
    assert r.content == (wire_json(body) + "\n").encode()
