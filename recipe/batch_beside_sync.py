"""A batch and a sync caller at once: how long the caller waits while the batch runs, and what the batch loses.

    python -m recipe.batch_beside_sync --frontend http://127.0.0.1:8080 --output OUT [--states 10000]

Against a running service (the stack as the README starts it; on the H200 the cuda executor and the large
synthesized checkpoint). In order, each step on an idle service:

    sync alone      --samples sync requests (the benchmark's 1x77 input), one after another
    batch alone     --states states (the benchmark's batch: 20-300 words, a noul and a 4-option choice),
                    from the POST until a fetch sees it done
    batch beside    the same batch again, and from 0.5 s after its POST one sync caller sending the same sync
                    request one after another until the batch is done

Reports each sync series' p50/p90/p99/max and count, the batch's seconds alone and beside the caller and their
ratio (its speed beside the caller, alone = 1), and every sample. Writes OUT/batch_beside_sync.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path

from recipe.bench_inputs import BATCH_QUESTIONS, INPUTS, batch_states
from recipe.client import Client, add_service_arguments
from recipe.provenance import versions

SYNC_INPUT = INPUTS["1x77 noul"]
FIRST_SYNC_AFTER_S = 0.5  # the caller starts once the batch is under way


def sync_once(client: Client) -> tuple[int, float]:
    t0 = time.perf_counter()
    status, _, _ = client.request("POST", "/v1/systemone", json.dumps(SYNC_INPUT).encode())
    return status, (time.perf_counter() - t0) * 1000


def run_batch(client: Client, states: list[str], poll_s: float = 0.02) -> dict:
    """Submit the batch and poll its progress until it is done: its seconds from the POST."""
    t0 = time.perf_counter()
    body = json.dumps({"model": "english", "states": states, "questions": BATCH_QUESTIONS}).encode()
    status, _, answer = client.request("POST", "/v1/batches", body)
    if status != 202:
        raise RuntimeError(f"the batch was refused: {status} {answer[:200]!r}")
    batch_id = json.loads(answer)["id"]
    while True:
        page = json.loads(client.request("GET", f"/v1/batches/{batch_id}?limit=1")[2])
        if page["status"] in ("done", "failed", "cancelled"):
            return {"id": batch_id, "status": page["status"], "done": page["done"], "seconds": time.perf_counter() - t0}
        time.sleep(poll_s)


def summary(ms: list[float], statuses: list[int]) -> dict:
    if not ms:
        return {"n": 0}
    ordered = sorted(ms)

    def q(p: float) -> float:
        return ordered[min(len(ordered) - 1, int(p * len(ordered)))]

    return {
        "n": len(ms),
        "statuses": {str(s): statuses.count(s) for s in sorted(set(statuses))},
        "p50_ms": statistics.median(ordered),
        "p90_ms": q(0.90),
        "p99_ms": q(0.99),
        "max_ms": ordered[-1],
    }


def main(frontend: str, api_key: str, states_n: int, samples: int) -> dict:
    client, states = Client(frontend, api_key, trace=False), batch_states(states_n)
    for _ in range(5):  # warm-up
        sync_once(client)
    alone = [sync_once(client) for _ in range(samples)]
    batch_alone = run_batch(client, states)

    beside: list[tuple[int, float]] = []
    done = threading.Event()

    def caller() -> None:
        own = Client(frontend, api_key, trace=False)
        time.sleep(FIRST_SYNC_AFTER_S)
        while not done.is_set():
            beside.append(sync_once(own))

    thread = threading.Thread(target=caller)
    thread.start()
    try:
        batch_beside = run_batch(client, states)
    finally:
        done.set()
        thread.join()
    return {
        "sync_alone": summary([ms for _, ms in alone], [s for s, _ in alone]),
        "batch_alone": batch_alone,
        "sync_beside_batch": summary([ms for _, ms in beside], [s for s, _ in beside]),
        "batch_beside_sync": batch_beside,
        "batch_speed_beside_sync": batch_alone["seconds"] / batch_beside["seconds"],
        "samples": {"sync_alone_ms": [ms for _, ms in alone], "sync_beside_batch_ms": [ms for _, ms in beside]},
    }


def cli(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m recipe.batch_beside_sync", description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    add_service_arguments(p)
    p.add_argument("--output", type=Path, required=True, help="directory for batch_beside_sync.json")
    p.add_argument("--states", type=int, default=10000, help="states in the batch (default: %(default)s)")
    p.add_argument("--samples", type=int, default=100, help="sync requests alone (default: %(default)s)")
    args = p.parse_args(argv)
    report = {
        "command": sys.argv,
        "versions": versions(("celery", "redis", "flask", "gevent")),
        **main(args.frontend, args.api_key, args.states, args.samples),
    }
    args.output.mkdir(parents=True, exist_ok=True)
    (args.output / "batch_beside_sync.json").write_text(json.dumps(report, indent=1) + "\n")
    beside = report["sync_beside_batch"]
    print(
        f"batch_beside_sync: sync alone p50 {report['sync_alone']['p50_ms']:.1f} ms; beside the batch "
        f"p50 {beside.get('p50_ms', 0):.1f} p99 {beside.get('p99_ms', 0):.1f} max {beside.get('max_ms', 0):.1f} ms "
        f"(n {beside['n']}); batch {report['batch_alone']['seconds']:.2f} s alone, "
        f"{report['batch_beside_sync']['seconds']:.2f} s beside ({report['batch_speed_beside_sync']:.3f} of its speed)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(cli())
