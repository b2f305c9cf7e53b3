"""Batch scoring A/B in one process: `Engine.decide_in_windows` of an older engine module against this tree's,
on one executor, alternating.

    python -m recipe.windows_ab --checkpoint CKPT --bundle BUNDLE --base-engine FILE --output OUT [--rounds 7]

FILE is an older `worker/engine.py` (e.g. `git show COMMIT:worker/engine.py > FILE`); it is loaded beside this
tree's and runs with this tree's other modules, so it measures a change to the engine alone. Both engines
share one cuda executor (CUDA graphs, warmed up once) and score the benchmark's 1,000 batch states in windows
of LAYA_BATCH_CHUNK's default, each window's results written as JSON as the worker stores them; the two
alternate for `--rounds` rounds after a warm-up each. Without `--bundle` the executor is the simulated GPU of
`recipe.window_sim` (speed $LAYA_SIM_SPEED), for a machine without one. Writes OUT/windows_ab.json: every
round's states per second and the share of it the GPU was busy (the executor's time of every pass), the
medians and the ratio.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path

from recipe.bench_inputs import BATCH_QUESTIONS, batch_states
from worker.contract import wire_json
from worker.version import version_info


def load_engine_class(path: Path) -> type:
    """The Engine class of the module at `path`, imported under a name of its own."""
    spec = importlib.util.spec_from_file_location("worker.engine_base", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.Engine


def scored(engine, payloads: list[dict], window: int) -> tuple[float, float]:
    """(states per second, the share of the wall time the GPU was busy) of scoring `payloads`."""
    busy0, t0 = engine.executor.gpu_ms_total, time.perf_counter()
    for _, results in engine.decide_in_windows(payloads, window):
        [wire_json(r) for r in results]  # what the worker stores for each result
    seconds = time.perf_counter() - t0
    return len(payloads) / seconds, (engine.executor.gpu_ms_total - busy0) / (1e3 * seconds)


def main(*, checkpoint: Path, bundle: Path | None, base_engine: Path, output: Path, rounds: int) -> int:
    from worker.engine import Engine
    from worker.executors import ExecutorOptions
    from worker.settings import ENV

    executor = "cuda" if bundle is not None else "recipe.window_sim:make"
    engines = {"this tree": Engine(checkpoint, executor=executor, options=ExecutorOptions(bundle=bundle))}
    engines["this tree"].warmup()
    engines["base"] = load_engine_class(base_engine)(checkpoint, executor=engines["this tree"].executor)
    payloads = [{"model": "english", "state": s, "questions": BATCH_QUESTIONS} for s in batch_states()]
    window = ENV["batch_chunk"].default
    for engine in engines.values():
        scored(engine, payloads[:256], window)
    samples: dict[str, list[float]] = {name: [] for name in ("base", "this tree")}
    busy: dict[str, list[float]] = {name: [] for name in samples}
    for r in range(rounds):
        for name in samples:
            rate, share = scored(engines[name], payloads, window)
            samples[name].append(rate)
            busy[name].append(share)
        line = ", ".join(f"{n} {samples[n][-1]:.0f} states/s (GPU busy {busy[n][-1]:.0%})" for n in samples)
        print(f"round {r + 1}: {line}", flush=True)
    medians = {name: statistics.median(s) for name, s in samples.items()}
    record = {
        "states": len(payloads),
        "window": window,
        "executor": engines["this tree"].executor.describe(),
        "samples_states_per_s": samples,
        "median_states_per_s": medians,
        "gpu_busy_share": busy,
        "median_gpu_busy_share": {name: statistics.median(s) for name, s in busy.items()},
        "ratio": medians["this tree"] / medians["base"],
        "base_engine": str(base_engine),
        "command": sys.argv,
        "version": version_info(),
    }
    output.mkdir(parents=True, exist_ok=True)
    (output / "windows_ab.json").write_text(json.dumps(record, indent=1) + "\n")
    print(f"median states/s: base {medians['base']:.0f}, this tree {medians['this tree']:.0f} ({record['ratio']:.3f}x)")
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m recipe.windows_ab", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--checkpoint", type=Path, required=True, help="a checkpoint (large: the benchmark's tokens)")
    p.add_argument("--bundle", type=Path, help="the cuda executor's bundle (default: the simulated GPU)")
    p.add_argument("--base-engine", type=Path, required=True, help="an older worker/engine.py to compare with")
    p.add_argument("--output", type=Path, required=True, help="directory for windows_ab.json")
    p.add_argument("--rounds", type=int, default=7, help="alternating rounds (default 7)")
    return p


if __name__ == "__main__":
    a = parser().parse_args()
    sys.exit(
        main(checkpoint=a.checkpoint, bundle=a.bundle, base_engine=a.base_engine, output=a.output, rounds=a.rounds)
    )
