"""recipe/http_overhead.py in short against the main stack: every stage stamped, in order, beside the Celery floor."""

from __future__ import annotations

import json

from recipe import http_overhead
from service.helpers import API_KEY

API_STAGES = ("api_received", "api_validated", "api_ready", "api_enqueued", "api_woke", "api_responded")
WORKER_STAGES = ("worker_received", "task_started", "engine_started", "launched", "engine_finished", "result_sent")


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
    # the lone untraced series and the prefork floor in turn: each round holds its share of both
    rounds = report["lone_beside_prefork"]
    assert len(rounds) == http_overhead.ROUNDS
    assert all(r["overhead_p50_ms"] > 0 and r["prefork_p50_ms"] > 0 for r in rounds)
    lone = [s["round"] for s in report["samples"][http_overhead.UNTRACED]]
    assert lone == sorted(lone) and set(lone) == set(range(http_overhead.ROUNDS))
    assert len(report["celery_floor_samples_ms"]["prefork"]) == 20


def test_rounds_share_every_sample():
    for n, rounds in ((0, 5), (3, 3), (5, 5), (20, 5), (1001, 5), (7, 1)):
        shares = [http_overhead.share(n, r, rounds) for r in range(rounds)]
        assert sum(shares) == n and max(shares) - min(shares) <= 1


def test_a_task_holds_its_worker_until_the_next_only_when_that_one_was_waiting():
    def task(enqueued: float, started: float, sent: float) -> dict:
        return {"worker": "w", "stamps": {"api_enqueued": enqueued, "task_started": started, "result_sent": sent}}

    first, waiting, late = task(0.0, 1.0, 3.0), task(2.0, 4.0, 6.0), task(7.0, 8.0, 9.0)
    spans = http_overhead.occupancy_spans([late, first, waiting])  # in any order
    # first: stretched to the waiting task's start; waiting: the late one came after its answer; late: last
    assert sorted(spans) == [(1.0, 4.0), (4.0, 6.0), (8.0, 9.0)]
