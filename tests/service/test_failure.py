"""A worker's life: warmup before work, a native failure, a crash, a bad checkpoint; each on a service of its own."""

from __future__ import annotations

import json
import shutil
import signal

from celery import Celery

from laya_common import contract
from laya_common.broker import queues
from service.helpers import NOUL, Service, assert_same_answers, request_body, wait_until

PAYLOAD = request_body("Please refund the duplicate charge.", refund=NOUL)

JOBS = queues.queue_name("english", "jobs")  # where a job someone queued earlier waits


def test_executor_failure_is_500_stops_the_worker_and_health_is_503_until_a_fresh_one_is_warm(private_db, launcher):
    service = Service(private_db)
    # every forward after the warmup raises
    worker = launcher.worker(service, LAYA_EXECUTOR="recipe.faulty_executor:make")
    launcher.api(service)
    service.wait_healthy()

    r = service.post("/v1/systemone", json=PAYLOAD)
    assert r.status_code == 500, r.text
    body = r.json()
    assert body["error"] == "executor_failure" and "Traceback" not in r.text and "/" not in body["detail"]
    wait_until(lambda: worker.popen.poll() is not None, 60, "the failed worker to exit")
    assert worker.popen.returncode == 1

    health = service.get("/health")
    assert health.status_code == 503
    assert health.json()["error"] == "unavailable" and "failed" in health.json()["detail"]
    assert service.post("/v1/systemone", json=PAYLOAD).status_code == 503
    assert service.post("/v1/jobs", json=PAYLOAD).status_code == 503

    service.processes.remove(worker)
    launcher.worker(service)
    assert service.wait_healthy()["status"] == "ok"
    assert service.post("/v1/systemone", json=PAYLOAD).status_code == 200


def test_health_is_503_while_no_worker_is_warm_and_when_redis_is_gone(private_db, launcher):
    service = Service(private_db)
    launcher.api(service)
    r = service.get("/health")
    assert r.status_code == 503 and "warmup" in r.json()["detail"]
    unreachable = Service("redis://127.0.0.1:9/0")  # nothing listens on the discard port
    launcher.api(unreachable)
    try:
        for r in (unreachable.get("/health"), unreachable.post("/v1/systemone", json=PAYLOAD)):
            assert r.status_code == 503 and r.json()["error"] == "unavailable", r.text
    finally:
        unreachable.processes[-1].stop()


def test_a_worker_killed_whole_mid_batch_loses_nothing(private_db, launcher):
    """SIGKILL the worker while it scores a batch: once its heartbeat has expired, a fresh worker takes the
    batch over (not after the hours-long visibility timeout) and finishes it, each state once, in order."""
    service = Service(private_db)
    worker = launcher.worker(service, LAYA_BATCH_CHUNK="2")
    launcher.api(service)
    service.wait_healthy()
    assert service.workers()[0]["pid"] == worker.popen.pid  # one process runs the tasks: the solo pool
    states = [f"state {i} " + "words " * 60 for i in range(40)]
    batch_id = service.post("/v1/batches", json={"states": states, "questions": {"q": NOUL, "r": NOUL}}).json()["id"]
    wait_until(lambda: service.get(f"/v1/batches/{batch_id}").json()["done"] >= 2, 60, "the batch to start")
    assert worker.stop(signal.SIGKILL) == -signal.SIGKILL
    service.processes.remove(worker)
    launcher.worker(service)

    assert_finished_in_order(service, batch_id, states, {"q": NOUL, "r": NOUL}, checked=(0, 17, 39))
    assert worker.popen.pid not in {w["pid"] for w in service.workers()}


def test_a_request_that_fails_the_executor_while_a_batch_lets_it_pass_requeues_the_batch(private_db, launcher):
    """A sync request taken between two passes of a batch fails the executor: that request gets its 500, and the
    batch, whose own passes were sound, goes back on its queue for the next worker instead of failing with it."""
    service = Service(private_db)
    # one window of 13 passes of at least 300 ms; the executor fails for good at the first pass 256 tokens wide
    worker = launcher.worker(
        service,
        LAYA_BATCH_CHUNK="2048",
        LAYA_EXECUTOR="recipe.paced_executor:make",
        LAYA_PACE_MS="300",
        LAYA_PACE_INNER="recipe.faulty_executor:make",
        LAYA_FAULT_WIDTH="256",
    )
    launcher.api(service)
    service.wait_healthy()
    states = [f"state {i} " + "words " * 20 for i in range(200)]
    batch_id = service.post("/v1/batches", json={"states": states, "questions": {"q": NOUL}}).json()["id"]
    wait_until(lambda: service.get(f"/v1/batches/{batch_id}").json()["status"] == "running", 60, "the batch to start")

    r = service.post("/v1/systemone", json=request_body("word " * 400, q=NOUL))
    assert r.status_code == 500 and r.json()["error"] == "executor_failure", r.text
    assert worker.popen.wait(30) != 0, worker.tail()
    stopped = service.get(f"/v1/batches/{batch_id}").json()
    assert stopped["status"] in ("queued", "running") and stopped["done"] < len(states), stopped
    assert "executor failed; batch" in worker.tail() and "requeued" in worker.tail()
    service.processes.remove(worker)
    launcher.worker(service)

    assert_finished_in_order(service, batch_id, states, {"q": NOUL}, checked=(0, len(states) - 1))


def assert_finished_in_order(service: Service, batch_id: str, states: list[str], questions: dict, checked) -> None:
    """The batch reaches done on the next worker with every state's result, once each and in order: the states at
    the indices `checked` answered as each alone."""
    done = wait_until(
        lambda: (b := service.get(f"/v1/batches/{batch_id}").json())["status"] == "done" and b,
        240,
        "the batch to finish on the next worker",
    )
    assert done["done"] == done["total"] == len(done["results"]) == len(states)
    for i in checked:
        alone = service.post("/v1/systemone", json={"state": states[i], "questions": questions})
        assert_same_answers(done["results"][i], alone.json())


def test_a_checkpoint_that_does_not_load_stops_the_worker_and_health_says_why(
    private_db, launcher, checkpoint, tmp_path
):
    broken = tmp_path / "broken"
    shutil.copytree(checkpoint, broken)
    (broken / "model.safetensors").write_bytes((checkpoint / "model.safetensors").read_bytes()[:1000])
    service = Service(private_db)
    launcher.api(service)
    celery = Celery("test")
    celery.conf.update(contract.celery_config(private_db))
    celery.send_task(contract.TASK_DECIDE, args=[PAYLOAD], queue=JOBS)  # accepted earlier
    worker = launcher.worker(service, checkpoint=broken)
    wait_until(lambda: worker.popen.poll() is not None, 120, "the worker to give up")
    assert worker.popen.returncode == 1
    assert service.redis().llen(JOBS) == 1  # the job waits for a worker that starts
    health = service.get("/health")
    assert health.status_code == 503 and "startup failed" in health.json()["detail"]
    assert "/" not in health.json()["detail"]


def test_a_warming_worker_takes_nothing_from_the_queue(private_db, launcher):
    """A job already queued stays in Redis (where an idle worker could take it) until this worker is ready."""
    service = Service(private_db)
    celery = Celery("test")
    celery.conf.update(contract.celery_config(private_db))
    job = celery.send_task(contract.TASK_DECIDE, args=[PAYLOAD], queue=JOBS)
    redis = service.redis()
    launcher.worker(service)
    samples = []  # (queue depth, a worker is ready), in time order

    def ready_and_drained() -> bool:
        records = [redis.get(key) for key in redis.smembers(contract.WORKERS_KEY)]
        ready = any(r is not None and json.loads(r)["state"] == "ready" for r in records)
        samples.append((redis.llen(JOBS), ready))
        return ready and samples[-1][0] == 0

    wait_until(ready_and_drained, 180, "the worker to warm up and take the job", interval_s=0.05)
    first_drained = next(i for i, (depth, _) in enumerate(samples) if depth == 0)
    assert first_drained > 0 and samples[first_drained][1]  # the queue kept the job all through the warmup
    _, envelope = redis.blpop([contract.result_key(job.id)], timeout=60)
    assert json.loads(envelope)["ok"]


def test_a_warm_shutdown_mid_batch_requeues_it_and_the_next_worker_finishes_it(private_db, launcher):
    """SIGTERM while a worker scores a batch: it stops after its current window and exits 0, the batch back on its
    queue; the next worker goes on after the states stored, each state once, in order."""
    service = Service(private_db)
    # passes of at least 400 ms, two states a window: the batch alone takes this worker over 20 s
    worker = launcher.worker(
        service, LAYA_BATCH_CHUNK="2", LAYA_EXECUTOR="recipe.paced_executor:make", LAYA_PACE_MS="400"
    )
    launcher.api(service)
    service.wait_healthy()
    states = [f"state {i} " + "words " * 20 for i in range(100)]
    batch_id = service.post("/v1/batches", json={"states": states, "questions": {"q": NOUL}}).json()["id"]
    wait_until(lambda: service.get(f"/v1/batches/{batch_id}").json()["done"] >= 4, 60, "the batch to start")
    worker.popen.send_signal(signal.SIGTERM)
    assert worker.popen.wait(15) == 0, worker.tail()
    assert "requeued after" in worker.tail()
    stopped_at = service.get(f"/v1/batches/{batch_id}").json()["done"]
    assert stopped_at < len(states)  # the premise: the old worker left it unfinished
    service.processes.remove(worker)
    launcher.worker(service)

    # across the handover
    assert_finished_in_order(service, batch_id, states, {"q": NOUL}, checked=(0, stopped_at - 1, stopped_at, 99))
