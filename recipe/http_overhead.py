"""What the HTTP sync path adds over engine time: the target is at most 2 ms at the median.

Sends one request to POST /v1/systemone 20 times to warm up, then 100 times measured, one at a time.
Each sample keeps the client's wall time and the worker's own engine time (x-inference-time), plus
the API's x-total-time and x-queue-time. Overhead = wall - engine. Writes samples.json (every sample,
the summary, the command line, versions and the machine's load) into --output.

    python recipe/http_overhead.py --frontend http://127.0.0.1:8080 --output /tmp/http-overhead-1
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import urllib.request
from pathlib import Path

from recipe.provenance import versions

REQUEST = {"model": "english", "state": "Please refund the duplicate charge.",
           "questions": {"refund": {"type": "noul", "instructions": "Does the customer ask for a refund?"}}}
WARMUPS, SAMPLES = 20, 100



def main(*, frontend: str, output: Path, api_key: str = "", warmups: int = WARMUPS, samples: int = SAMPLES) -> int:
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {api_key}"} if api_key else {})}
    body = json.dumps(REQUEST).encode()
    url = frontend.rstrip("/") + "/v1/systemone"

    def one() -> dict:
        request = urllib.request.Request(url, data=body, headers=headers, method="POST")
        t0 = time.perf_counter()
        with urllib.request.urlopen(request, timeout=60) as response:
            response.read()
            wall_ms = (time.perf_counter() - t0) * 1000
            h = response.headers
            return {"wall_ms": wall_ms, "engine_ms": float(h["x-inference-time"]),
                    "api_total_ms": float(h["x-total-time"]), "queue_ms": float(h["x-queue-time"])}

    for _ in range(warmups):
        one()
    rows = [one() for _ in range(samples)]
    overhead = sorted(r["wall_ms"] - r["engine_ms"] for r in rows)
    summary = {"overhead_median_ms": statistics.median(overhead), "overhead_p90_ms": overhead[int(0.9 * len(overhead))],
               "engine_median_ms": statistics.median(r["engine_ms"] for r in rows),
               "queue_median_ms": statistics.median(r["queue_ms"] for r in rows)}
    output.mkdir(parents=True, exist_ok=True)
    report = {"command": sys.argv, "frontend": frontend, "request": REQUEST, "warmups": warmups, "summary": summary,
              "samples": rows, "load_average": os.getloadavg(), "cpus": os.cpu_count(),
              "versions": versions(("laya-service", "celery", "kombu", "redis", "flask", "gunicorn"))}
    (output / "samples.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"http_overhead: median {summary['overhead_median_ms']:.2f} ms (p90 {summary['overhead_p90_ms']:.2f}) "
          f"over a median engine time of {summary['engine_median_ms']:.2f} ms; load {os.getloadavg()[0]:.1f}; "
          f"in {output}")
    return 0


def cli(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--frontend", default="http://127.0.0.1:8080", help="the API's base URL (default: %(default)s)")
    p.add_argument("--api-key", default=os.environ.get("LAYA_API_KEY", ""),
                   help="bearer token (default: $LAYA_API_KEY)")
    p.add_argument("--samples", type=int, default=SAMPLES, help="measured requests (default: %(default)s)")
    p.add_argument("--output", type=Path, required=True, help="directory for samples.json")
    args = p.parse_args(argv)
    return main(frontend=args.frontend, output=args.output, api_key=args.api_key, samples=args.samples)


if __name__ == "__main__":
    sys.exit(cli())
