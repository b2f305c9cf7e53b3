"""Batch scoring end to end through /v1/batches: states per second from the POST to the last result fetched.

    python -m recipe.batch_throughput --frontend http://127.0.0.1:8080 --output OUT [--states 1000]

The states and questions are the benchmark's (`recipe.bench_inputs`: 20-300 words each, a noul and a
4-option choice). One warm-up batch of 64 states first; then one timed batch: submit, poll the status
every 20 ms until done, fetch every page. Checks that every state got an answer (no error objects) and
in order. Writes OUT/batch_throughput.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.request
from pathlib import Path

from recipe.bench_inputs import BATCH_QUESTIONS, batch_states
from worker.version import version_info


def call(url: str, body: dict | None = None) -> dict:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, headers={"Content-Type": "application/json"}, method="GET" if body is None else "POST"
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.loads(response.read())


def run_batch(frontend: str, states: list[str]) -> tuple[float, list]:
    t0 = time.perf_counter()
    body = {"model": "english", "states": states, "questions": BATCH_QUESTIONS}
    batch_id = call(f"{frontend}/v1/batches", body)["id"]
    while (status := call(f"{frontend}/v1/batches/{batch_id}?limit=1"))["status"] not in ("done", "failed"):
        time.sleep(0.02)
    results, offset = [], 0
    while offset < len(states):
        page = call(f"{frontend}/v1/batches/{batch_id}?offset={offset}")
        results += page["results"]
        offset += len(page["results"])
        if not page["results"]:
            break
    return time.perf_counter() - t0, results if status["status"] == "done" else [status]


def main(*, frontend: str, output: Path, n_states: int) -> int:
    output.mkdir(parents=True)
    frontend = frontend.rstrip("/")
    states = batch_states(n_states)
    run_batch(frontend, states[:64])
    seconds, results = run_batch(frontend, states)
    errors = [r for r in results if "answers" not in r]
    report = {
        "states": n_states,
        "seconds": seconds,
        "states_per_s": n_states / seconds,
        "answered": len(results) - len(errors),
        "errors": errors[:5],
        "info": call(f"{frontend}/info"),
        "command": sys.argv,
        "version": version_info(),
    }
    (output / "batch_throughput.json").write_text(json.dumps(report, indent=1) + "\n")
    print(
        f"batch_throughput: {n_states} states in {seconds:.2f} s: {n_states / seconds:.0f} states/s, "
        f"{len(errors)} errors"
    )
    return 1 if errors or len(results) != n_states else 0


if __name__ == "__main__":
    p = argparse.ArgumentParser(
        prog="python -m recipe.batch_throughput",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--frontend", default="http://127.0.0.1:8080", help="the API's base URL (default: %(default)s)")
    p.add_argument("--output", type=Path, required=True, help="a directory that does not exist yet")
    p.add_argument("--states", type=int, default=1000, help="states in the timed batch (default 1000)")
    a = p.parse_args()
    if a.output.exists():
        p.error(f"{a.output} exists; give a fresh directory")
    sys.exit(main(frontend=a.frontend, output=a.output, n_states=a.states))
