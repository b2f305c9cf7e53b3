"""recipe/load.py in short: 1 and 8 clients for 2 s against one worker, then two; byte-equal, one request in the
reference executor's engine at a time, every sample stored, the executor's busy share a share."""

from __future__ import annotations

import json

import pytest

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
        workers = {f"worker {k + 1}" for k in range(run["workers"])}
        assert set(run["process_cores"]) == {"api", "redis", *workers}
        assert all(run["process_cores"][w] > 0 for w in workers)  # each worker answered requests meanwhile
        for pairs in run["worker_ms_per_request"].values():  # the gaps between the worker's stamps, ms per request
            assert all(set(pair.split(" > ")) <= set(load.WORKER_STAGES) for pair in pairs)
        if run["workers"] == 1:  # its stamps lie within the level: their gaps add up to its time at most
            (pairs,) = run["worker_ms_per_request"].values()
            assert 0 < sum(pairs.values()) * run["answered"] / 1000 <= run["seconds"]
    assert len(report["runs"][-1]["most_at_once"]) == 2  # both workers took tasks
    assert report["bar"]["requests_per_s"] == min(1000, 800 / report["runs"][0]["executor_ms_p50"])
    assert code == 0


def test_worker_timeline_adds_up_each_gap_between_stamps_of_any_request():
    stages = load.WORKER_STAGES  # received, task started, engine started, launched, engine finished, result sent
    # request a's pass runs while b is launched behind it: a's stamps at 0-1-2-3 ms, b's at 4-5-6-7, a finishes
    # at 8 and is sent at 9, then b finishes at 10 and is sent at 12
    a = dict(zip(stages, [0, 0.001, 0.002, 0.003, 0.008, 0.009], strict=True))
    b = dict(zip(stages, [0.004, 0.005, 0.006, 0.007, 0.010, 0.012], strict=True))
    timeline = load.worker_timeline([{"worker": "w", **a}, {"worker": "w", **b}])
    assert timeline["w"]["launched > worker_received"] == 0.5  # a launched, then b received: 1 ms over 2 requests
    assert timeline["w"]["launched > engine_finished"] == 0.5  # b launched at 7, a finished at 8
    assert timeline["w"]["result_sent > engine_finished"] == 0.5
    assert timeline["w"]["engine_finished > result_sent"] == 1.5  # 1 ms for a, 2 ms for b
    assert sum(timeline["w"].values()) == pytest.approx(6.0)  # 12 ms from the first stamp to the last, over 2 requests
