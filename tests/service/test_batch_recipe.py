"""recipe/batch_throughput.py in short against the main stack: every state answered, and where the time went."""

from __future__ import annotations

import json

from recipe import batch_throughput
from service.helpers import API_KEY


def test_batch_recipe_answers_every_state_and_splits_the_time_into_phases(stack, tmp_path):
    out = tmp_path / "batch"
    assert (
        batch_throughput.main(
            frontend=stack.base_url, output=out, n_states=12, redis_url=stack.redis_url, api_key=API_KEY, n_batches=3
        )
        == 0
    )
    report = json.loads((out / "batch_throughput.json").read_text())
    assert report["answered"] == 12 and not report["errors"]
    assert len(report["batches"]) == 3 and report["seconds"] == sorted(b["seconds"] for b in report["batches"])[1]
    phases = report["phases_ms"]
    assert list(phases) == ["submit", "to_worker", "worker", "seen_done", "fetch"]
    # the worker may take the message before the client has the 202: only `to_worker` can be negative
    assert all(phases[k] > 0 for k in ("submit", "worker", "fetch")) and phases["seen_done"] >= 0
    assert abs(sum(phases.values()) - 1000 * report["seconds"]) < 5  # one clock, and nothing left out
