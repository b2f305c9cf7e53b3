"""recipe/load.py in short: 1 and 8 clients for 2 s against one worker, then two; byte-equal, no overlap, every
sample stored, the engine's busy share a share."""

from __future__ import annotations

import json

from recipe import load


def test_load_short_form(checkpoint, tmp_path):
    code = load.main(checkpoint=checkpoint, output=tmp_path, clients=(1, 8), seconds=2.0, workers=(1, 2))
    report = json.loads((tmp_path / "load.json").read_text())
    assert [(r["workers"], r["clients"]) for r in report["runs"]] == [(1, 1), (1, 8), (2, 1), (2, 8)]
    samples = json.loads((tmp_path / "samples.json").read_text())
    for run, level in zip(report["runs"], samples, strict=True):
        assert run["answered"] > 0 and run["n_failed"] == 0 and run["not_byte_equal"] == 0
        assert not any(run["overlapping_tasks"].values())
        assert len(level["samples"]) == run["answered"] and all(s["engine_ms"] > 0 for s in level["samples"])
        assert 0 < run["engine_busy_share"] <= 1.0
    assert len(report["runs"][-1]["overlapping_tasks"]) == 2  # both workers took tasks
    assert code == 0
