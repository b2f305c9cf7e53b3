"""recipe/http_overhead.py in short against the main stack: every stage stamped, in order, beside the Celery floor."""

from __future__ import annotations

import json

from recipe import http_overhead
from service.helpers import API_KEY

API_STAGES = ("api_received", "api_validated", "api_ready", "api_enqueued", "api_woke", "api_responded")
WORKER_STAGES = ("worker_received", "task_started", "engine_started", "engine_finished", "result_sent")


def test_overhead_recipe_stamps_every_stage_in_order(stack, tmp_path):
    assert (
        http_overhead.main(
            frontend=stack.base_url,
            output=tmp_path,
            redis_url=stack.redis_url,
            api_key=API_KEY,
            warmups=3,
            samples=20,
            clients=(1, 8),
            per_client=3,
            floor_pools=("prefork", "solo"),
            floor_samples=20,
        )
        == 0
    )
    report = json.loads((tmp_path / "samples.json").read_text())
    assert report["stages"] == list(http_overhead.STAGES)
    assert report["summary"][http_overhead.UNTRACED]["samples"] == 20
    for level in (report["samples"][n] for n in ("1", "8")):
        for sample in level:
            t = sample["stamps"]
            for process in (API_STAGES, WORKER_STAGES):  # each process's stamps in its order
                assert [t[s] for s in process] == sorted(t[s] for s in process), sample
            # one clock on one host: what one process did before another could see it
            assert t["client_sent"] <= t["api_received"] and t["api_ready"] <= t["worker_received"], sample
            assert t["result_sent"] <= t["api_woke"] <= t["client_received"], sample
    assert report["summary"]["8"]["overlapping_tasks"] == 0
    assert set(report["celery_floor"]) == {"prefork", "solo"}
