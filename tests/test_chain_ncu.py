"""recipe.chain_ncu's summary of Nsight Compute's raw page: what a person reads instead of 600 columns a kernel."""

import json

from recipe.chain_ncu import summary

HEADER = [
    "ID",
    "Kernel Name",
    "gpu__time_duration.sum",
    "dram__bytes.sum.per_second",
    "sm__cycles_active.max",
    "gpc__cycles_elapsed.max",
    "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_barrier_not_issued_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_wait_per_issue_active.ratio",
]
UNITS = ["", "", "nsecond", "Gbyte/s", "cycle", "cycle", "ratio", "ratio", "ratio", "ratio"]


def _csv(tmp_path, rows):
    lines = ["==PROF== Connected to process 1"] + [",".join(f'"{c}"' for c in r) for r in [HEADER, UNITS, *rows]]
    path = tmp_path / "ncu.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_one_row_a_kernel_in_our_units_with_its_top_stalls(tmp_path):
    csv = _csv(
        tmp_path,
        [["0", "laya_gemm_geglu_bf16_t0_kernel", "10,624", "1,030.7", "15606", "19696", "6.4", "2.5", "9", "0"]],
    )
    steps = tmp_path / "steps.json"
    steps.write_text(json.dumps([["gemm_geglu_bf16", "laya_gemm_geglu_bf16_t0"]]))
    table = summary(csv, steps).splitlines()
    assert len(table) == 3
    cells = [c.strip() for c in table[2].split("|")]
    assert cells[2] == "gemm_geglu_bf16 laya_gemm_geglu_bf16_t0"
    assert cells[4] == "10.62"  # us, from ns
    assert cells[5] == "1.03"  # TB/s, from GB/s
    assert cells[8] == "79"  # the busiest SM's active share of the elapsed cycles, %
    # by cycles, the not-issued variant and a zero left out
    assert cells[-2] == "long_scoreboard 6.4, barrier 2.5"


def test_steps_go_unnamed_when_a_step_launched_more_kernels(tmp_path):
    """cuBLAS's split-K accumulate launches a GEMM and a reduction for one step: naming by position would shift."""
    row = ["0", "k", "1000", "1", "1", "2", "1", "1", "1", "1"]
    csv = _csv(tmp_path, [row, ["1", *row[1:]]])
    steps = tmp_path / "steps.json"
    steps.write_text(json.dumps([["gemm_mlp_out_acc_f32", "cublas-fp32-accumulate"]]))
    rows = summary(csv, steps).splitlines()[2:]
    assert [r.split("|")[2].strip() for r in rows] == ["", ""]
