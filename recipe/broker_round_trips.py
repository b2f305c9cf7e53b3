"""What a departure from stock kombu that only saves a round trip would buy: stock kombu's own `QoS.append` (the
record of a delivered message) and `QoS.ack` (its removal) timed on a real Redis, with a sync request's message.

laya_common/broker keeps a departure only for correctness or for at least 0.1 ms on the H200; this measures the
two whose only gain was skipping these calls. Writes broker-round-trips.json into --output.

    python -m recipe.broker_round_trips --redis-url redis://127.0.0.1:6379/15 --output /tmp/round-trips
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
import uuid
from pathlib import Path

from celery import Celery

from laya_common import contract
from laya_common.broker import messages, transport
from recipe.provenance import versions

QUEUE = "laya.round-trips"
WARMUPS, SAMPLES = 200, 3000
PAYLOAD = {"model": "english", "state": "x" * 600, "questions": {"q": {"type": "noul", "instructions": "i?"}}}


def quantiles_us(samples: list[float]) -> dict:
    ordered = sorted(samples)
    return {
        "p50": round(statistics.median(ordered) * 1e6, 1),
        "p90": round(ordered[int(0.9 * len(ordered))] * 1e6, 1),
        "p99": round(ordered[int(0.99 * len(ordered))] * 1e6, 1),
    }


def measure(redis_url: str, samples: int = SAMPLES) -> dict:
    celery = Celery("round-trips")
    celery.conf.update(contract.celery_config(redis_url))
    raw = messages.encode(celery, contract.TASK_DECIDE, PAYLOAD, task_id="round-trips", queue=QUEUE)
    records = transport.StockRecords(redis_url, QUEUE, raw)  # kombu's stock Redis transport
    timed = {"QoS.append": [], "QoS.ack": []}
    try:
        for i in range(WARMUPS + samples):
            tag = str(uuid.uuid4())
            t0 = time.perf_counter()
            records.append(tag)
            t1 = time.perf_counter()
            records.ack(tag)
            t2 = time.perf_counter()
            if i >= WARMUPS:
                timed["QoS.append"].append(t1 - t0)
                timed["QoS.ack"].append(t2 - t1)
    finally:
        records.close()
    return {
        "message_bytes": len(raw),
        "samples": samples,
        "microseconds": {name: quantiles_us(values) for name, values in timed.items()},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--redis-url", required=True, help="a Redis database this may write and clean (a test one)")
    parser.add_argument("--output", type=Path, required=True, help="folder for broker-round-trips.json")
    parser.add_argument("--samples", type=int, default=SAMPLES)
    args = parser.parse_args(argv)
    result = {
        "host": platform.node(),
        "versions": versions(("kombu", "celery", "redis")),
        **measure(args.redis_url, args.samples),
    }
    args.output.mkdir(parents=True, exist_ok=True)
    (args.output / "broker-round-trips.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result["microseconds"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
