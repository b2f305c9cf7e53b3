"""How busy batch scoring keeps the GPU, on a machine without one: `Engine.decide_in_windows` over the
benchmark's 1,000 states with a simulated GPU.

    python -m recipe.window_sim --checkpoint CKPT --output OUT [--speed 2.5] [--window 256]

The simulated executor answers at once but hands each pass's outputs over only when a GPU that runs passes
one after another, each taking FIXED_MS + US_PER_TOKEN a padded token (the H200's chain at large M:
docs/performance.md), divided by `--speed`, would have finished it. The host work is real: tokenizing,
batching, decoding, and, as the worker does with each window, one JSON string per result and a Redis round
trip (simulated: APPEND_MS). This machine's Python runs about 2.5x faster than the H200 host's, so
`--speed 2.5` keeps the H200's ratio of host time to GPU time per state. Writes OUT/window_sim.json:
per run the wall time, the simulated GPU's busy time and its share.

`LAYA_EXECUTOR=recipe.window_sim:make` runs a whole service on the simulated GPU (speed `LAYA_SIM_SPEED`,
default 1), e.g. under `recipe.stack` with `recipe.batch_throughput`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from recipe.bench_inputs import BATCH_QUESTIONS, batch_states
from worker.batch import Admits, Executor, Outputs
from worker.version import version_info

FIXED_MS, US_PER_TOKEN = 0.25, 1.7  # one pass on the H200: fixed cost and per padded token (M >= 2,560)
APPEND_MS = 0.5  # the worker's Redis round trip appending a window's results
ROUNDS = 3


class SimulatedGPU(Executor):
    """An executor (with `launch`) whose passes finish on a simulated GPU's clock; answers are all equal."""

    name = "simulated"
    passes_in_flight = 2  # as the cuda executor

    def __init__(self, max_len: int, speed: float) -> None:
        self.admits = Admits(max_rows=16, max_tokens=max_len, token_step=16)  # the cuda executor's buckets
        self.speed, self.busy_until, self.busy_s = speed, 0.0, 0.0

    def launch(self, batch):
        seconds = (FIXED_MS * 1e-3 + US_PER_TOKEN * 1e-6 * batch.n_rows * batch.width) / self.speed
        self.busy_until = max(time.perf_counter(), self.busy_until) + seconds
        self.busy_s += seconds
        logits = np.where(batch.marker_mask, 0.0, -1e4).astype(np.float32)
        return _Finishing(self.busy_until, Outputs(logits, np.full((batch.n_rows, 3), 1 / 3, np.float32)))

    def forward(self, batch):
        return self.launch(batch).result()

    @property
    def gpu_ms_total(self) -> float:
        """As the cuda executor's: the simulated GPU's busy time so far."""
        return self.busy_s * 1e3

    def describe(self) -> dict:
        return {"executor": self.name, "speed": self.speed}


class _Finishing:
    def __init__(self, at: float, outputs: Outputs) -> None:
        self.at, self.outputs = at, outputs

    def result(self) -> Outputs:
        time.sleep(max(0.0, self.at - time.perf_counter()))
        return self.outputs


def run(engine, payloads: list[dict], window: int) -> dict:
    gpu = engine.executor
    gpu.busy_s = 0.0
    t0 = time.perf_counter()
    for _, results in engine.decide_in_windows(payloads, window):
        [json.dumps(r) for r in results]  # what the worker stores for each result
        time.sleep(APPEND_MS * 1e-3)
    wall = time.perf_counter() - t0
    return {
        "window": window,
        "wall_ms": round(wall * 1e3, 1),
        "gpu_busy_ms": round(gpu.busy_s * 1e3, 1),
        "gpu_busy_share": round(gpu.busy_s / wall, 3),
    }


def main(*, checkpoint: Path, output: Path, speed: float, windows: list[int]) -> int:
    from worker.engine import Engine

    engine = Engine(checkpoint, executor="recipe.window_sim:make")
    engine.executor.speed = speed
    payloads = [{"state": s, "questions": BATCH_QUESTIONS} for s in batch_states(1000)]
    run(engine, payloads[:64], 16)  # warm the tokenizer's caches
    runs = [run(engine, payloads, w) for w in windows for _ in range(ROUNDS)]
    for r in runs:
        print(
            f"window {r['window']}: {r['wall_ms']:.0f} ms, simulated GPU busy {r['gpu_busy_ms']:.0f} ms "
            f"({100 * r['gpu_busy_share']:.0f}%)"
        )
    output.mkdir(parents=True, exist_ok=True)
    record = {
        "speed": speed,
        "fixed_ms": FIXED_MS,
        "us_per_token": US_PER_TOKEN,
        "append_ms": APPEND_MS,
        "runs": runs,
        "command": sys.argv,
        "version": version_info(),
    }
    (output / "window_sim.json").write_text(json.dumps(record, indent=1) + "\n")
    return 0


def make(cfg, weights, *, checkpoint, options):
    """`LAYA_EXECUTOR`-style factory: the simulated GPU at speed $LAYA_SIM_SPEED (default 1; main sets its own)."""
    return SimulatedGPU(cfg.max_len, float(os.environ.get("LAYA_SIM_SPEED", "1")))


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m recipe.window_sim", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--checkpoint", type=Path, required=True, help="a checkpoint (large: the benchmark's tokens)")
    p.add_argument("--output", type=Path, required=True, help="directory for window_sim.json")
    p.add_argument("--speed", type=float, default=2.5, help="the simulated GPU's speed over the H200 model")
    p.add_argument("--window", type=int, action="append", help="LAYA_BATCH_CHUNK values to run (default 256)")
    return p


if __name__ == "__main__":
    args = parser().parse_args()
    sys.exit(main(checkpoint=args.checkpoint, output=args.output, speed=args.speed, windows=args.window or [256]))
