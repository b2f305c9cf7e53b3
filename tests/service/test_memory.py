"""A maximal batch (10,000 states, 64 MB of JSON) leaves the API process no larger than before, within 50 MB
(it stayed 373 MB larger when the body was copied whole several times over and the C heap kept the pages)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from service.helpers import NOUL, Service, wait_until

MAX_STATES = 10_000


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    line = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith(field))
    return int(line.split()[1]) / 1024


def test_a_maximal_batch_leaves_the_api_process_within_50_mb_of_its_size_before(stack, launcher):
    service = Service(stack.redis_url)  # an API of its own, on the main stack's worker
    api = launcher.api(service)
    service.wait_healthy()
    (child,) = [int(pid) for pid in subprocess.check_output(["pgrep", "-P", str(api.popen.pid)]).split()]
    state = "The parcel has not arrived and nobody answers my emails. " * 112  # about 6.4 KB
    body = json.dumps({"states": [f"{i}: {state}" for i in range(MAX_STATES)], "questions": {"late": NOUL}})
    assert len(body) > 60 * 2**20
    for _ in range(3):
        service.get("/health")
    before = rss_mb(child)
    r = service.post("/v1/batches", data=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 202, r.text
    assert service.http.delete(service.url(f"/v1/batches/{r.json()['id']}")).status_code == 200  # spare the worker
    wait_until(lambda: rss_mb(child) - before < 50, 10, f"the API's memory back near {before:.0f} MB", interval_s=0.2)
    assert rss_mb(child, "VmHWM") - before < 4 * len(body) / 2**20  # never several copies of the body at once
