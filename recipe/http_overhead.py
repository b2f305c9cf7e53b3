"""What the HTTP sync path adds over engine time, stage by stage, beside the bare Celery floor.

Sends one request to POST /v1/systemone, 20 times to warm up, then --samples times measured, one at a
time over one kept-alive connection; then the same from 8 and 32 concurrent clients (--clients).
Overhead = client wall time - the worker's engine time (x-inference-time). With the API started with
LAYA_TRACE=1 (and --redis-url pointing at its Redis), every sample also carries its stage times,
each stamped (time.time(), one clock on one host) by the process it runs in:

    client_sent, api_received, api_validated, api_ready, api_enqueued, worker_received, task_started,
    engine_started, launched, engine_finished, result_sent, api_woke, api_responded, client_received

The lone client then sends --samples more without asking for a trace ("1 untraced"): storing a trace
costs the traced request nothing, but gunicorn reads the next request on the connection only once that
store has returned, so this series is the overhead with no tracing at all. It alternates, in ROUNDS rounds,
with the bare prefork Celery round trip it is held against (issue 31: no higher at the median), so that both
see the same state of the host: medians taken minutes apart moved by up to 0.8 ms on one H100 host. Each
round's two medians are in the report ("lone_beside_prefork").

Under concurrent clients a request also waits for the worker to finish the others (concurrency 1). Two
figures take that wait out: "beyond queueing" subtracts the part of it during which the worker ran
other tasks (starting a task to sending its answer); "beyond the worker's occupancy" also counts as
the worker's own run time what it spends between two tasks when the next message is waiting already
(acknowledging, taking the next message, Celery's dispatch), per task and in series like the tasks.

In the same run it measures the bare Celery round trip (recipe/celery_floor.py) per worker pool (prefork's
alternated with the lone untraced series, the others after it).
Writes samples.json (every sample, the summaries, the floor, the command line, versions, the
machine's load) into --output.

    python -m recipe.http_overhead --frontend http://127.0.0.1:8080 --redis-url redis://127.0.0.1:6379/0 \\
        --output /tmp/http-overhead-1
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path

from laya_common import contract
from recipe import celery_floor
from recipe.client import Client, add_service_arguments
from recipe.provenance import versions

REQUEST = {
    "model": "english",
    "state": "Please refund the duplicate charge.",
    "questions": {"refund": {"type": "noul", "instructions": "Does the customer ask for a refund?"}},
}
WARMUPS, SAMPLES, PER_CLIENT = 20, 100, 20
CLIENTS = (1, 8, 32)
UNTRACED = "1 untraced"  # the level of the lone client's samples sent without a trace
PAIRED_POOL = "prefork"  # the Celery floor the lone untraced overhead is held against, sampled in turn with it
ROUNDS = 5
TRACE_TRIES = 20
STAGES = (
    "client_sent",
    "api_received",
    "api_validated",
    "api_ready",
    "api_enqueued",
    "worker_received",
    "task_started",
    "engine_started",
    "launched",
    "engine_finished",
    "result_sent",
    "api_woke",
    "api_responded",
    "client_received",
)


class Sampler:
    """One caller with a kept-alive connection, sending REQUEST and timing each answer."""

    def __init__(self, frontend: str, api_key: str, *, trace: bool = True) -> None:
        self.client = Client(frontend, api_key, trace=trace)
        self.body = json.dumps(REQUEST).encode()

    def one(self) -> dict:
        sent = time.time()
        t0 = time.perf_counter()
        status, h, _ = self.client.request("POST", "/v1/systemone", self.body)
        wall_ms = (time.perf_counter() - t0) * 1000
        if status != 200:
            raise RuntimeError(f"POST /v1/systemone answered {status}")
        return {
            "wall_ms": wall_ms,
            "engine_ms": float(h["x-inference-time"]),
            "api_total_ms": float(h["x-total-time"]),
            "queue_ms": float(h["x-queue-time"]),
            "job_id": h["x-job-id"],
            "stamps": {"client_sent": sent, "client_received": sent + wall_ms / 1000},
        }


def run_clients(
    frontend: str, api_key: str, n_clients: int, per_client: int, warmups: int, *, trace: bool = True
) -> list[dict]:
    """`n_clients` threads, each with its own connection, each sending `warmups` then `per_client` requests."""
    results: list[list[dict]] = [[] for _ in range(n_clients)]
    errors: list[BaseException] = []
    start = threading.Barrier(n_clients)

    def client(k: int) -> None:
        try:
            c = Sampler(frontend, api_key, trace=trace)
            for _ in range(warmups):
                c.one()
            start.wait()
            results[k] = [c.one() | {"client": k} for _ in range(per_client)]
        except BaseException as e:  # reported by the main thread
            errors.append(e)
            start.abort()

    threads = [threading.Thread(target=client, args=(k,)) for k in range(n_clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return [r for rows in results for r in rows]


def lone_beside_floor(
    frontend: str, api_key: str, redis_url: str, samples: int, floor_samples: int, warmups: int
) -> tuple[list[dict], dict[str, dict], list[dict]]:
    """The lone client's untraced series; with `redis_url`, in up to ROUNDS rounds (no more than either count),
    each its share of `samples` then the PAIRED_POOL floor's share of `floor_samples`. Returns (its rows,
    {PAIRED_POOL: the floor} or {}, each round's two medians)."""
    n_rounds = min(ROUNDS, samples, floor_samples)
    if not redis_url or n_rounds < 1:
        return run_clients(frontend, api_key, 1, samples, warmups, trace=False), {}, []
    sampler = Sampler(frontend, api_key, trace=False)
    for _ in range(warmups):
        sampler.one()
    rows, times, rounds = [], [], []
    with celery_floor.FloorWorker(redis_url, PAIRED_POOL) as floor:
        for r in range(n_rounds):
            ours = [sampler.one() | {"client": 0, "round": r} for _ in range(share(samples, r, n_rounds))]
            theirs = floor.sample(share(floor_samples, r, n_rounds))
            rows += ours
            times += theirs
            rounds.append(
                {
                    "overhead_p50_ms": statistics.median(o["wall_ms"] - o["engine_ms"] for o in ours),
                    f"{PAIRED_POOL}_p50_ms": statistics.median(theirs),
                }
            )
    return rows, {PAIRED_POOL: {**celery_floor.percentiles(times), "samples_ms": times}}, rounds


def share(n: int, r: int, rounds: int) -> int:
    """Round r's part of n samples split over `rounds` rounds (the first rounds take the remainder)."""
    return n // rounds + (r < n % rounds)


def add_worker_stamps(rows: list[dict], redis_url: str) -> bool:
    """Merge each sample's stored trace into its stamps; False if the service stored none (LAYA_TRACE off)."""
    from redis import Redis

    redis = Redis.from_url(redis_url)
    for _ in range(TRACE_TRIES):  # each process stores its stamps just after its part, the last ones a moment late
        pipe = redis.pipeline()
        for r in rows:
            pipe.hgetall(contract.trace_key(r["job_id"]))
        traces = pipe.execute()
        if all(len(t) == len(STAGES) - 1 for t in traces):  # the client's two stamps are not stored, "worker" is
            break
        time.sleep(0.1)
    for r, trace in zip(rows, traces, strict=True):
        trace = {k.decode(): v.decode() for k, v in trace.items()}
        r["worker"] = trace.pop("worker", None)
        r["stamps"].update({k: float(v) for k, v in trace.items()})
    return all(set(STAGES) <= set(r["stamps"]) for r in rows)


def stage_gaps(row: dict) -> dict[str, float]:
    """ms spent between consecutive stages of one sample (keyed 'from->to')."""
    s = row["stamps"]
    return {f"{a}->{b}": (s[b] - s[a]) * 1000 for a, b in zip(STAGES, STAGES[1:], strict=False)}


def worker_span(row: dict) -> tuple[float, float]:
    """The worker's own record of one task: from starting it to sending the result (not from taking its message,
    which a worker does one task ahead: worker.service.back_to_back)."""
    return row["stamps"]["task_started"], row["stamps"]["result_sent"]


def queueing_ms(row: dict, spans: list[tuple[float, float]]) -> float:
    """ms of this sample's wait (enqueued -> started by the worker) during which the worker ran other tasks."""
    wait_from, wait_to = row["stamps"]["api_enqueued"], worker_span(row)[0]
    busy = sum(max(0.0, min(end, wait_to) - max(start, wait_from)) for start, end in spans)
    return busy * 1000


def occupancy_spans(rows: list[dict]) -> list[tuple[float, float]]:
    """Each task's hold on its worker: its span, stretched to the worker taking the next task when that one was
    queued before this one's answer went out (the worker then went straight on: acknowledging, taking the next
    message, Celery's dispatch, all the worker's own per-task run time)."""
    spans = []
    by_worker: dict[str, list[dict]] = {}
    for r in rows:
        by_worker.setdefault(r["worker"], []).append(r)
    for tasks in by_worker.values():
        tasks.sort(key=lambda r: worker_span(r)[0])
        for task, after in zip(tasks, [*tasks[1:], None], strict=True):
            start, end = worker_span(task)
            if after is not None and after["stamps"]["api_enqueued"] < end:
                end = worker_span(after)[0]
            spans.append((start, end))
    return spans


def overlapping_tasks(rows: list[dict]) -> int:
    """How many tasks a worker started before it had finished the one before, by its own stamps."""
    by_worker: dict[str, list[tuple[float, float]]] = {}
    for r in rows:
        by_worker.setdefault(r["worker"], []).append(worker_span(r))
    ordered = [sorted(spans) for spans in by_worker.values()]
    return sum(b[0] < a[1] for spans in ordered for a, b in zip(spans, spans[1:], strict=False))


def summarize(rows: list[dict], traced: bool, concurrent: bool) -> dict:
    overhead = [r["wall_ms"] - r["engine_ms"] for r in rows]
    summary = {
        "samples": len(rows),
        "overhead": celery_floor.percentiles(overhead),
        "engine": celery_floor.percentiles([r["engine_ms"] for r in rows]),
        "wall": celery_floor.percentiles([r["wall_ms"] for r in rows]),
    }
    if traced:
        gaps = [stage_gaps(r) for r in rows]
        summary["stages_median_ms"] = {k: statistics.median(g[k] for g in gaps) for k in gaps[0]}
        spans = sorted(worker_span(r) for r in rows)
        for r in rows:
            r["queueing_ms"] = queueing_ms(r, [s for s in spans if s != worker_span(r)])
        summary["beyond_queueing"] = celery_floor.percentiles(
            [o - r["queueing_ms"] for o, r in zip(overhead, rows, strict=True)]
        )
        held = occupancy_spans(rows)
        summary["beyond_occupancy"] = celery_floor.percentiles(
            [
                o - queueing_ms(r, [h for h in held if h[0] != worker_span(r)[0]])
                for o, r in zip(overhead, rows, strict=True)
            ]
        )
        if concurrent:  # the worker is busy all along: what it spends between two tasks
            summary["worker_gap_median_ms"] = statistics.median(
                (b[0] - a[1]) * 1000 for a, b in zip(spans, spans[1:], strict=False)
            )
        summary["overlapping_tasks"] = overlapping_tasks(rows)
    return summary


def main(
    *,
    frontend: str,
    output: Path,
    redis_url: str = "",
    api_key: str = "",
    warmups: int = WARMUPS,
    samples: int = SAMPLES,
    clients: tuple[int, ...] = CLIENTS,
    per_client: int = PER_CLIENT,
    floor_pools: tuple[str, ...] = celery_floor.POOLS,
    floor_samples: int = celery_floor.SAMPLES,
) -> int:
    levels, all_traced = {}, True
    for n in clients:
        rows = run_clients(frontend, api_key, n, samples if n == 1 else per_client, warmups)
        traced = bool(redis_url) and add_worker_stamps(rows, redis_url)
        all_traced &= traced
        levels[str(n)] = {"summary": summarize(rows, traced, concurrent=n > 1), "rows": rows}
    paired = PAIRED_POOL in floor_pools and bool(redis_url)
    rows, floor, rounds = lone_beside_floor(
        frontend, api_key, redis_url if paired else "", samples, floor_samples, warmups
    )
    levels[UNTRACED] = {"summary": summarize(rows, traced=False, concurrent=False), "rows": rows}
    if redis_url:
        floor |= {
            pool: celery_floor.measure(redis_url, pool, samples=floor_samples)
            for pool in floor_pools
            if pool != PAIRED_POOL
        }
    output.mkdir(parents=True, exist_ok=True)
    report = {
        "command": sys.argv,
        "frontend": frontend,
        "request": REQUEST,
        "warmups": warmups,
        "stages": list(STAGES) if all_traced else None,
        "summary": {n: level["summary"] for n, level in levels.items()},
        "celery_floor": {pool: {k: v for k, v in f.items() if k != "samples_ms"} for pool, f in floor.items()},
        "celery_floor_samples_ms": {pool: f["samples_ms"] for pool, f in floor.items()},
        "lone_beside_prefork": rounds,
        "samples": {n: level["rows"] for n, level in levels.items()},
        "load_average": os.getloadavg(),
        "cpus": os.cpu_count(),
        "versions": versions(("laya-service", "celery", "kombu", "redis", "flask", "gunicorn")),
    }
    (output / "samples.json").write_text(json.dumps(report, indent=2) + "\n")
    print(format_report(report))
    print(f"http_overhead: load {os.getloadavg()[0]:.1f}; every sample in {output / 'samples.json'}")
    return 0


def format_report(report: dict) -> str:
    lines = []
    for n, s in report["summary"].items():
        o, e = s["overhead"], s["engine"]
        line = (
            f"{n:>3} client(s): overhead p50 {o['p50_ms']:.2f} ms  p90 {o['p90_ms']:.2f}  p99 {o['p99_ms']:.2f}"
            f"  (engine p50 {e['p50_ms']:.2f})"
        )
        if "beyond_queueing" in s:
            line += f"; beyond queueing p50 {s['beyond_queueing']['p50_ms']:.2f}"
        if "beyond_occupancy" in s:
            line += f", beyond the worker's occupancy p50 {s['beyond_occupancy']['p50_ms']:.2f}"
        if "worker_gap_median_ms" in s:
            line += f", worker gap between tasks p50 {s['worker_gap_median_ms']:.2f}"
        lines.append(line)
    first = next(iter(report["summary"].values()))
    for stage, ms in first.get("stages_median_ms", {}).items():
        lines.append(f"    {stage:38} {ms:7.3f} ms")
    for pool, f in report["celery_floor"].items():
        lines.append(f"celery floor {pool:8} p50 {f['p50_ms']:.2f} ms  p90 {f['p90_ms']:.2f}  p99 {f['p99_ms']:.2f}")
    for r, pair in enumerate(report["lone_beside_prefork"]):
        lines.append(
            f"round {r}: lone untraced overhead p50 {pair['overhead_p50_ms']:.2f} ms, "
            f"prefork round trip p50 {pair[f'{PAIRED_POOL}_p50_ms']:.2f}"
        )
    return "\n".join(lines)


def cli(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_service_arguments(p)
    p.add_argument(
        "--redis-url",
        default=os.environ.get("LAYA_REDIS_URL", ""),
        help="the service's Redis, for stage times and the Celery floor (default: $LAYA_REDIS_URL; "
        "without it neither is measured)",
    )
    p.add_argument(
        "--samples", type=int, default=SAMPLES, help="measured requests of the lone client (default: %(default)s)"
    )
    p.add_argument(
        "--clients",
        default=",".join(map(str, CLIENTS)),
        help="comma-separated numbers of concurrent clients (default: %(default)s)",
    )
    p.add_argument(
        "--per-client",
        type=int,
        default=PER_CLIENT,
        help="measured requests per client when there are several (default: %(default)s)",
    )
    p.add_argument(
        "--floor-pools",
        default=",".join(celery_floor.POOLS),
        help="worker pools of the Celery floor, comma-separated; empty: skip it (default: %(default)s)",
    )
    p.add_argument(
        "--floor-samples",
        type=int,
        default=celery_floor.SAMPLES,
        help="round trips per pool of the Celery floor (default: %(default)s)",
    )
    p.add_argument("--output", type=Path, required=True, help="directory for samples.json")
    args = p.parse_args(argv)
    return main(
        frontend=args.frontend,
        output=args.output,
        redis_url=args.redis_url,
        api_key=args.api_key,
        samples=args.samples,
        clients=tuple(int(n) for n in args.clients.split(",")),
        per_client=args.per_client,
        floor_pools=tuple(p for p in args.floor_pools.split(",") if p),
        floor_samples=args.floor_samples,
    )


if __name__ == "__main__":
    sys.exit(cli())
