"""Load: N concurrent sync clients for a bounded time against one worker, then two workers on one queue.

Starts its own service (recipe/stack.py). Each client sends POST /v1/systemone in a closed loop over a
fixed set of requests. Passes when no request fails, every answer is byte-equal to the same request
answered alone (sent one at a time before the load), and no worker held more requests in its engine at once
than its executor holds passes (by its own stamps of starting and finishing each one). Per N: p50/p99 latency,
throughput, and the executor's busy share (the executor time the worker reports per answer, x-executor-time:
on the GPU for the cuda executor, summed over the level's wall time and its workers), and the cores the clients'
own process used (`client_cpu_cores`: its threads share one GIL, so near 1 the clients may set the pace), the
cores each of the stack's processes used (`process_cores`: the API's, Redis, each worker: near 1 a worker's host
work sets the pace), and where each worker's time went between its own stamps (`worker_ms_per_request`). The
summary's `bar` is issue 31's: the smaller of 1,000/s and 80% of what the executor does alone (0.8 / its median
time per request at the fewest clients). Writes load.json into --output, and every sample (each request's wall,
engine and executor ms) into samples.json; per level also the latency of each request sent (`latency_by_request`,
by its index in `requests`).

    python -m recipe.load --checkpoint DIR --output /tmp/load-1 [--clients 1,8,32,128] [--seconds 10] [--inputs 1x77]

On a machine without a GPU, LAYA_EXECUTOR=recipe.paced_executor:make runs each pass beside the host as a GPU
would, at least LAYA_PACE_MS long: how the host path keeps up with a GPU's pass time.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import threading
import time
from pathlib import Path

from laya_common import contract
from recipe.bench_inputs import INPUTS
from recipe.celery_floor import percentiles
from recipe.client import Client
from recipe.provenance import versions
from recipe.stack import Stack, add_stack_arguments, wait_until

QUESTIONS = {
    "refund": {"type": "noul", "instructions": "Does the customer ask for a refund?"},
    "topic": {"type": "choice", "instructions": "What is the topic?", "criteria": ["billing", "delivery", "login"]},
    "anger": {"type": "score", "instructions": "How angry?", "criteria": ["calm", "annoyed", "furious"]},
}
REQUESTS = [
    {"model": "english", "state": "Please refund the duplicate charge.", "questions": {"refund": QUESTIONS["refund"]}},
    {"model": "english", "state": {"text": "My parcel is late again", "order": 7}, "questions": QUESTIONS},
    {
        "model": "english",
        "state": ["hello", "my card was charged twice", "café Zürich 🙂"],
        "questions": {"topic": QUESTIONS["topic"], "refund": QUESTIONS["refund"]},
    },
    {"model": "english", "state": "word " * 300, "questions": {"anger": QUESTIONS["anger"]}},
]
CLIENTS, SECONDS, WORKERS = (1, 8, 32, 128), 10.0, (1, 2)


def answers_alone(frontend: str, requests: list[dict] = REQUESTS) -> list[bytes]:
    client = Client(frontend, trace=False)
    bodies = []
    for payload in requests:
        status, _, body = client.request("POST", "/v1/systemone", json.dumps(payload).encode())
        if status != 200:
            raise RuntimeError(f"a lone request answered {status}: {body[:300]!r}")
        bodies.append(body)
    return bodies


def run_level(
    frontend: str,
    n_clients: int,
    seconds: float,
    expected: list[bytes],
    requests: list[dict] = REQUESTS,
    processes: dict[str, list[int]] | None = None,
) -> dict:
    """`n_clients` closed-loop callers for `seconds`, each sending `requests` in turn; every outcome kept, and the
    cores each role of `processes` (the stack's, by role) used meanwhile."""
    outcomes: list[list[dict]] = [[] for _ in range(n_clients)]
    bodies = [json.dumps(p).encode() for p in requests]
    start = threading.Barrier(n_clients + 1)
    deadline: list[float] = []

    def caller(k: int) -> None:
        client, j = Client(frontend), k
        start.wait()
        while time.monotonic() < deadline[0]:
            i = j % len(bodies)
            t0 = time.perf_counter()
            try:
                status, headers, body = client.request("POST", "/v1/systemone", bodies[i])
            except OSError as e:
                outcomes[k].append({"request": i, "error": f"{type(e).__name__}: {e}"})
                continue
            outcomes[k].append(
                {
                    "request": i,
                    "status": status,
                    "ms": (time.perf_counter() - t0) * 1000,
                    "engine_ms": float(headers.get("x-inference-time", 0.0)),
                    "executor_ms": float(headers.get("x-executor-time", 0.0)),
                    "equal": body == expected[i],
                    "job_id": headers.get("x-job-id"),
                }
            )
            j += 1
        client.close()

    threads = [threading.Thread(target=caller, args=(k,)) for k in range(n_clients)]
    for t in threads:
        t.start()
    deadline.append(time.monotonic() + seconds)
    processes = processes or {}
    began, cpu_began = time.monotonic(), time.process_time()
    roles_began = {role: cpu_seconds(pids) for role, pids in processes.items()}
    start.wait()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - began
    client_cpu = time.process_time() - cpu_began
    roles_cpu = {role: cpu_seconds(pids) - roles_began[role] for role, pids in processes.items()}
    rows = [o for per_client in outcomes for o in per_client]
    ok = [o for o in rows if o.get("status") == 200]
    return {
        "clients": n_clients,
        "seconds": elapsed,
        "requests": len(rows),
        "answered": len(ok),
        "failed": [o for o in rows if o.get("status") != 200][:20],
        "n_failed": len(rows) - len(ok),
        "not_byte_equal": sum(not o["equal"] for o in ok),
        "throughput_rps": len(ok) / elapsed,
        "latency": percentiles([o["ms"] for o in ok]) if ok else None,
        "latency_by_request": {
            str(i): percentiles(ms) for i in range(len(requests)) if (ms := [o["ms"] for o in ok if o["request"] == i])
        },
        "engine_ms_per_request": sum(o["engine_ms"] for o in ok) / len(ok) if ok else None,
        "executor_ms_p50": percentiles([o["executor_ms"] for o in ok])["p50_ms"] if ok else None,
        "executor_busy_share": sum(o["executor_ms"] for o in ok) / 1000 / elapsed,  # of one worker; divided below
        # cores the callers' process used: near 1, its threads' HTTP work under one GIL may be what sets the pace
        "client_cpu_cores": client_cpu / elapsed,
        # near 1 for a worker: its one thread's host work, not the GPU, sets the pace
        "process_cores": {role: round(cpu / elapsed, 3) for role, cpu in roles_cpu.items()},
        "job_ids": [o["job_id"] for o in ok],
        "samples": [{"ms": round(o["ms"], 3), **{k: o[k] for k in ("engine_ms", "executor_ms")}} for o in ok],
    }


WORKER_STAGES = ("worker_received", "task_started", "engine_started", "launched", "engine_finished", "result_sent")


def worker_traces(redis_url: str, job_ids: list[str]) -> list[dict[str, str | float]]:
    """Each request's trace as its worker stamped it: its worker's name and the time of each stage it reached."""
    from redis import Redis

    redis = Redis.from_url(redis_url)

    def traces() -> list[dict] | None:
        pipe = redis.pipeline()
        for job_id in job_ids:
            pipe.hgetall(contract.trace_key(job_id))
        got = pipe.execute()
        return got if all(b"result_sent" in t for t in got) else None

    return [
        {"worker": t[b"worker"].decode(), **{s: float(t[s.encode()]) for s in WORKER_STAGES if s.encode() in t}}
        for t in wait_until(traces, 30, "every task's trace")
    ]


def worker_spans(redis_url: str, job_ids: list[str]) -> dict[str, list[tuple[float, float]]]:
    """Per worker, in order, when it started each request's engine work and when it finished it (its own stamps)."""
    return spans_of(worker_traces(redis_url, job_ids))


def spans_of(traces: list[dict]) -> dict[str, list[tuple[float, float]]]:
    """`worker_spans` of traces read already."""
    spans: dict[str, list[tuple[float, float]]] = {}
    for t in traces:
        spans.setdefault(t["worker"], []).append((t["engine_started"], t["engine_finished"]))
    return {worker: sorted(s) for worker, s in spans.items()}


def worker_timeline(traces: list[dict]) -> dict[str, dict[str, float]]:
    """Per worker, where its time went: every stage its requests reached, in the order it stamped them, and the
    time from each stamp to the next (whichever request that was) summed per pair of stages, in ms per request.
    Under a steady load the pairs add up to the worker's whole time. Back to back with a message taken ahead
    (worker.service.back_to_back): "worker_received > engine_finished" is the wait for the oldest pass and its
    decoding, "result_sent > task_started" sending its answer with the next take and beginning the message taken
    before, "engine_started > launched" preparing and launching it, "launched > worker_received" reading the round
    trip's reply (the message it took)."""
    per_worker: dict[str, list[tuple[float, str]]] = {}
    for t in traces:
        per_worker.setdefault(t["worker"], []).extend((t[s], s) for s in WORKER_STAGES if s in t)
    timeline = {}
    for worker, stamps in per_worker.items():
        stamps.sort()
        spent: dict[str, float] = {}
        for (t0, a), (t1, b) in itertools.pairwise(stamps):
            spent[f"{a} > {b}"] = spent.get(f"{a} > {b}", 0.0) + (t1 - t0)
        n = sum(s == "result_sent" for _, s in stamps)
        timeline[worker] = {pair: round(seconds * 1000 / n, 4) for pair, seconds in sorted(spent.items())}
    return timeline


def most_at_once(spans: dict[str, list[tuple[float, float]]]) -> dict[str, int]:
    """Per worker: the most requests it had between the start of their engine work and their answer at once."""
    most = {}
    for worker, s in spans.items():
        events = sorted([(start, 1) for start, _ in s] + [(end, -1) for _, end in s])  # an end before a start
        held = peak = 0
        for _, change in events:
            held += change
            peak = max(peak, held)
        most[worker] = peak
    return most


def descendants(pid: int) -> list[int]:
    """`pid` and every process under it (gunicorn's API processes under its arbiter), from /proc."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # it ended while being read
            continue
        parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        found.append(todo.pop())
        todo.extend(parents.get(found[-1], []))
    return found


def cpu_seconds(pids: list[int]) -> float:
    """User and system time the processes used so far."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (the 14th and 15th fields, in clock ticks)
    return total / os.sysconf("SC_CLK_TCK")


def stack_processes(stack: Stack) -> dict[str, list[int]]:
    """The stack's processes by role: the API's arbiter and its processes, each worker, Redis."""
    roles = {"api": descendants(stack.api.pid), "redis": [stack.redis_process.pid]}
    for k, worker in enumerate(stack.workers):
        roles[f"worker {k + 1}"] = descendants(worker.pid)
    return roles


def outcome(level: dict) -> str:
    """A level's failures, latency and overlaps, for its progress line."""
    lat = level["latency"] or {}
    return (
        f"{level['n_failed']} failed, {level['not_byte_equal']} not byte-equal, p50 {lat.get('p50_ms', 0):.1f} ms, "
        f"p99 {lat.get('p99_ms', 0):.1f} ms, at most {max(level['most_at_once'].values(), default=0)} in an engine"
    )


def bar(runs: list[dict]) -> dict | None:
    """Issue 31's throughput bar for one worker: the smaller of 1,000/s and 80% of what its executor does alone,
    0.8 / the median executor time per request at the fewest clients (None without an executor time)."""
    alone = min((r for r in runs if r["workers"] == 1), key=lambda r: r["clients"], default=None)
    if alone is None or not alone["executor_ms_p50"]:
        return None
    return {
        "executor_ms_alone": alone["executor_ms_p50"],
        "requests_per_s": min(1000.0, 0.8 * 1000 / alone["executor_ms_p50"]),
    }


def save(output: Path, report: dict, samples: list) -> None:
    (output / "load.json").write_text(json.dumps({**report, "load_average": os.getloadavg()}, indent=2) + "\n")
    (output / "samples.json").write_text(json.dumps(samples) + "\n")


def main(
    *,
    checkpoint: Path,
    output: Path,
    clients: tuple[int, ...] = CLIENTS,
    seconds: float = SECONDS,
    workers: tuple[int, ...] = WORKERS,
    requests: list[dict] = REQUESTS,
) -> int:
    output.mkdir(parents=True, exist_ok=True)
    report = {
        "command": sys.argv,
        "requests": requests,
        "seconds_per_level": seconds,
        "runs": [],
        "cpus": os.cpu_count(),
        "versions": versions(("laya-service", "celery", "kombu", "redis", "gunicorn")),
    }
    samples: list[dict] = []  # per level: its workers, clients and every answered request's wall, engine, executor ms
    with Stack(checkpoint, output / "logs") as stack:
        stack.start()
        expected = answers_alone(stack.frontend, requests)
        for n_workers in workers:
            while len(stack.workers) < n_workers:
                stack.start_worker()
            wait_until(lambda n=n_workers: len(stack.ready_workers()) >= n, 600, f"{n_workers} ready workers")
            holds = {w["node"]: w["info"]["limits"].get("passes_in_flight", 1) for w in stack.ready_workers()}
            for n in clients:
                level = run_level(stack.frontend, n, seconds, expected, requests, stack_processes(stack))
                traces = worker_traces(stack.redis_url, level.pop("job_ids"))
                level["most_at_once"] = most_at_once(spans_of(traces))
                level["worker_ms_per_request"] = worker_timeline(traces)
                level["passes_in_flight"] = holds
                level["workers"] = n_workers
                level["executor_busy_share"] /= n_workers
                samples.append({"workers": n_workers, "clients": n, "samples": level.pop("samples")})
                report["runs"].append(level)
                save(output, report, samples)  # a run cut short still leaves its figures
                print(
                    f"load: {n_workers} worker(s), {n:3} clients: {level['answered']} answered, "
                    f"{level['throughput_rps']:.1f}/s, executor busy {level['executor_busy_share']:.0%}, "
                    f"client process {level['client_cpu_cores']:.2f} cores, "
                    f"{', '.join(f'{role} {c:.2f}' for role, c in level['process_cores'].items())} cores, "
                    f"{outcome(level)}"
                )
        report["bar"] = bar(report["runs"])
    save(output, report, samples)
    passed = all(
        r["n_failed"] == 0
        and r["not_byte_equal"] == 0
        and all(n <= r["passes_in_flight"].get(worker, 1) for worker, n in r["most_at_once"].items())
        for r in report["runs"]
    )
    print(f"load: {'passed' if passed else 'FAILED'}; every figure in {output / 'load.json'}")
    return 0 if passed else 1


def cli(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_stack_arguments(p, "load.json")
    p.add_argument(
        "--clients",
        default=",".join(map(str, CLIENTS)),
        help="comma-separated numbers of concurrent clients (default: %(default)s)",
    )
    p.add_argument("--seconds", type=float, default=SECONDS, help="time per level (default: %(default)s)")
    p.add_argument(
        "--workers",
        default=",".join(map(str, WORKERS)),
        help="comma-separated numbers of workers on the queue, in order (default: %(default)s)",
    )
    p.add_argument(
        "--inputs",
        default="",
        help="comma-separated benchmark inputs to send instead of this recipe's four requests, by the start of "
        f"their names ({', '.join(INPUTS)}): 1x77 is issue 31's load",
    )
    args = p.parse_args(argv)
    names = [n.strip() for n in args.inputs.split(",") if n.strip()]
    chosen = [key for name in names for key in INPUTS if key.startswith(name)]
    if len(chosen) != len(names):
        p.error(f"--inputs {args.inputs!r}: each must start exactly one of {', '.join(INPUTS)}")
    return main(
        requests=[INPUTS[key] for key in chosen] or REQUESTS,
        checkpoint=args.checkpoint,
        output=args.output,
        clients=tuple(int(n) for n in args.clients.split(",")),
        seconds=args.seconds,
        workers=tuple(int(n) for n in args.workers.split(",")),
    )


if __name__ == "__main__":
    sys.exit(cli())
