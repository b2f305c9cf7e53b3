"""Scale out on one host: one worker per GPU, all on one queue; throughput with 1 and 2 workers, then one killed.

    python -m recipe.scale_out --output OUT [--checkpoint DIR --bundle DIR] [--workers 1,2] [--clients 16]
                               [--seconds 20] [--batch-states 64] [--api-processes 1]

Starts a private service (recipe/stack.py: Redis, the workers, one API of --api-processes gunicorn processes).
With a bundle (--bundle, default $LAYA_CUDA_BUNDLE), worker i runs the cuda executor on GPU i
(CUDA_VISIBLE_DEVICES=i). Without one, each worker runs the reference executor on CPU with one thread (a core
stands in for a GPU), on --checkpoint or else a tiny checkpoint synthesized into OUT/checkpoint.

For each number of workers, in order (a level adds workers to those already warm), a bounded closed-loop
load (recipe/load.py's run_level): --clients callers send the five benchmark inputs (recipe/bench_inputs.py)
in turn to POST /v1/systemone for --seconds, while one more caller scores a batch of --batch-states states
(the benchmark's batch questions) through /v1/batches, then the next, until the time is up. Per level:
requests/s and p50/p99 latency of the sync calls, states/s of the batches, the share of requests each
worker ran, how many requests a worker took before it had answered the one before (its own stamps: must
be none), and how many answers differ from the same request answered alone (must be none).

Then, with two workers or more, one worker is SIGKILLed (the whole process) while every worker holds a
task, under recipe/faults.py's load of async jobs and sync calls: no fresh worker is started, so the task
the dead one held is redelivered to and run by another (worker.service.redelivery), and every job accepted is
answered, once, with the right answer.

Writes OUT/scale_out.json (every figure, the speed-up over one worker, the workers' own records,
provenance) and the processes' logs in OUT/logs. Exits 0 when every check passed.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from laya_common.broker import transport
from recipe import faults
from recipe.batch_throughput import run_batch
from recipe.bench_inputs import BATCH_QUESTIONS, INPUTS, batch_states
from recipe.benchmark import provenance
from recipe.celery_floor import percentiles
from recipe.load import answers_alone, most_at_once, outcome, run_level, worker_spans
from recipe.provenance import versions
from recipe.stack import Stack, stop, wait_until

WORKERS, CLIENTS, SECONDS, BATCH_STATES = (1, 2), 16, 20.0, 64
SPEEDUP_TARGET = 1.9  # requests/s of 2 GPUs over 1, under saturation (issue 12)


def worker_env(device: int, bundle: Path | None) -> dict[str, str]:
    """The settings of the worker on `device`: its own GPU with a bundle, else one CPU thread."""
    if bundle is None:
        return {"LAYA_EXECUTOR": "reference", "LAYA_DEVICE": "cpu", "OMP_NUM_THREADS": "1"}
    return {"CUDA_VISIBLE_DEVICES": str(device), "LAYA_EXECUTOR": "cuda", "LAYA_CUDA_BUNDLE": str(bundle)}


class Workers:
    """The stack's workers, one per device index."""

    def __init__(self, stack: Stack, bundle: Path | None) -> None:
        self.stack, self.bundle = stack, bundle
        self.devices: dict[int, int] = {}  # pid -> device index

    def live(self) -> list[subprocess.Popen]:
        return [w for w in self.stack.workers if w.poll() is None]

    def start(self, device: int) -> subprocess.Popen:
        worker = self.stack.start_worker(**worker_env(device, self.bundle))
        self.devices[worker.pid] = device
        return worker

    def grow_to(self, n: int) -> None:
        """Workers on devices 0 to n-1, each warm (they warm up side by side)."""
        taken = {self.devices[w.pid] for w in self.live()}
        for worker in [self.start(device) for device in range(n) if device not in taken]:
            self.stack.wait_ready(worker)

    def device_of(self, node: str) -> int | None:
        """The device of the worker whose records name it `node` (host:pid)."""
        return self.devices.get(int(node.rsplit(":", 1)[1]))


class BatchLoop:
    """One caller scoring a batch of `states`, then the next, until stopped (the batch in hand is finished)."""

    def __init__(self, frontend: str, states: list[str]) -> None:
        self.frontend, self.states = frontend, states
        self.batches: list[dict] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._began = 0.0

    def __enter__(self) -> BatchLoop:
        self._began = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                seconds, results = run_batch(self.frontend, self.states)
            except OSError as e:
                self.batches.append({"error": f"{type(e).__name__}: {e}"})
                return
            errors = [r for r in results if "answers" not in r]
            answered = len(results) - len(errors)
            self.batches.append(
                {"seconds": seconds, "answered": answered, "errors": errors[:3], "ended": time.monotonic()}
            )

    def summary(self) -> dict:
        done = [b for b in self.batches if b.get("answered") == len(self.states)]
        elapsed = max(b["ended"] for b in done) - self._began if done else None
        states = len(done) * len(self.states)
        return {
            "batches": len(self.batches),
            "n_failed": len(self.batches) - len(done),
            "failed": [b for b in self.batches if b not in done][:5],
            "states_answered": states,
            "states_per_s": states / elapsed if done else 0.0,
            "latency": percentiles([b["seconds"] * 1000 for b in done]) if done else None,
        }


def measure(
    stack: Stack, workers: Workers, *, clients: int, seconds: float, expected: list[bytes], states: list[str]
) -> dict:
    """One level: the sync callers and the batch caller for `seconds`, and who served what."""
    with BatchLoop(stack.frontend, states) as batches:
        level = run_level(stack.frontend, clients, seconds, expected, requests=list(INPUTS.values()))
    spans, batch = worker_spans(stack.redis_url, level.pop("job_ids")), batches.summary()
    for key in ("samples", "executor_busy_share"):  # recipe/load.py's own: every sample, and one worker's share
        level.pop(key)
    served = sum(len(s) for s in spans.values())
    return {
        "workers": len(workers.live()),
        "requests_per_s": level.pop("throughput_rps"),
        "states_per_s": batch["states_per_s"],
        **level,
        "served": [
            {"worker": node, "device": workers.device_of(node), "requests": len(s), "share": len(s) / served}
            for node, s in sorted(spans.items())
        ],
        "most_at_once": most_at_once(spans),
        "passes_in_flight": {w["node"]: w["info"]["limits"].get("passes_in_flight", 1) for w in stack.ready_workers()},
        "batch": batch,
    }


def kill_one(stack: Stack, workers: Workers) -> dict:
    """SIGKILL the last worker started while every worker holds a task; another runs what it held."""
    from redis import Redis

    redis = Redis.from_url(stack.redis_url)
    expected = answers_alone(stack.frontend)  # faults.Load sends recipe/load.py's requests
    killed: list[dict] = []  # every worker killed; a kill that found it between two tasks is tried again
    with faults.Load(stack, expected) as load:
        for _ in range(faults.KILL_TRIES):
            victim = workers.live()[-1]
            # what the survivors can hold: a message per pass in flight, one taken ahead (worker.service.back_to_back)
            survivors = [w for w in stack.ready_workers() if w["pid"] != victim.pid]
            most = sum(w["info"]["limits"].get("passes_in_flight", 1) + 1 for w in survivors)
            wait_until(
                lambda m=most: len(transport.held_task_ids(redis)) > m, 60, "more tasks held than the survivors can"
            )
            stop(victim, signal.SIGKILL)
            orphans = transport.held_task_ids(redis)
            killed.append({"pid": victim.pid, "device": workers.devices[victim.pid], "unacknowledged": len(orphans)})
            # more than the survivors can hold: some are the dead worker's; else it was between two tasks
            if len(orphans) > most:
                break
            stack.wait_ready(workers.start(workers.devices[victim.pid]))
        else:
            raise RuntimeError(f"no kill in {faults.KILL_TRIES} found the worker holding a task")
        killed_at = time.monotonic()
        wait_until(
            lambda: not faults.pending(redis, set(orphans.values())),
            faults.SETTLE_S,
            "the dead worker's task to be run by another",
            interval_s=faults.TIMING_STEP_S,
        )
        finished_s = time.monotonic() - killed_at
    return {
        "killed": killed,
        "unacknowledged_at_kill": sorted(orphans.values()),
        "all_finished_after_kill_s": finished_s,
        "jobs": faults.settle(stack, load, expected),
    }


def speedups(levels: list[dict]) -> dict:
    """Requests/s and states/s of each level over the one-worker level's."""
    one = next((lv for lv in levels if lv["workers"] == 1), None)
    if one is None:
        return {}
    return {
        str(lv["workers"]): {
            key: lv[key] / one[key] if one[key] else None for key in ("requests_per_s", "states_per_s")
        }
        for lv in levels
        if lv["workers"] > 1
    }


def passed(report: dict) -> bool:
    levels = all(
        lv["n_failed"] == 0
        and lv["not_byte_equal"] == 0
        and lv["batch"]["n_failed"] == 0
        and lv["batch"]["states_answered"] > 0
        and len(lv["served"]) == lv["workers"]  # every worker served requests
        and all(n <= lv["passes_in_flight"].get(worker, 1) for worker, n in lv["most_at_once"].items())
        for lv in report["levels"]
    )
    jobs = report["kill"]["jobs"] if report["kill"] else None
    kill = jobs is None or (
        jobs["answered"] == jobs["accepted"] > 0 and jobs["lost"] == jobs["wrong"] == jobs["stored_twice"] == 0
    )
    return levels and kill


def gpus() -> list[str]:
    """`nvidia-smi -L`: this host's GPUs (none without nvidia-smi)."""
    try:
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [line for line in listed.splitlines() if line.startswith("GPU ")]


def save(output: Path, report: dict) -> None:
    (output / "scale_out.json").write_text(json.dumps({**report, "load_average": os.getloadavg()}, indent=1) + "\n")


def main(
    *,
    output: Path,
    checkpoint: Path | None = None,
    bundle: Path | None = None,
    workers: tuple[int, ...] = WORKERS,
    clients: int = CLIENTS,
    seconds: float = SECONDS,
    n_states: int = BATCH_STATES,
    api_processes: int = 1,
) -> int:
    output.mkdir(parents=True)
    if checkpoint is None:
        from worker.commands.synthesize import synthesize

        checkpoint = synthesize(output / "checkpoint", size="tiny", seed=0)
    record = provenance(checkpoint, bundle)
    record["versions"].update(versions(("celery", "kombu", "redis", "gunicorn")))
    report: dict = {
        "executor": "reference" if bundle is None else "cuda",
        "clients": clients,
        "api_processes": api_processes,
        "seconds_per_level": seconds,
        "batch": {"states": n_states, "questions": BATCH_QUESTIONS},
        "levels": [],
        "kill": None,
        "provenance": {**record, "gpus": gpus(), "cpus": os.cpu_count()},
    }
    states = batch_states(n_states)
    with Stack(checkpoint, output / "logs", heartbeat_ttl_s=faults.HEARTBEAT_TTL_S) as stack:
        pool = Workers(stack, bundle)
        stack.start_redis()
        pool.grow_to(workers[0])
        stack.start_api(LAYA_API_PROCESSES=str(api_processes))
        stack.wait_healthy()
        expected = answers_alone(stack.frontend, list(INPUTS.values()))
        for n in workers:
            pool.grow_to(n)
            level = measure(stack, pool, clients=clients, seconds=seconds, expected=expected, states=states)
            report["levels"].append(level)
            save(output, report)  # a run cut short still leaves its figures
            print(
                f"scale_out: {n} worker(s): {level['requests_per_s']:.1f} requests/s, "
                f"{level['states_per_s']:.1f} batch states/s, "
                f"shares {[round(s['share'], 3) for s in level['served']]}, {outcome(level)}",
                flush=True,
            )
        report["worker_records"] = stack.ready_workers()
        if len(pool.live()) >= 2:
            report["kill"] = kill_one(stack, pool)
            print(f"scale_out: one worker killed: {report['kill']}", flush=True)
    report["speedup"] = speedups(report["levels"])
    report["speedup_target_requests_per_s"] = SPEEDUP_TARGET
    report["passed"] = passed(report)
    save(output, report)
    print(
        f"scale_out: speed-up {report['speedup']}; {'passed' if report['passed'] else 'FAILED'}; "
        f"every figure in {output / 'scale_out.json'}"
    )
    return 0 if report["passed"] else 1


def cli(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m recipe.scale_out", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--output", type=Path, required=True, help="a directory that does not exist yet")
    p.add_argument(
        "--checkpoint",
        type=Path,
        help="the workers' checkpoint (required with a bundle; default: a tiny one synthesized in OUTPUT)",
    )
    p.add_argument(
        "--bundle",
        type=Path,
        default=os.environ.get("LAYA_CUDA_BUNDLE") or None,
        help="a bundle verified against the checkpoint: worker i runs the cuda executor on GPU i "
        "(default: $LAYA_CUDA_BUNDLE; without one, the reference executor on CPU)",
    )
    p.add_argument(
        "--workers",
        default=",".join(map(str, WORKERS)),
        help="comma-separated increasing numbers of workers, one level each (default: %(default)s)",
    )
    p.add_argument("--clients", type=int, default=CLIENTS, help="concurrent sync callers (default: %(default)s)")
    p.add_argument("--seconds", type=float, default=SECONDS, help="time per level (default: %(default)s)")
    p.add_argument(
        "--batch-states",
        type=int,
        default=BATCH_STATES,
        help="states in each batch of the batch caller (default: %(default)s)",
    )
    p.add_argument(
        "--api-processes",
        type=int,
        default=1,
        help="gunicorn processes of the API, should one fall behind the workers (default: %(default)s)",
    )
    a = p.parse_args(argv)
    if a.output.exists():
        p.error(f"{a.output} exists; give a fresh directory")
    try:
        workers = tuple(int(n) for n in a.workers.split(","))
    except ValueError:
        p.error(f"--workers {a.workers!r}: give numbers such as 1,2")
    if workers[0] < 1 or list(workers) != sorted(set(workers)):
        p.error(f"--workers {a.workers}: increasing numbers, from 1 up (a level adds workers to those already warm)")
    if a.bundle is not None:
        if a.checkpoint is None:
            p.error("--bundle needs --checkpoint: the checkpoint the bundle was verified against")
        if len(gpus()) < workers[-1]:
            p.error(f"--workers {a.workers} needs {workers[-1]} GPUs; nvidia-smi lists {len(gpus())}")
    return main(
        output=a.output,
        checkpoint=a.checkpoint,
        bundle=a.bundle,
        workers=workers,
        clients=a.clients,
        seconds=a.seconds,
        n_states=a.batch_states,
        api_processes=a.api_processes,
    )


if __name__ == "__main__":
    sys.exit(cli())
