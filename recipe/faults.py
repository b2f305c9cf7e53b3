"""Faults under load: nothing accepted is lost, no caller hangs or gets a wrong answer.

Starts its own service (recipe/stack.py; Redis with its append-only file on, heartbeat TTL 3 s, sync
timeout 10 s) and keeps a load generator running the whole time: callers alternating async jobs
(POST /v1/jobs) and sync requests (POST /v1/systemone), and a poller reading /health. Then, in order:

    redis-restart       Redis stopped (SIGTERM) for a few seconds, started again on its append-only file
    worker-kill         the whole worker SIGKILLed mid-request and mid-batch, three times in a row, a
                        fresh one started each time (the solo pool has no child to kill apart)
    api-restart         the API stopped (SIGTERM) and started again
    executor-failure    a worker whose executor fails (recipe/faulty_executor.py; LAYA_FAULT=cuda on
                        a GPU: a real CUDA error): one 500, health 503, 200 again once a fresh worker is warm
    tampered-checkpoint (not by default: only the cuda executor has hashes to check) a worker given the
                        checkpoint with one changed byte refuses to start, naming the file

Counts jobs accepted (202) and answered, lost (accepted, never answered: must be 0), answers stored
twice, wrong answers (not equal to the same request answered alone), and what sync callers saw.
Writes faults.json into --output.

    python -m recipe.faults --checkpoint DIR --output /tmp/faults-1 [--faults redis-restart,worker-kill]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import sys
import threading
import time
from collections import Counter
from pathlib import Path

from laya_common import contract
from laya_common.broker import queues, transport
from recipe.client import Client
from recipe.load import REQUESTS, answers_alone
from recipe.provenance import versions
from recipe.stack import Stack, add_stack_arguments, stop, wait_until

FAULTS = ("redis-restart", "worker-kill", "api-restart", "executor-failure")
HEARTBEAT_TTL_S, SYNC_TIMEOUT_S = 3, 10
CALLERS = 4
REDIS_DOWN_S = 3.0
KILL_TARGETS = ("request", "batch", "request")  # what the worker holds when it is killed, kill after kill
KILL_TRIES = 5
TIMING_STEP_S = 0.01  # how often the waits that time a recovery look
SETTLE_S = 300  # how long every accepted job gets to be answered once the faults are over
TAMPERED = "tokenizer/tokenizer_config.json"  # small: the tampered copy links every other artifact
START_TIMEOUT_S = 120
BATCH_STATES = 120  # a batch that runs for seconds, in chunks of 8 (LAYA_BATCH_CHUNK)


class Load:
    """Callers that keep submitting jobs and sync requests, and a /health poller, until stopped."""

    def __init__(self, stack: Stack, expected: list[bytes]) -> None:
        self.stack, self.expected = stack, expected
        self.accepted: list[tuple[str, int]] = []  # (job id, request index) of every 202
        self.sync: list[dict] = []  # every sync call: status, seconds, equal (200s), job id (504s)
        self.submit_statuses: Counter = Counter()
        self.health: list[tuple[float, int | None]] = []
        self._stop, self._paused = threading.Event(), threading.Event()
        self._threads = [threading.Thread(target=self._caller, args=(k,), daemon=True) for k in range(CALLERS)]
        self._threads.append(threading.Thread(target=self._poll_health, daemon=True))

    def __enter__(self) -> Load:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        for t in self._threads:
            t.join()

    @contextlib.contextmanager
    def paused(self):
        """The callers send nothing new meanwhile (the /health poller goes on)."""
        self._paused.set()
        try:
            yield
        finally:
            self._paused.clear()

    def _caller(self, k: int) -> None:
        client, j = Client(self.stack.frontend, timeout_s=SYNC_TIMEOUT_S + 50), k
        while not self._stop.is_set():
            if self._paused.is_set():
                time.sleep(0.05)
                continue
            i, j = j % len(REQUESTS), j + 1
            body = json.dumps(REQUESTS[i]).encode()
            try:
                if j % 2:
                    status, _, answer = client.request("POST", "/v1/jobs", body)
                    self.submit_statuses[status] += 1
                    if status == 202:
                        self.accepted.append((json.loads(answer)["id"], i))
                else:
                    t0 = time.monotonic()
                    status, _, answer = client.request("POST", "/v1/systemone", body)
                    self.sync.append(
                        {
                            "status": status,
                            "seconds": time.monotonic() - t0,
                            "equal": answer == self.expected[i] if status == 200 else None,
                            "id": json.loads(answer).get("id") if status == 504 else None,
                            "request": i,
                        }
                    )
            except OSError as e:  # refused while the API restarts
                status = "refused" if isinstance(e, ConnectionRefusedError) else type(e).__name__
                self.sync.append({"status": status, "request": i})
            if status != 200 and status != 202:
                time.sleep(0.05)

    def _poll_health(self) -> None:
        while not self._stop.is_set():
            self.health.append((time.monotonic(), self.stack.health()))
            time.sleep(0.05)

    def health_between(self, start: float, end: float) -> Counter:
        return Counter(status for t, status in self.health if start <= t <= end)


def redis_restart(stack: Stack, load: Load) -> dict:
    stack.stop_redis()
    t0 = time.monotonic()  # once redis-server has exited
    time.sleep(REDIS_DOWN_S)
    down = load.health_between(t0, time.monotonic())
    stack.start_redis()
    stack.wait_healthy()
    return {
        "down_s": REDIS_DOWN_S,
        "health_while_down": dict(down),
        "recovered_s": time.monotonic() - t0 - REDIS_DOWN_S,
    }


def pending(redis, task_ids: set[str]) -> bool:
    """Some of `task_ids` is still queued or taken and unacknowledged."""
    queued = {
        json.loads(m)["headers"]["id"] for queue in queues.queue_names("english") for m in redis.lrange(queue, 0, -1)
    }
    return bool(task_ids & (queued | set(transport.held_task_ids(redis).values())))


def redelivered_or_finished(orphans: dict[bytes, str], held: dict[bytes, str]) -> bool:
    """None of the orphans' delivery tags is still recorded (each back on its queue), or one of their tasks is held
    by nobody any more (run and acknowledged)."""
    return not set(orphans) & set(held) or bool(set(orphans.values()) - set(held.values()))


def worker_kill(stack: Stack, load: Load) -> dict:
    from redis import Redis

    redis, client, kills, batch_id = Redis.from_url(stack.redis_url), Client(stack.frontend, trace=False), [], None
    states = [f"batch state {i}: " + "my card was charged twice " * (5 + i % 7) for i in range(BATCH_STATES)]
    batch_body = json.dumps({"states": states, "questions": REQUESTS[1]["questions"]}).encode()

    def batch_done() -> int:
        return json.loads(client.request("GET", f"/v1/batches/{batch_id}")[2])["done"]

    for n, target in enumerate(KILL_TARGETS, start=1):
        # a batch runs only while no sync request or job waits (laya_common.broker.queues): the callers pause for it
        with load.paused() if target == "batch" else contextlib.nullcontext():
            if target == "batch":
                status, _, body = client.request("POST", "/v1/batches", batch_body)
                assert status == 202, body
                batch_id = json.loads(body)["id"]
                wait_until(lambda: 0 < batch_done() < BATCH_STATES, 120, "the batch to be under way")
            worker, done_at_kill = next(w for w in stack.workers if w.poll() is None), None
            for _ in range(KILL_TRIES):  # until the kill finds a task in hand (between two, it is retried)
                wait_until(
                    lambda t=target, b=batch_id: any(
                        (i == b) == (t == "batch") for i in transport.held_task_ids(redis).values()
                    ),
                    60,
                    f"the worker to hold a {target}",
                )
                done_at_kill = batch_done() if target == "batch" else None
                stop(worker, signal.SIGKILL)
                orphans = transport.held_task_ids(redis)  # nobody acknowledges anything now: the dead worker's
                if any((i == batch_id) == (target == "batch") for i in orphans.values()):
                    break
                worker = stack.start_worker()
                stack.wait_ready(worker)
            t0 = time.monotonic()
            fresh = stack.start_worker()
            stack.wait_ready(fresh)
            warm = time.monotonic()
            # redelivered: back on the queue (same delivery tag); finished: run and acknowledged
            wait_until(
                lambda o=orphans: redelivered_or_finished(o, transport.held_task_ids(redis)),
                120,
                "the killed worker's task to be redelivered",
                interval_s=TIMING_STEP_S,
            )
            redelivered = time.monotonic()
            wait_until(
                lambda o=orphans: not pending(redis, set(o.values())),
                300,
                "the killed worker's task to finish",
                TIMING_STEP_S,
            )
            kills.append(
                {
                    "kill": n,
                    "held": target,
                    "batch_done_at_kill": done_at_kill,
                    "fresh_worker_warm_after_kill_s": warm - t0,
                    "redelivered_after_warm_s": redelivered - warm,
                    "finished_after_warm_s": time.monotonic() - warm,
                }
            )
    batch = wait_until(
        lambda: (b := json.loads(client.request("GET", f"/v1/batches/{batch_id}")[2]))["status"] == "done" and b,
        300,
        "the batch to finish",
    )
    alone = [answer_alone(client, {"state": s, "questions": REQUESTS[1]["questions"]}) for s in states]
    return {
        "kills": kills,
        "batch": {
            "total": batch["total"],
            "done": batch["done"],
            "results": len(batch["results"]),
            "in_order_each_once": all(same(r, a) for r, a in zip(batch["results"], alone, strict=True)),
        },
    }


def api_restart(stack: Stack, load: Load) -> dict:
    accepted_before = list(load.accepted)
    t0 = time.monotonic()
    stop(stack.api)
    stack.start_api(LAYA_SYNC_TIMEOUT_S=str(SYNC_TIMEOUT_S))  # callers are refused meanwhile
    stack.wait_healthy()
    client = Client(stack.frontend, trace=False)
    fetchable = sum(client.request("GET", f"/v1/jobs/{job_id}")[0] == 200 for job_id, _ in accepted_before)
    return {"restarted_in_s": time.monotonic() - t0, "jobs_before": len(accepted_before), "fetchable_after": fetchable}


def executor_failure(stack: Stack, load: Load) -> dict:
    kind = os.environ.get("LAYA_FAULT", "raise")
    for worker in stack.workers:
        stop(worker)
    failing = stack.start_worker(LAYA_EXECUTOR="recipe.faulty_executor:make", LAYA_FAULT=kind)
    # it may fail on the first request the load has queued as soon as it announces itself: no wait for "ready"
    wait_until(failed_record(stack), 120, "the executor to fail", TIMING_STEP_S)
    failed_at = time.monotonic()
    wait_until(lambda: stack.health() == 503, 10, "/health to answer 503", TIMING_STEP_S)
    unhealthy_after = time.monotonic() - failed_at
    wait_until(lambda: failing.poll() is not None, 60, "the failed worker to exit")
    stack.wait_ready(stack.start_worker())
    return {
        "kind": "cuda" if kind == "cuda" else "injected",
        "failing_worker_status": failing.returncode,
        "health_503_within_s": unhealthy_after,
        "healthy_again_after_s": time.monotonic() - failed_at,
        "sync_500s": sum(s["status"] == 500 for s in load.sync),
    }


def failed_record(stack: Stack):
    from redis import Redis

    redis = Redis.from_url(stack.redis_url)
    return lambda: any(w["state"] == "failed" for w in contract.read_workers(redis))


def tampered_checkpoint(stack: Stack, load: Load) -> dict:
    """A worker given the checkpoint with one byte changed in one artifact must refuse to start, naming it.

    Only the cuda executor has recorded hashes to compare with (the bundle's manifest); the reference
    executor has none, so this fault is for LAYA_EXECUTOR=cuda with LAYA_CUDA_BUNDLE set.
    """
    tampered = stack.logs / "tampered-checkpoint"
    shutil.rmtree(tampered, ignore_errors=True)
    for path in stack.checkpoint.rglob("*"):  # links to every file but the one changed
        target = tampered / path.relative_to(stack.checkpoint)
        if path.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        elif path.relative_to(stack.checkpoint).as_posix() != TAMPERED:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(path.resolve())
    data = bytearray((stack.checkpoint / TAMPERED).read_bytes())
    data[len(data) // 2] ^= 0x01
    (tampered / TAMPERED).write_bytes(bytes(data))
    worker = stack.start_worker(LAYA_CHECKPOINT=str(tampered))

    def settled() -> str | None:
        if worker.poll() is not None:
            return "exited"
        return "served" if any(w.get("pid") == worker.pid for w in stack.ready_workers()) else None

    outcome = wait_until(settled, START_TIMEOUT_S, "the worker on the tampered checkpoint to exit or serve")
    stop(worker)
    log = "\n".join(p.read_text(errors="replace") for p in stack.logs.glob("*-worker.log"))
    return {
        "file": TAMPERED,
        "outcome": outcome,
        "worker_status": worker.returncode,
        "refused": outcome == "exited" and worker.returncode != 0,
        "named": TAMPERED in log,
    }


RUN = {
    "redis-restart": redis_restart,
    "worker-kill": worker_kill,
    "api-restart": api_restart,
    "executor-failure": executor_failure,
    "tampered-checkpoint": tampered_checkpoint,
}


def answer_alone(client: Client, payload: dict) -> dict:
    status, _, body = client.request("POST", "/v1/systemone", json.dumps(payload).encode())
    assert status == 200, body
    return json.loads(body)


PACKED_ATOL = 2e-4  # rows packed into one forward pass reduce in another order (tests/service/helpers.py)


def same(got: object, want: object) -> bool:
    if isinstance(want, dict):
        return isinstance(got, dict) and list(got) == list(want) and all(same(got[k], want[k]) for k in want)
    if isinstance(want, float) or isinstance(got, float):
        return abs(got - want) <= PACKED_ATOL
    return got == want


def settle(stack: Stack, load: Load, expected: list[bytes]) -> dict:
    """Wait for every accepted job (and every sync call that timed out) to be answered; count the outcome."""
    from redis import Redis

    redis = Redis.from_url(stack.redis_url)
    jobs = load.accepted + [(s["id"], s["request"]) for s in load.sync if s["status"] == 504]
    client = Client(stack.frontend, trace=False)

    def outcomes() -> list[dict] | None:
        found = [json.loads(client.request("GET", f"/v1/jobs/{job_id}")[2]) for job_id, _ in jobs]
        return found if all(f.get("status") in ("done", "failed") for f in found) else None

    try:
        found = wait_until(outcomes, SETTLE_S, "every accepted job to be answered", interval_s=1)
    except TimeoutError:
        found = [json.loads(client.request("GET", f"/v1/jobs/{job_id}")[2]) for job_id, _ in jobs]
    done = [(f, i) for f, (_, i) in zip(found, jobs, strict=True) if f.get("status") in ("done", "failed")]
    return {
        "accepted": len(jobs),
        "answered": len(done),
        "lost": len(jobs) - len(done),
        "failed": sum(f["status"] == "failed" for f, _ in done),
        "wrong": sum(f["status"] == "done" and f["result"] != json.loads(expected[i]) for f, i in done),
        "stored_twice": sum(redis.llen(contract.result_key(job_id)) > 1 for job_id, _ in jobs),
    }


def main(*, checkpoint: Path, output: Path, faults: tuple[str, ...] = FAULTS) -> int:
    output.mkdir(parents=True, exist_ok=True)
    report: dict = {
        "command": sys.argv,
        "faults": {},
        "versions": versions(("laya-service", "celery", "kombu", "redis")),
    }
    with Stack(
        checkpoint, output / "logs", heartbeat_ttl_s=HEARTBEAT_TTL_S, worker_env={"LAYA_BATCH_CHUNK": "8"}
    ) as stack:
        stack.start_redis()
        stack.start_worker()
        stack.start_api(LAYA_SYNC_TIMEOUT_S=str(SYNC_TIMEOUT_S))
        stack.wait_healthy()
        expected = answers_alone(stack.frontend)
        with Load(stack, expected) as load:
            time.sleep(1)
            for name in faults:
                report["faults"][name] = RUN[name](stack, load)
                print(f"faults: {name}: {report['faults'][name]}")
            time.sleep(1)
        report["jobs"] = settle(stack, load, expected)
        report["sync"] = {
            "calls": len(load.sync),
            "statuses": dict(Counter(str(s["status"]) for s in load.sync)),
            "wrong": sum(s.get("equal") is False for s in load.sync),
            "longest_s": max((s.get("seconds", 0) for s in load.sync), default=0),
        }
        report["submit_statuses"] = dict(load.submit_statuses)
    j, s = report["jobs"], report["sync"]
    tampered = report["faults"].get("tampered-checkpoint", {"refused": True, "named": True})
    passed = (
        j["lost"] == 0
        and j["wrong"] == 0
        and s["wrong"] == 0
        and set(s["statuses"]) <= {"200", "500", "503", "504", "refused"}
        and s["longest_s"] < SYNC_TIMEOUT_S + 30
        and tampered["refused"]
        and tampered["named"]
    )
    report["passed"] = passed
    (output / "faults.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"faults: jobs {j}; sync {s}; {'passed' if passed else 'FAILED'}; in {output / 'faults.json'}")
    return 0 if passed else 1


def cli(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_stack_arguments(p, "faults.json")
    p.add_argument("--faults", default=",".join(FAULTS), help="comma-separated faults, in order (default: %(default)s)")
    args = p.parse_args(argv)
    return main(checkpoint=args.checkpoint, output=args.output, faults=tuple(args.faults.split(",")))


if __name__ == "__main__":
    sys.exit(cli())
