"""Sync requests answered back to back (worker/service/back_to_back.py): while one request's pass runs, the next
request is taken, prepared and launched, and one more is taken ahead; each answer is still the one its request gets
alone.

The worker runs recipe/paced_executor.py: the reference executor's passes on a thread of their own, each at least
PACE_MS long, as a GPU runs them beside the host, two in flight as the cuda executor holds them.
"""

from __future__ import annotations

import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from laya_common import contract
from laya_common.broker import queues
from recipe.load import cpu_seconds
from service.helpers import API_KEY, CHOICE, NOUL, SCORE, Service, post_concurrently, request_body, wait_until
from service.test_classes_of_work import paused

PACE_MS, DEPTH = 40, 2
CLIENTS, PER_CLIENT = 6, 4


@pytest.fixture(scope="module")
def paced(module_db, launcher) -> Service:
    service = Service(module_db)
    launcher.worker(service, LAYA_EXECUTOR="recipe.paced_executor:make", LAYA_PACE_MS=str(PACE_MS))
    launcher.api(service)
    service.wait_healthy()
    yield service
    for process in service.processes:
        process.stop()


def payloads() -> list[dict]:
    shapes = [{"refund": NOUL}, {"refund": NOUL, "topic": CHOICE}, {"anger": SCORE}, {"topic": CHOICE, "anger": SCORE}]
    return [
        request_body(f"Client {i}: order {i * 7} arrived {'late ' * (i % 5)}, what now?", **shapes[i % len(shapes)])
        for i in range(CLIENTS * PER_CLIENT)
    ]


def test_concurrent_requests_overlap_their_host_work_with_the_pass_before_and_get_their_lone_answers(paced):
    bodies = payloads()
    alone = [paced.post("/v1/systemone", json=body) for body in bodies]
    assert all(r.status_code == 200 for r in alone), [r.text for r in alone if r.status_code != 200]
    assert all(float(r.headers["x-executor-time"]) >= PACE_MS for r in alone)  # the pass's own time, paced

    answers = post_concurrently(paced, bodies, CLIENTS)
    for i, answer, _ in answers:
        assert answer == alone[i].json(), f"request {i} answered differently under load"

    redis = paced.redis()

    def worker_traces() -> list[dict] | None:  # each written with its answer
        traces = [redis.hgetall(contract.trace_key(job_id)) for _, _, job_id in answers]
        return traces if all(b"result_sent" in t for t in traces) else None

    traces = wait_until(worker_traces, 10, "the worker's trace of every request")
    # each request from the start of its host work to its answer decoded: the next one's host work began while
    # a pass ran (otherwise a request would wait for the one before to be answered), never more than DEPTH at once
    spans = sorted((float(t[b"engine_started"]), float(t[b"engine_finished"])) for t in traces)
    overlapping = sum(start < end for (_, end), (start, _) in zip(spans, spans[1:], strict=False))
    assert overlapping >= len(spans) // 2, f"only {overlapping} of {len(spans)} requests started during a pass"
    for (_, end), (start, _) in zip(spans, spans[DEPTH:], strict=False):
        assert start >= end, "more passes in flight than the executor holds"
    # and one more taken ahead: a request was taken before the answer DEPTH requests earlier was sent (not in
    # that answer's round trip), so its pass launches while Redis answers that round trip
    begun = sorted(traces, key=lambda t: float(t[b"engine_started"]))
    early = sum(
        float(t[b"worker_received"]) < float(before[b"result_sent"])
        for before, t in zip(begun, begun[DEPTH:], strict=False)
    )
    assert early >= len(begun) // 2, f"only {early} of {len(begun)} requests were taken ahead"


def test_a_job_queued_behind_sync_requests_is_answered_in_the_same_run(paced):
    job = paced.post("/v1/jobs", json=request_body("Where is my parcel?", refund=NOUL))
    assert job.status_code == 202, job.text
    with ThreadPoolExecutor(4) as pool:
        sync = list(pool.map(lambda b: paced.post("/v1/systemone", json=b), payloads()[:8]))
    assert all(r.status_code == 200 for r in sync)
    done = paced.wait_job(job.headers["Location"])
    assert done["status"] == "done" and set(done["result"]["answers"]) == {"refund"}


def test_a_call_of_many_states_among_requests_answered_back_to_back_gets_its_lone_answer(paced):
    """A POST /v1/systemone/batch taken in the middle of requests in flight waits for their passes, runs whole, and
    answers as it does alone; so do the requests around it."""
    calls = [("/v1/systemone", body) for body in payloads()[:6]]
    calls.insert(
        3, ("/v1/systemone/batch", {"model": "english", "states": ["late", "refund?", "no"], "questions": {"q": NOUL}})
    )
    alone = [paced.post(path, json=body).json() for path, body in calls]
    with ThreadPoolExecutor(len(calls)) as pool:
        together = list(pool.map(lambda call: paced.post(call[0], json=call[1]), calls))
    assert [r.status_code for r in together] == [200] * len(calls)
    assert [r.json() for r in together] == alone


def test_a_worker_waiting_for_the_next_request_itself_answers_it_and_lets_a_batch_start_at_once(private_db, launcher):
    """After answering, a request's task waits LAYA_LINGER_MS on the doorbell for the next one (here a minute). A
    request sent meanwhile is answered as it is alone; a batch sent meanwhile rings the same bell, which ends the
    wait at once (and rings again for Celery's consumer, which takes the batch), not after the minute."""
    service = Service(private_db)
    launcher.worker(service, LAYA_LINGER_MS="60000")
    launcher.api(service)
    service.wait_healthy()
    body = payloads()[0]
    first = service.post("/v1/systemone", json=body)
    again = service.post("/v1/systemone", json=body)
    assert first.status_code == again.status_code == 200 and again.json() == first.json()
    t0 = time.monotonic()
    batch = service.post("/v1/batches", json={"states": ["late", "refund?"], "questions": {"q": NOUL}})
    assert batch.status_code == 202, batch.text
    assert service.wait_job(f"/v1/batches/{batch.json()['id']}", timeout_s=40)["status"] == "done"
    assert time.monotonic() - t0 < 40  # the linger was a minute
    job = service.post("/v1/jobs", json=body)  # and the consumer, back in charge, takes a job as before
    assert service.wait_job(job.headers["Location"])["result"] == first.json()


def test_a_worker_waiting_for_the_next_request_polls_for_its_spin_then_sleeps(private_db, launcher):
    """For LAYA_SPIN_MS of that wait (here 1.5 s) the worker polls Redis's reply instead of sleeping: a core busy.
    Then it sleeps out the rest of the linger. A request sent after either is answered as it is alone."""
    service = Service(private_db)
    worker = launcher.worker(service, LAYA_LINGER_MS="60000", LAYA_SPIN_MS="1500")
    launcher.api(service)
    service.wait_healthy()
    body = payloads()[0]
    first = service.post("/v1/systemone", json=body)
    spinning = cpu_seconds_over(worker.popen.pid, 0.5)
    time.sleep(1.5)
    sleeping = cpu_seconds_over(worker.popen.pid, 0.5)
    again = service.post("/v1/systemone", json=body)
    assert first.status_code == again.status_code == 200 and again.json() == first.json()
    assert spinning > 0.15 and sleeping < 0.05, (spinning, sleeping)


def cpu_seconds_over(pid: int, over_s: float) -> float:
    """The CPU time process `pid` takes over the next `over_s` seconds."""
    before = cpu_seconds([pid])
    time.sleep(over_s)
    return cpu_seconds([pid]) - before


def test_a_warm_shutdown_under_steady_load_stops_taking_and_loses_nothing(private_db, launcher):
    """SIGTERM while callers keep the queue full: the worker answers what it holds and exits, instead of answering
    what keeps coming; what it left queued is answered by the next worker. While no worker is ready, a new request
    is refused (503) and never accepted."""
    service = Service(private_db)
    worker = launcher.worker(service, LAYA_EXECUTOR="recipe.paced_executor:make", LAYA_PACE_MS="20")
    launcher.api(service)
    service.wait_healthy()
    bodies, stop = payloads(), threading.Event()
    statuses: list[int] = []

    def answered() -> bool:
        return 200 in statuses

    def client(k: int) -> None:
        with requests.Session() as http:
            http.headers["Authorization"] = f"Bearer {API_KEY}"
            while not stop.is_set():
                r = http.post(service.url("/v1/systemone"), json=bodies[k % len(bodies)], timeout=120)
                statuses.append(r.status_code)

    with ThreadPoolExecutor(4) as pool:
        callers = [pool.submit(client, k) for k in range(4)]
        try:
            # answering, so Celery's consumer runs (and its warm shutdown handler is in place), with requests queued
            wait_until(
                lambda: answered() and service.redis().llen(queues.queue_name("english", "sync")) > 0,
                30,
                "requests answered and requests queued",
            )
            worker.popen.send_signal(signal.SIGTERM)
            assert worker.popen.wait(15) == 0, worker.tail()  # it answers the passes in flight, and exits
            service.processes.remove(worker)
            launcher.worker(service)
            service.wait_healthy()  # the requests the first left queued are answered now
        finally:
            stop.set()
        for caller in callers:
            caller.result()
    assert 200 in statuses and set(statuses) <= {200, 503}, statuses


def test_a_request_launched_behind_a_pass_that_fails_the_executor_is_answered_by_the_next_worker(private_db, launcher):
    """Two requests in flight when the first one's pass fails the executor: the first is answered 500, the second
    goes back on its queue (it was not to blame), and the next worker to start answers it."""
    service = Service(private_db)
    failing = launcher.worker(
        service,
        LAYA_EXECUTOR="recipe.paced_executor:make",
        LAYA_PACE_INNER="recipe.faulty_executor:make",  # every pass after the warmup raises
        LAYA_PACE_MS="300",
    )
    launcher.api(service)
    service.wait_healthy()
    redis, sync = service.redis(), queues.queue_name("english", "sync")
    with ThreadPoolExecutor(2) as pool:
        # both queued, so the second is taken and launched while the first one's pass runs
        with paused(failing, service):
            calls = [pool.submit(service.post, "/v1/systemone", json=body) for body in payloads()[:2]]
            wait_until(lambda: redis.llen(sync) == 2, 10, "both requests queued")
        assert failing.popen.wait(60) == 1, failing.tail()
        assert "put back on its queue" in failing.tail()
        service.processes.remove(failing)
        launcher.worker(service)
        answers = [call.result() for call in calls]
    assert sorted(r.status_code for r in answers) == [200, 500], [r.text for r in answers]


def test_a_worker_stopped_as_soon_as_it_says_ready_stops_gracefully(private_db, launcher):
    """Readiness is announced once Celery's consumer is ready, its shutdown handlers in place: a SIGTERM as soon as
    the worker's record says ready is a warm shutdown (exit 0, the record withdrawn), not a kill by the signal."""
    service = Service(private_db)
    worker = launcher.worker(service)
    redis = service.redis()
    wait_until(lambda: redis.keys("laya:worker:*"), 120, "the worker's ready record", interval_s=0.01)
    worker.popen.send_signal(signal.SIGTERM)
    assert worker.popen.wait(30) == 0, worker.tail()
    assert not redis.keys("laya:worker:*")
