"""Classes of work on a real worker: sync requests first, then jobs, then batches, first in first out within a class;
a running batch lets waiting sync requests and jobs pass between two of its windows; cancelling queued and running
work. Each test has a worker of its own, paused (SIGSTOP) where it needs work to queue up behind it."""

from __future__ import annotations

import contextlib
import json
import signal
import threading

import pytest

from laya_common import contract
from laya_common.broker import queues, transport
from service.helpers import NOUL, Service, assert_same_answers, request_body, wait_until

CHUNK = 4  # states between two progress updates of a batch (LAYA_BATCH_CHUNK)


@pytest.fixture
def service(private_db, launcher):
    service = Service(private_db)
    # a long heartbeat TTL: a worker paused below stays ready meanwhile
    service.worker = launcher.worker(service, LAYA_BATCH_CHUNK=str(CHUNK), LAYA_HEARTBEAT_TTL_S="10")
    launcher.api(service)
    service.wait_healthy()
    return service


@contextlib.contextmanager
def paused(worker, service: Service):
    """The worker stopped (SIGSTOP) while the block queues work behind it; it goes on afterwards.

    An idle worker's take waits in Redis (BLPOP on its doorbell, then TAKE) whether or not the worker runs, and would
    take what is queued meanwhile: the block begins once no client of the service's database is blocked in Redis.
    """
    worker.popen.send_signal(signal.SIGSTOP)
    redis = service.redis()
    db = redis.connection_pool.connection_kwargs.get("db", 0)
    wait_until(
        lambda: not any("b" in c["flags"] and int(c["db"]) == db for c in redis.client_list()),
        10,
        "the stopped worker's wait in Redis to time out",
    )
    try:
        yield
    finally:
        worker.popen.send_signal(signal.SIGCONT)


def long_states(n: int) -> list[str]:
    return [f"Order {i}: " + "the parcel has not arrived yet " * 8 for i in range(n)]


def started_at(service, job_id: str) -> float:
    """When the worker started the task (its envelope's timings, or for a sync request its trace)."""
    envelope = service.redis().lindex(contract.result_key(job_id), 0)
    if envelope is not None:
        return json.loads(envelope)["timings"]["started_at"]
    return float(service.redis().hget(contract.trace_key(job_id), "task_started"))


def test_work_is_taken_sync_first_then_jobs_then_batches_first_in_first_out(service):
    sync_ids: list[str] = []

    def sync_call(state: str) -> None:
        r = service.post("/v1/systemone", json=request_body(state, q=NOUL), headers={contract.TRACE_HEADER: "1"})
        assert r.status_code == 200, r.text
        sync_ids.append(r.headers["x-job-id"])

    with paused(service.worker, service):
        batch = service.post("/v1/batches", json={"states": ["a", "b"], "questions": {"q": NOUL}}).json()["id"]
        jobs = [service.post("/v1/jobs", json=request_body(f"job {i}", q=NOUL)).json()["id"] for i in range(3)]
        callers = []
        for i in range(2):  # one after the other, so that their order in the queue is known
            callers.append(threading.Thread(target=sync_call, args=(f"sync {i}",)))
            callers[-1].start()
            wait_until(lambda n=i + 1: service.redis().llen(queues.queue_name("english", "sync")) == n, 10, "queued")
    for caller in callers:
        caller.join(60)
    service.wait_job(f"/v1/batches/{batch}")
    for job in jobs:
        service.wait_job(f"/v1/jobs/{job}")
    order = sorted([*sync_ids, *jobs, batch], key=lambda job_id: started_at(service, job_id))
    assert len(sync_ids) == 2 and order[:2] == sorted(sync_ids, key=lambda job_id: started_at(service, job_id))
    assert order[2:] == [*jobs, batch]


def test_a_sync_request_and_a_job_sent_while_a_long_batch_runs_pass_it(service):
    states = long_states(400)
    batch = service.post("/v1/batches", json={"states": states, "questions": {"late": NOUL}}).json()["id"]
    wait_until(lambda: service.get(f"/v1/batches/{batch}?limit=1").json()["done"] >= 3 * CHUNK, 120, "the batch")
    sync = service.post("/v1/systemone", json=request_body("Please refund me.", refund=NOUL))
    assert sync.status_code == 200, sync.text
    job = service.post("/v1/jobs", json=request_body("Where is my parcel?", late=NOUL)).json()["id"]
    done_job = service.get(f"/v1/jobs/{job}", params={"wait": 30}).json()
    progress = service.get(f"/v1/batches/{batch}?limit=1").json()
    assert done_job["status"] == "done" and progress["status"] == "running" and progress["done"] < len(states)
    assert sync.elapsed.total_seconds() < 1.0  # one window of the batch at most, not the rest of it
    finished = wait_until(
        lambda: (b := service.get(f"/v1/batches/{batch}").json())["status"] == "done" and b, 120, "the batch to finish"
    )
    assert finished["done"] == len(finished["results"]) == len(states)  # every state once, in order
    for i in (0, 13, 399):
        alone = service.post("/v1/systemone", json=request_body(states[i], late=NOUL)).json()
        assert_same_answers(finished["results"][i], alone)
    assert service.redis().zcard(transport.UNACKED_INDEX_KEY) == 0  # every message taken was acknowledged once


def test_cancel_a_queued_job_and_a_queued_batch_they_never_run(service):
    with paused(service.worker, service):
        job = service.post("/v1/jobs", json=request_body("refund?", q=NOUL)).json()["id"]
        batch = service.post("/v1/batches", json={"states": ["a", "b"], "questions": {"q": NOUL}}).json()["id"]
        assert service.http.delete(service.url(f"/v1/jobs/{job}")).json() == {"id": job, "status": "cancelled"}
        cancelled = service.http.delete(service.url(f"/v1/batches/{batch}")).json()
        assert (cancelled["status"], cancelled["done"], cancelled["total"]) == ("cancelled", 0, 2)
        assert service.http.delete(service.url(f"/v1/jobs/{job}")).status_code == 200  # twice is once
    redis = service.redis()
    wait_until(lambda: not any(redis.llen(q) for q in queues.queue_names("english")), 30, "the worker to skip them")
    wait_until(lambda: redis.zcard(transport.UNACKED_INDEX_KEY) == 0, 30, "both acknowledged")
    assert service.get(f"/v1/jobs/{job}").json() == {"id": job, "status": "cancelled"}
    assert service.get(f"/v1/batches/{batch}").json()["status"] == "cancelled"
    assert redis.llen(contract.result_key(job)) == 1  # the cancellation alone: the worker wrote no answer
    assert redis.llen(contract.batch_results_key(batch)) == 0


def test_cancel_a_running_batch_stops_it_at_its_next_window_keeping_what_it_stored(service):
    states = long_states(400)
    batch = service.post("/v1/batches", json={"states": states, "questions": {"late": NOUL}}).json()["id"]
    wait_until(lambda: service.get(f"/v1/batches/{batch}?limit=1").json()["done"] >= 2 * CHUNK, 120, "the batch")
    r = service.http.delete(service.url(f"/v1/batches/{batch}"))
    assert r.status_code == 200 and r.json()["status"] == "cancelled", r.text
    redis = service.redis()
    wait_until(lambda: redis.zcard(transport.UNACKED_INDEX_KEY) == 0, 30, "the worker to stop the batch")
    stopped = service.get(f"/v1/batches/{batch}").json()
    assert stopped["status"] == "cancelled" and 2 * CHUNK <= stopped["done"] < len(states)
    assert len(stopped["results"]) == stopped["done"] and not redis.exists(contract.batch_input_key(batch))
    assert service.post("/v1/systemone", json=request_body("refund?", q=NOUL)).status_code == 200  # it serves on
    assert service.get(f"/v1/batches/{batch}").json()["done"] == stopped["done"]  # and wrote nothing more


def test_cancel_what_has_finished_is_409_and_an_unknown_id_404(service):
    job = service.post("/v1/jobs", json=request_body("refund?", q=NOUL)).json()["id"]
    service.wait_job(f"/v1/jobs/{job}")
    r = service.http.delete(service.url(f"/v1/jobs/{job}"))
    assert r.status_code == 409 and r.json()["error"] == "conflict", r.text
    assert service.get(f"/v1/jobs/{job}").json()["status"] == "done"  # unchanged
    assert service.http.delete(service.url("/v1/jobs/" + "0" * 32)).status_code == 404
    assert service.http.delete(service.url("/v1/batches/" + job)).status_code == 404  # a job is not a batch
