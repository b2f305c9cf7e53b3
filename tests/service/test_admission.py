"""Admission on a real stack: past the depth bounds a job or a batch gets 503 with Retry-After and every job accepted
is answered; a sync request that the requests queued ahead would keep past its timeout gets 503 at once, not a
504 after the whole wait; Redis near its memory bound refuses new work."""

from __future__ import annotations

import json
import time

import pytest

from app import admission
from app.admission import Fleet
from app.dispatch import READY_CACHE_S as admission_cache_s
from laya_common import contract
from laya_common.broker import messages, queues, transport
from service.helpers import NOUL, Service, request_body, wait_until
from service.test_classes_of_work import paused


@pytest.fixture
def service(private_db, launcher):
    service = Service(private_db)
    # a long heartbeat TTL: the worker paused below stays ready meanwhile
    service.worker = launcher.worker(service, LAYA_HEARTBEAT_TTL_S="10")
    launcher.api(service, LAYA_MAX_QUEUED_JOBS="5", LAYA_MAX_QUEUED_BATCHES="2", LAYA_SYNC_TIMEOUT_S="2")
    service.wait_healthy()
    return service


def assert_overloaded(r) -> int:
    assert r.status_code == 503, r.text
    body = r.json()
    assert body["error"] == "overloaded", r.text
    assert int(r.headers["Retry-After"]) == body["retry_after"] >= 1
    return body["retry_after"]


def test_a_flood_of_jobs_and_batches_past_the_bounds_gets_503_with_retry_after_and_loses_nothing(service):
    with paused(service.worker, service):
        answers = [service.post("/v1/jobs", json=request_body(f"job {i}", q=NOUL)) for i in range(20)]
        batches = [service.post("/v1/batches", json={"states": ["a"], "questions": {"q": NOUL}}) for _ in range(4)]
    accepted = [r.json()["id"] for r in answers if r.status_code == 202]
    assert len(accepted) == 5 and [r.status_code for r in answers[:5]] == [202] * 5
    for r in answers[5:]:
        assert_overloaded(r)
    assert [r.status_code for r in batches[:2]] == [202, 202]
    for r in batches[2:]:
        assert_overloaded(r)
    for job in accepted:
        assert service.wait_job(f"/v1/jobs/{job}")["status"] == "done"
    for r in batches[:2]:
        assert service.wait_job(f"/v1/batches/{r.json()['id']}")["status"] == "done"
    # nothing refused left a trace: no record, no input, no message
    refused = {r.json().get("id") for r in answers[5:] + batches[2:]} - {None}
    assert not refused and len(service.redis().keys("laya:job:*")) == 5 + 2
    assert service.redis().keys("laya:batch:*:input") == []


def test_a_sync_request_behind_more_than_its_timeout_of_work_gets_503_at_once(service):
    for _ in range(5):  # the worker measures how long a sync request takes it
        assert service.post("/v1/systemone", json=request_body("refund?", q=NOUL)).status_code == 200
    db = service.redis()

    def measured() -> Fleet | None:
        fleet = Fleet.of("english", contract.read_workers(db))
        return fleet if fleet.per_task("sync") else None

    wait_until(measured, 15, "the worker to publish its drain rate")
    queue = queues.queue_name("english", "sync")
    celery = service_celery(service)
    with paused(service.worker, service):
        fleet = measured()  # what the API reads too, once its cache of a second has expired
        time.sleep(admission_cache_s + 0.1)
        bound = admission.sync_bound(fleet, 2.0)
        for i in range(bound):  # sync requests of other callers, queued ahead
            message = messages.encode(
                celery, contract.TASK_DECIDE, request_body(f"ahead {i}", q=NOUL), task_id=f"ahead-{i}", queue=queue
            )
            db.eval(queues.ENQUEUE, 3, queue, queues.bell_key("english"), "", message, -1, 60)
        r = service.post("/v1/systemone", json=request_body("refund?", q=NOUL))
        assert r.elapsed.total_seconds() < 1.5  # refused at once, not after the 2 s timeout
        assert_overloaded(r)
        assert db.llen(queue) == bound  # the refused request was not queued
    wait_until(lambda: db.llen(queue) == 0, 120, "the queued requests to be answered")
    assert service.post("/v1/systemone", json=request_body("refund?", q=NOUL)).status_code == 200


def service_celery(service):
    from celery import Celery

    celery = Celery("laya-test")
    celery.conf.update(contract.celery_config(service.redis_url))
    return celery


def test_redis_near_its_memory_bound_refuses_new_work_and_a_full_one_too(launcher, bounded_redis):
    url, db, fill = bounded_redis
    service = Service(url)
    launcher.worker(service)
    launcher.api(service)
    service.wait_healthy()
    job = service.post("/v1/jobs", json=request_body("refund?", q=NOUL))
    assert job.status_code == 202
    service.wait_job(f"/v1/jobs/{job.json()['id']}")
    fill()
    db.delete(*db.keys("filler:100000:*")[:2])  # just under the bound: within the headroom kept for answers
    time.sleep(admission_cache_s + 0.1)
    for r in (
        service.post("/v1/jobs", json=request_body("x", q=NOUL)),
        service.post("/v1/systemone", json=request_body("refund?", q=NOUL)),
    ):
        assert_overloaded(r)
        assert "memory" in r.json()["detail"]
    assert json.loads(db.get(contract.worker_key("english", service.workers()[0]["node"])))["state"] == "ready"


def test_work_taken_or_answered_while_redis_is_full_waits_for_room_and_is_not_lost(launcher, bounded_redis):
    """A job queued, then Redis filled past its bound before the worker takes it, and one taken and answered while
    it is full: the worker neither loses them nor dies (a refused acknowledgement used to stop Celery's consumer),
    and both are answered once there is room."""
    url, db, fill = bounded_redis
    service = Service(url)
    worker = launcher.worker(service, LAYA_HEARTBEAT_TTL_S="10")
    launcher.api(service)
    service.wait_healthy()
    first = service.post("/v1/jobs", json=request_body("refund?", q=NOUL)).json()["id"]
    assert service.wait_job(f"/v1/jobs/{first}")["status"] == "done"  # the worker's consumer is connected
    with paused(worker, service):
        ids = [service.post("/v1/jobs", json=request_body(f"refund {i}?", q=NOUL)).json()["id"] for i in range(2)]
        fill()
        # a filled Redis sits at its bound, where a freed buffer lets the next write through: held well past it
        db.config_set("maxmemory", db.info("memory")["used_memory"] // 2)
    # premise: the worker goes on and meets the full Redis (its takes are refused, or its answer waits for room)
    wait_until(lambda: "past its maxmemory" in worker.tail(), 20, "the worker to meet the full Redis")
    time.sleep(1)  # a second more against the full Redis: the worker keeps retrying and does not exit
    assert worker.popen.poll() is None, worker.tail()
    db.config_set("maxmemory", "16mb")
    db.delete(*db.keys("filler:*"))
    for job_id in ids:
        assert service.wait_job(f"/v1/jobs/{job_id}", timeout_s=60)["status"] == "done"
    assert worker.popen.poll() is None and db.zcard(transport.UNACKED_INDEX_KEY) == 0


def test_an_answer_stored_with_the_next_take_while_redis_is_full_waits_for_room_and_nothing_is_lost(
    launcher, bounded_redis
):
    """A job's pass in flight (recipe/paced_executor.py: 3 s) when Redis fills: its answer and the take of the next
    job, sent in one round trip (worker/service/back_to_back.py), are both refused; the answer waits for room, the
    next job stays queued, and both are answered once there is room."""
    url, db, fill = bounded_redis
    service = Service(url)
    worker = launcher.worker(
        service, LAYA_HEARTBEAT_TTL_S="30", LAYA_EXECUTOR="recipe.paced_executor:make", LAYA_PACE_MS="3000"
    )
    launcher.api(service)
    service.wait_healthy(timeout_s=120)
    first = service.post("/v1/jobs", json=request_body("refund?", q=NOUL)).json()["id"]
    # taken: its pass now runs for 3 s
    wait_until(lambda: db.zcard(transport.UNACKED_INDEX_KEY) == 1, 2, "the first job taken")
    with paused(worker, service):
        second = service.post("/v1/jobs", json=request_body("refund now?", q=NOUL)).json()["id"]
        fill()
        # a filled Redis sits at its bound, where a freed buffer lets the next write through: held well past it
        db.config_set("maxmemory", db.info("memory")["used_memory"] // 2)
    wait_until(lambda: "answer waits" in worker.tail(), 30, "the first answer to meet the full Redis")
    assert worker.popen.poll() is None, worker.tail()
    assert db.llen(queues.queue_name("english", "jobs")) == 1  # the second job: not taken while Redis was full
    db.config_set("maxmemory", "16mb")
    db.delete(*db.keys("filler:*"))
    for job_id in (first, second):
        assert service.wait_job(f"/v1/jobs/{job_id}", timeout_s=60)["status"] == "done"
    assert worker.popen.poll() is None and db.zcard(transport.UNACKED_INDEX_KEY) == 0
