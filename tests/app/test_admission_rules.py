"""app.admission's arithmetic, and Redis's refusals answered as 503 with Retry-After."""

from __future__ import annotations

import redis

from app import admission
from app.admission import NO_BOUND, Fleet


def test_the_sync_bound_is_what_the_workers_can_answer_within_the_timeout():
    assert admission.sync_bound(Fleet(1), 30) == NO_BOUND  # nothing measured yet: only the hard caps
    assert admission.sync_bound(Fleet(0, {"sync": 0.01}), 30) == NO_BOUND
    one = Fleet(1, {"sync": 0.01})
    assert admission.sync_bound(one, 30) == 2999  # (30 - 0.01 running) / 0.01
    assert admission.sync_bound(Fleet(2, {"sync": 0.01}), 30) == 5998  # two workers drain twice as fast
    assert admission.sync_bound(Fleet(1, {"sync": 0.01, "jobs": 1.0}), 30) == 2900  # a job may be running
    assert admission.sync_bound(Fleet(1, {"sync": 60.0}), 30) == 1  # always one, when nothing is queued


def test_retry_after_is_when_the_queue_ahead_should_have_room():
    one = Fleet(1, {"sync": 0.01, "jobs": 0.5, "batches": 20.0})
    assert admission.sync_retry_after(one, 3999, 30) == 11  # 40 s of requests + 0.5 running - 30
    assert admission.sync_retry_after(one, 2999, 30) == 1  # at least a second
    assert admission.queued_retry_after(one, "jobs", 1000, 1000) == 1
    assert admission.queued_retry_after(one, "jobs", 1100, 1000) == 51  # 101 jobs of 0.5 s
    assert admission.queued_retry_after(Fleet(2, {"batches": 20.0}), "batches", 8, 8) == 10
    assert admission.queued_retry_after(Fleet(1), "jobs", 5, 5) == admission.UNKNOWN_RETRY_S


def test_redis_memory_is_full_within_the_headroom_of_its_bound_and_never_without_one():
    assert not admission.memory_full({"used_memory": 10**12, "maxmemory": 0})
    assert not admission.memory_full({"used_memory": 89, "maxmemory": 100})
    assert admission.memory_full({"used_memory": 90, "maxmemory": 100})


def test_a_redis_at_its_memory_bound_is_a_503_with_retry_after(client, dispatcher):
    def refuse(*_):
        raise redis.exceptions.OutOfMemoryError("command not allowed when used memory > 'maxmemory'.")

    dispatcher.submit = refuse
    r = client.post("/v1/jobs", json={"state": "x", "questions": {}})
    assert r.status_code == 503 and r.get_json()["error"] == "overloaded" and int(r.headers["Retry-After"]) >= 1
