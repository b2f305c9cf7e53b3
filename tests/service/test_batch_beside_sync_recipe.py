"""recipe/batch_beside_sync.py in short against the main stack: both series measured, the sync caller answered
while the batch ran."""

from __future__ import annotations

import json

from recipe import batch_beside_sync
from service.helpers import API_KEY


def test_the_recipe_measures_a_sync_caller_beside_a_batch(stack, tmp_path):
    out = tmp_path / "beside"
    args = ["--frontend", stack.base_url, "--api-key", API_KEY, "--output", str(out), "--states", "300"]
    assert batch_beside_sync.cli([*args, "--samples", "10"]) == 0
    report = json.loads((out / "batch_beside_sync.json").read_text())
    assert report["sync_alone"]["n"] == 10 and report["sync_alone"]["statuses"] == {"200": 10}
    beside = report["sync_beside_batch"]
    assert beside["n"] >= 1 and beside["statuses"] == {"200": beside["n"]}  # answered while the batch ran
    assert report["batch_alone"]["done"] == report["batch_beside_sync"]["done"] == 300
    assert report["batch_speed_beside_sync"] > 0 and len(report["samples"]["sync_beside_batch_ms"]) == beside["n"]
