"""Batch scoring end to end through /v1/batches: states per second from the POST to the last result fetched.

    python -m recipe.batch_throughput --frontend http://127.0.0.1:8080 --output OUT [--states 1000] [--batches 3]

The states and questions are the benchmark's (`recipe.bench_inputs`: 20-300 words each, a noul and a
4-option choice). One warm-up batch of 64 states first; then the timed batches, one after another: submit,
ask for the first page with `?wait=` (the API answers once the batch is done) until it is done, fetch the
other pages. Checks that every state got an answer (no error objects) and in order. Writes
OUT/batch_throughput.json: every batch, and the median batch's figures at the top; with the service's Redis
(`--redis-url`), also where each batch's time went: the POST, the wait for the worker, the worker's run, the
API's answer to the waiting fetch, the fetch.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.request
from pathlib import Path

from laya_common.version import version_info
from recipe.bench_inputs import BATCH_QUESTIONS, batch_states
from recipe.client import add_service_arguments

WAIT_S = 5  # each waiting fetch's ?wait=, under any sync timeout a deployment would set


def call(url: str, body: dict | None = None, api_key: str = "") -> dict:
    data = None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {api_key}"} if api_key else {})}
    request = urllib.request.Request(url, data=data, headers=headers, method="GET" if body is None else "POST")
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.loads(response.read())


def run_batch(frontend: str, states: list[str], marks: dict | None = None, api_key: str = "") -> tuple[float, list]:
    """(seconds from the POST to the last page, the results); `marks` gets the batch id and the wall-clock
    times (time.time()) at which the POST went out, was answered, was seen done, and the last page arrived."""
    marks = {} if marks is None else marks
    t0, marks["posted"] = time.perf_counter(), time.time()
    body = {"model": "english", "states": states, "questions": BATCH_QUESTIONS}
    batch_id = marks["id"] = call(f"{frontend}/v1/batches", body, api_key)["id"]
    marks["accepted"] = time.time()
    first = f"{frontend}/v1/batches/{batch_id}?wait={WAIT_S}"
    while (page := call(first, api_key=api_key))["status"] not in ("done", "failed"):
        pass
    marks["seen_done"] = time.time()
    status, results = page["status"], page["results"]
    while page["results"] and "next" in page:
        page = call(frontend + page["next"], api_key=api_key)
        results += page["results"]
    marks["fetched"] = time.time()
    return time.perf_counter() - t0, results if status == "done" else [page]


def phases_ms(marks: dict, redis_url: str) -> dict:
    """Where the batch's time went, from the client's marks and the worker's timings in the batch's stored
    envelope (one clock: the client, the API and the worker on one host)."""
    import redis

    from laya_common import contract

    envelope = redis.Redis.from_url(redis_url).lindex(contract.result_key(marks["id"]), 0)
    timings = json.loads(envelope)["timings"]
    return {
        "submit": 1000 * (marks["accepted"] - marks["posted"]),  # the POST: body, validation, the message
        "to_worker": 1000 * (timings["started_at"] - marks["accepted"]),  # the worker takes the message
        "worker": timings["inference_ms"],  # scoring, storing each window's results
        "seen_done": 1000 * (marks["seen_done"] - timings["finished_at"]),  # the waiting fetch's answer (1st page)
        "fetch": 1000 * (marks["fetched"] - marks["seen_done"]),  # the other pages of results
    }


def timed_batch(frontend: str, states: list[str], redis_url: str | None, api_key: str) -> dict:
    """One batch's seconds, states per second, phases (with `redis_url`), answers and first errors."""
    marks: dict = {}
    seconds, results = run_batch(frontend, states, marks, api_key)
    errors = [r for r in results if "answers" not in r]
    if len(results) != len(states):
        errors.append({"error": f"{len(results)} results for {len(states)} states"})
    batch = {
        "seconds": seconds,
        "states_per_s": len(states) / seconds,
        "phases_ms": phases_ms(marks, redis_url) if redis_url and not errors else None,
        "answered": len(results) - len(errors),
        "errors": errors[:5],
    }
    phases = ", ".join(f"{k} {v:.1f}" for k, v in (batch["phases_ms"] or {}).items())
    print(
        f"batch_throughput: {len(states)} states in {seconds:.2f} s: {batch['states_per_s']:.0f} states/s, "
        f"{len(errors)} errors" + (f"; ms {phases}" if phases else "")
    )
    return batch


def main(
    *, frontend: str, output: Path, n_states: int, redis_url: str | None, api_key: str = "", n_batches: int = 1
) -> int:
    output.mkdir(parents=True)
    frontend = frontend.rstrip("/")
    states = batch_states(n_states)
    run_batch(frontend, states[:64], api_key=api_key)
    batches = [timed_batch(frontend, states, redis_url, api_key) for _ in range(n_batches)]
    median = sorted(batches, key=lambda b: b["seconds"])[(n_batches - 1) // 2]
    report = {
        "states": n_states,
        **median,
        "batches": batches,
        "info": call(f"{frontend}/info", api_key=api_key),
        "command": sys.argv,
        "version": version_info(),
    }
    (output / "batch_throughput.json").write_text(json.dumps(report, indent=1) + "\n")
    if n_batches > 1:
        print(f"batch_throughput: median of {n_batches} batches {median['states_per_s']:.0f} states/s")
    return 1 if any(b["errors"] for b in batches) else 0


if __name__ == "__main__":
    p = argparse.ArgumentParser(
        prog="python -m recipe.batch_throughput",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_service_arguments(p)
    p.add_argument("--output", type=Path, required=True, help="a directory that does not exist yet")
    p.add_argument("--states", type=int, default=1000, help="states in each timed batch (default 1000)")
    p.add_argument("--batches", type=int, default=3, help="timed batches, one after another (default 3)")
    p.add_argument(
        "--redis-url",
        default=os.environ.get("LAYA_REDIS_URL"),
        help="the service's Redis, to split the time into phases from the worker's timings (default: "
        "$LAYA_REDIS_URL; none: no phases)",
    )
    a = p.parse_args()
    if a.output.exists():
        p.error(f"{a.output} exists; give a fresh directory")
    if a.batches < 1 or a.states < 1:
        p.error("--states and --batches take 1 or more")
    sys.exit(
        main(
            frontend=a.frontend,
            output=a.output,
            n_states=a.states,
            redis_url=a.redis_url,
            api_key=a.api_key,
            n_batches=a.batches,
        )
    )
