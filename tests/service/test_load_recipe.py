"""recipe/load.py in short: 1 and 8 clients for 2 s against one worker, then two; byte-equal, one request in the
reference executor's engine at a time, every sample stored, the executor's busy share a share."""

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
        assert set(run["most_at_once"].values()) == {1}  # the reference executor holds one pass
        assert len(level["samples"]) == run["answered"]
        assert all(0 < s["executor_ms"] <= s["engine_ms"] for s in level["samples"])
        assert 0 < run["executor_busy_share"] <= 1.0
        assert 0 < run["client_cpu_cores"] < 2  # one process of threads under one GIL: about a core at most
        assert set(run["latency_by_request"]) == {str(i) for i in range(len(report["requests"]))}
    assert len(report["runs"][-1]["most_at_once"]) == 2  # both workers took tasks
    assert report["bar"]["requests_per_s"] == min(1000, 800 / report["runs"][0]["executor_ms_p50"])
    assert code == 0
