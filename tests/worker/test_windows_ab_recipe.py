"""recipe/windows_ab.py in short, on the simulated GPU: both engines score every state, the record holds every
round."""

from __future__ import annotations

import json
from pathlib import Path

from recipe import windows_ab

ENGINE = Path(__file__).resolve().parents[2] / "worker" / "engine.py"


def test_windows_ab_alternates_two_engines_on_one_executor_and_records_every_round(tiny_checkpoint, tmp_path):
    assert windows_ab.main(checkpoint=tiny_checkpoint, bundle=None, base_engine=ENGINE, output=tmp_path, rounds=2) == 0
    record = json.loads((tmp_path / "windows_ab.json").read_text())
    assert [len(s) for s in record["samples_states_per_s"].values()] == [2, 2]
    assert record["executor"]["executor"] == "simulated"
    medians = record["median_states_per_s"]
    assert record["ratio"] == medians["this tree"] / medians["base"] > 0
    assert all(0 < share <= 1.01 for shares in record["gpu_busy_share"].values() for share in shares)
