"""Async jobs over HTTP: submit, poll, fetch; a sync call past its timeout (504); jobs outlive the API process."""

from __future__ import annotations

import signal

from laya_common import contract
from service.helpers import CHOICE, NOUL, SCORE, Service, request_body

PAYLOAD = request_body("The parcel arrived broken; I want my money back.", topic=CHOICE, refund=NOUL, anger=SCORE)


def test_job_is_queued_then_done_with_what_systemone_answers(stack):
    r = stack.post("/v1/jobs", json=PAYLOAD)
    assert r.status_code == 202, r.text
    body = r.json()
    assert body["status"] == "queued" and r.headers["Location"] == f"/v1/jobs/{body['id']}"
    done = stack.wait_job(r.headers["Location"])
    assert done == {"id": body["id"], "status": "done", "result": done["result"]}
    assert done["result"] == stack.post("/v1/systemone", json=PAYLOAD).json()
    assert list(done["result"]["answers"]) == ["topic", "refund", "anger"]


def test_job_the_worker_rejects_is_failed_with_the_error(stack):
    payload = request_body("x", q={"type": "choice", "instructions": "?", "criteria": {}})
    location = stack.post("/v1/jobs", json=payload).headers["Location"]
    failed = stack.wait_job(location)
    assert failed["status"] == "failed" and "result" not in failed
    assert failed["error"]["status"] == 422 and failed["error"]["field"].startswith("questions.q")


def test_504_past_the_sync_timeout_then_the_job_is_fetchable(stack, launcher):
    impatient = Service(stack.redis_url)
    launcher.api(impatient, LAYA_SYNC_TIMEOUT_S="0.5")
    worker = next(p for p in stack.processes if p.name == "worker")
    try:
        impatient.wait_healthy()
        worker.popen.send_signal(signal.SIGSTOP)  # warm but slower than the API expects: nothing queued ahead
        try:
            r = impatient.post("/v1/systemone", json=PAYLOAD)
        finally:
            worker.popen.send_signal(signal.SIGCONT)
        assert r.status_code == 504, r.text
        body = r.json()
        assert body["error"] == "timeout" and body["id"] in body["detail"]
        done = stack.wait_job(f"/v1/jobs/{body['id']}")  # any API instance can fetch it
        assert done["status"] == "done"
        assert done["result"] == stack.post("/v1/systemone", json=PAYLOAD).json()
    finally:
        impatient.processes[-1].stop()


def test_jobs_are_fetchable_after_the_api_restarts(stack, launcher):
    first = Service(stack.redis_url)
    api = launcher.api(first)
    ids = [first.post("/v1/jobs", json=request_body(f"state {i}", refund=NOUL)).json()["id"] for i in range(3)]
    assert api.stop() == 0  # graceful: gunicorn answered SIGTERM
    second = Service(stack.redis_url)
    launcher.api(second)
    try:
        for i, job_id in enumerate(ids):
            done = second.wait_job(f"/v1/jobs/{job_id}")
            assert done["status"] == "done"
            assert done["result"] == stack.post("/v1/systemone", json=request_body(f"state {i}", refund=NOUL)).json()
    finally:
        second.processes[-1].stop()


def test_a_batch_id_is_not_a_job(stack):
    batch = stack.post("/v1/batches", json={"states": ["a"], "questions": {"q": NOUL}}).json()
    assert stack.get(f"/v1/jobs/{batch['id']}").status_code == 404


def test_a_fetch_with_wait_answers_once_the_job_is_done_behind_a_busy_worker(stack):
    heavy = request_body("word " * 400, **{f"q{i}": NOUL for i in range(8)})
    ahead = [stack.post("/v1/jobs", json=heavy).json()["id"] for _ in range(10)]  # the worker's next seconds
    location = stack.post("/v1/jobs", json=PAYLOAD).headers["Location"]
    assert stack.get(location).json()["status"] in ("queued", "running")  # without wait: at once, not done
    done = stack.get(location, params={"wait": 30}).json()
    assert done["status"] == "done" and done["result"] == stack.post("/v1/systemone", json=PAYLOAD).json()
    assert {stack.get(f"/v1/jobs/{job}").json()["status"] for job in ahead} == {"done"}  # first in, first out
    assert stack.get(location, params={"wait": 30}).json() == done  # the stored answer stays where it was
    assert stack.redis().ttl(contract.result_key(done["id"])) > 0  # and expires as before


def test_a_bad_wait_is_refused_and_an_unknown_id_does_not_wait(stack):
    location = stack.post("/v1/jobs", json=PAYLOAD).headers["Location"]
    for wait in ("-1", "soon", "nan", "3600"):
        r = stack.get(location, params={"wait": wait})
        assert r.status_code == 422 and r.json()["field"] == "wait", (wait, r.text)
    r = stack.get("/v1/jobs/" + "0" * 32, params={"wait": 20})
    assert r.status_code == 404 and r.elapsed.total_seconds() < 20, r.text  # refused before any wait
