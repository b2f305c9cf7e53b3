"""Load: N concurrent sync clients for a bounded time against one worker, then two workers on one queue.

Starts its own service (recipe/stack.py). Each client sends POST /v1/systemone in a closed loop over a
fixed set of requests. Passes when no request fails, every answer is byte-equal to the same request
answered alone (sent one at a time before the load), and no worker held more requests in its engine at once
than its executor holds passes (by its own stamps of starting and finishing each one). Per N: p50/p99 latency,
throughput, and the executor's busy share (the executor time the worker reports per answer, x-executor-time:
on the GPU for the cuda executor, summed over the level's wall time and its workers), and the cores the clients'
own process used (`client_cpu_cores`: its threads share one GIL, so near 1 the clients may set the pace). The
summary's `bar` is
issue 31's: the smaller of 1,000/s and 80% of what the executor does alone (0.8 / its median time per request
at the fewest clients). Writes load.json into --output, and every sample (each request's wall, engine and
executor ms) into samples.json; per level also the latency of each request sent (`latency_by_request`, by its
index in `requests`).

    python recipe/load.py --checkpoint DIR --output /tmp/load-1 [--clients 1,8,32,128] [--seconds 10] [--inputs 1x77]

On a machine without a GPU, LAYA_EXECUTOR=recipe.paced_executor:make runs each pass beside the host as a GPU
would, at least LAYA_PACE_MS long: how the host path keeps up with a GPU's pass time.
"""

from __future__ import annotations

import argparse
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
    frontend: str, n_clients: int, seconds: float, expected: list[bytes], requests: list[dict] = REQUESTS
) -> dict:
    """`n_clients` closed-loop callers for `seconds`, each sending `requests` in turn; every outcome kept."""
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
    began, cpu_began = time.monotonic(), time.process_time()
    start.wait()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - began
    client_cpu = time.process_time() - cpu_began
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
        "job_ids": [o["job_id"] for o in ok],
        "samples": [{"ms": round(o["ms"], 3), **{k: o[k] for k in ("engine_ms", "executor_ms")}} for o in ok],
    }


def worker_spans(redis_url: str, job_ids: list[str]) -> dict[str, list[tuple[float, float]]]:
    """Per worker, in order, when it started each request's engine work and when it finished it (its own stamps)."""
    from redis import Redis

    redis = Redis.from_url(redis_url)

    def traces() -> list[dict] | None:
        pipe = redis.pipeline()
        for job_id in job_ids:
            pipe.hgetall(contract.trace_key(job_id))
        got = pipe.execute()
        return got if all(b"result_sent" in t for t in got) else None

    spans: dict[str, list[tuple[float, float]]] = {}
    for t in wait_until(traces, 30, "every task's trace"):
        spans.setdefault(t[b"worker"].decode(), []).append((float(t[b"engine_started"]), float(t[b"engine_finished"])))
    return {worker: sorted(s) for worker, s in spans.items()}


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
                level = run_level(stack.frontend, n, seconds, expected, requests)
                level["most_at_once"] = most_at_once(worker_spans(stack.redis_url, level.pop("job_ids")))
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
