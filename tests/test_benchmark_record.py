"""recipe.benchmark_record: the committed record of a --compare run, from the run's own files."""

import json

from recipe.benchmark_record import record


def _system(median, p90):
    return {"engine": {"median": median, "p90": p90}, "executor": {"median": median * 0.8, "p90": p90 * 0.8}}


def test_the_record_takes_every_system_from_the_summary_and_the_memory_from_startup(tmp_path):
    summary = {
        "ceilings": {"matmul_tflops": 800.0, "copy_tbps": 4.27},
        "inputs": {
            "1x77 noul": {
                "shape": "1x75",
                "systems": {"ours": _system(1.5, 1.6), "laya fast": _system(4.5, 4.6)},
                "speedup": {"laya fast": 3.0},
                "floors_ms": {"flops": 0.07123456, "bytes": 0.1766},
                "matmul_share": 0.05612345,
                "over_bytes_floor": 7.123456,
            }
        },
        "batch_scoring": {"states": 1000, "ours_decide_in_windows_256": 950.0},
    }
    gpu = {"name": "NVIDIA H200", "driver_version": "580", "clocks.sm": "345 MHz", "clocks.mem": "3201 MHz"}
    after_run = {"weights_mib": 904.6, "graphs": 79, "graphs_and_cublas_mib": 4362.5}
    provenance = {
        "versions": {"commit": "abc1234"},
        "gpu_before": gpu,
        "gpu_after": {**gpu, "clocks.sm": "1980 MHz"},
        "command": ["/x/recipe/benchmark.py", "--compare"],
        "executor": {"executor": "cuda", "memory": after_run},
    }
    at_startup = {"weights_mib": 904.6, "graphs": 78, "graphs_and_cublas_mib": 68.1}
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    (tmp_path / "provenance.json").write_text(json.dumps(provenance))
    (tmp_path / "startup.log").write_text(
        f"ours: cuda executor (asked for); {json.dumps({'executor': 'cuda', 'memory': at_startup})} (load 3.9 s)\n"
        "laya fast: loaded in 20 s\n"
    )

    r = record(tmp_path)

    assert r["commit"] == "abc1234" and r["command"] == "recipe/benchmark.py --compare"
    assert r["clocks_after"] == {"clocks.sm": "1980 MHz", "clocks.mem": "3201 MHz"}
    assert r["memory_at_startup"] == at_startup and "memory" not in r["executor"]
    entry = r["inputs"]["1x77 noul"]
    assert entry["median_ms"] == {"ours": 1.5, "laya fast": 4.5} and entry["p90_ms"]["laya fast"] == 4.6
    assert entry["ours_executor_median_ms"] == 1.2
    assert entry["floors_ms"] == {"flops": 0.0712, "bytes": 0.1766} and entry["matmul_share"] == 0.0561
    assert r["batch_scoring"] == summary["batch_scoring"]
