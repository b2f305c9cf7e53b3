"""Where the engine time of the benchmark inputs goes: host-side functions, and each launch of the GPU chain.

    python -m recipe.engine_profile --checkpoint CKPT --bundle BUNDLE --output OUT
    python -m recipe.engine_profile --checkpoint CKPT --host-only --output OUT   (any machine)

Host: the median of each stage of `Engine.decide` timed apart, the executor's launch split into its replay and
readout calls (OUT/host-stages.json), and `Engine.decide` of
each input under cProfile (50 calls after 10 warm-ups); OUT/host-<input>.txt holds the functions by
cumulative and by own time. GPU: for each input's bucket, every launch of the executor's
chain is captured alone, 20 times in a row, in a CUDA graph and replayed as `recipe.kernel_bench` replays
(3 warm-up, 20 timed); a launch's time is the median replay time / 20. OUT/chain.json holds every
launch's time; OUT/chain.md sums them by entry point per input.

--host-only: the host's stages and cProfile alone, without a GPU or a bundle. The engine runs recipe.paced_executor
over the reference executor (LAYA_PACE_INNER, LAYA_PACE_DEPTH apply), each input's passes taking --pace-ms, so
the host waits between its stages as it waits for a GPU (its caches cool while it waits), and "executor (GPU)" is
the paced pass's time; an input's first pass runs the reference's forward (tens of seconds at 16x512 on two cores).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import os
import pstats
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

from recipe.bench_inputs import INPUTS
from recipe.kernel_bench import graph_launch_times_us

REPEAT = 20  # launches of one step per graph
PACE_MS = (1.03, 1.65, 1.50, 4.62, 12.69)  # --host-only's passes: compare-h200-2026-12-07.json's executor times


def host_profile(engine, payload: dict) -> str:
    for _ in range(10):
        engine.decide(payload)
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(50):
        engine.decide(payload)
    profiler.disable()
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text)
    stats.sort_stats("cumulative").print_stats(30)
    stats.sort_stats("tottime").print_stats(20)
    return text.getvalue()


STAGES = ("prepare", "batch", "launch", "result", "decode", "decide")
# the cuda executor's calls inside its launch, timed apart: the graph's replay call and the readout's launches
LAUNCH_PARTS = {"launch: replay call": "_run", "launch: readout call": "readout"}


@contextlib.contextmanager
def timing_launch_parts(executor, times: dict[str, list[float]]) -> Iterator[None]:
    """While inside, each of LAUNCH_PARTS' calls on `executor` appends its host ms to `times`."""

    def timed(stage: str, call):
        def wrapper(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return call(*args, **kwargs)
            finally:
                times[stage].append((time.perf_counter() - t0) * 1e3)

        return wrapper

    own = {attribute: vars(executor)[attribute] for attribute in LAUNCH_PARTS.values() if attribute in vars(executor)}
    for stage, attribute in LAUNCH_PARTS.items():
        setattr(executor, attribute, timed(stage, getattr(executor, attribute)))
    try:
        yield
    finally:
        for attribute in LAUNCH_PARTS.values():
            delattr(executor, attribute)
        for attribute, value in own.items():  # the readout is the instance's own; `_run` is the class's method
            setattr(executor, attribute, value)


def host_stages(engine, payload: dict, samples: int = 200) -> dict[str, float]:
    """Median ms of each stage of `Engine.decide`, timed apart on the host (20 warm-ups): preparing the rows,
    the Batch, launching the pass (until the call returns; with the cuda executor also its replay and readout
    calls inside it), waiting for its result, decoding; then the whole `decide` and the executor's GPU time of
    its pass."""
    from worker.engine.batch import Batch

    times: dict[str, list[float]] = defaultdict(list)
    parts: dict[str, list[float]] = defaultdict(list)
    timing = timing_launch_parts(engine.executor, parts) if engine.executor.name == "cuda" else contextlib.nullcontext()
    with timing:
        for i in range(20 + samples):
            t = [time.perf_counter()]
            prepared = engine.prepare(payload)
            t.append(time.perf_counter())
            batch = Batch.from_rows(prepared.rows, engine.tokenizer.pad_id, engine.executor.admits)
            parts.clear()
            t.append(time.perf_counter())
            pending = engine.executor.launch(batch)
            t.append(time.perf_counter())
            launch_parts = {stage: ms[0] for stage, ms in parts.items()}  # before decide() below adds its own
            outputs = pending.result()
            t.append(time.perf_counter())
            engine._answer(prepared, outputs.logits, outputs.act_probs)
            t.append(time.perf_counter())
            engine.decide(payload)
            t.append(time.perf_counter())
            if i >= 20:
                for stage, start, end in zip(STAGES, t[:-1], t[1:], strict=True):
                    times[stage].append((end - start) * 1e3)
                for stage, ms in launch_parts.items():
                    times[stage].append(ms)
                if outputs.executor_ms is not None:
                    times["executor (GPU)"].append(outputs.executor_ms)
    return {stage: round(statistics.median(ms), 4) for stage, ms in times.items()}


def step_times_us(executor, key: tuple[int, int]) -> list[tuple[str, str, float]]:
    """(entry, what runs it, median us) for every launch of the bucket's chain, in chain order."""
    executor.warmup([key])  # valid inputs in place, the chain run once
    return [
        (step.entry, step.impl, statistics.median(graph_launch_times_us([step] * REPEAT)))
        for step in executor.plan(key)
    ]


def main(*, checkpoint: Path, bundle: Path | None, output: Path, pace_ms: list[float] | None = None) -> int:
    from worker.engine.engine import Engine
    from worker.engine.executors import ExecutorOptions

    output.mkdir(parents=True)
    if pace_ms is None:
        engine = Engine(checkpoint, executor="cuda", options=ExecutorOptions(bundle=bundle))
    else:
        os.environ.setdefault("LAYA_PACE_INNER", "reference")
        engine = Engine(checkpoint, executor="recipe.paced_executor:make")
    chain, lines = {}, ["| input | bucket | chain sum (ms) | top entry points (ms) |", "|---|---|---|---|"]
    stages = {}
    for (name, payload), pace in zip(INPUTS.items(), pace_ms or [None] * len(INPUTS), strict=True):
        if pace is not None:
            engine.executor.pass_s = pace / 1000  # recipe.paced_executor's time a pass
        stages[name] = host_stages(engine, payload)
        print(name, json.dumps(stages[name]), flush=True)
        if pace is not None:
            (output / f"host-{name.split()[0]}.txt").write_text(host_profile(engine, payload))
    (output / "host-stages.json").write_text(json.dumps(stages, indent=1) + "\n")
    if pace_ms is not None:
        return 0
    for name, payload in INPUTS.items():
        slug = name.split()[0]
        (output / f"host-{slug}.txt").write_text(host_profile(engine, payload))
        rows = engine.prepare(payload).rows
        key = (len(rows), engine.executor.admits.width(max(len(r.ids) for r in rows)))
        steps = step_times_us(engine.executor, key)
        by_entry: dict[str, float] = defaultdict(float)
        for entry, impl, us in steps:
            by_entry[f"{entry} ({impl})"] += us / 1e3
        chain[name] = {"bucket": f"{key[0]}x{key[1]}", "steps": steps, "by_entry_ms": dict(by_entry)}
        top = sorted(by_entry.items(), key=lambda kv: -kv[1])[:6]
        lines.append(
            f"| {name} | {key[0]}x{key[1]} | {sum(by_entry.values()):.3f} | "
            + ", ".join(f"{e} {ms:.3f}" for e, ms in top)
            + " |"
        )
        print(lines[-1], flush=True)
    (output / "chain.json").write_text(json.dumps({"command": sys.argv, "chain": chain}, indent=1) + "\n")
    (output / "chain.md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    p = argparse.ArgumentParser(
        prog="python -m recipe.engine_profile",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--checkpoint", type=Path, required=True, help="a full-size checkpoint")
    p.add_argument("--bundle", type=Path, help="a bundle verified against it (not with --host-only)")
    p.add_argument("--output", type=Path, required=True, help="a directory that does not exist yet")
    p.add_argument("--host-only", action="store_true", help="the host's stages alone, the passes paced (above)")
    p.add_argument(
        "--pace-ms",
        type=lambda text: [float(ms) for ms in text.split(",")],
        default=PACE_MS,
        help="with --host-only: each input's pass time in ms, comma-separated in the inputs' order "
        f"(default {','.join(map(str, PACE_MS))}: the H200's executor times at 6d8cea6)",
    )
    a = p.parse_args()
    if a.output.exists():
        p.error(f"{a.output} exists; give a fresh directory")
    if a.host_only == (a.bundle is not None):
        p.error("give --bundle, or --host-only without one")
    if len(a.pace_ms) != len(INPUTS):
        p.error(f"--pace-ms takes {len(INPUTS)} times, one for each input")
    pace_ms = a.pace_ms if a.host_only else None
    sys.exit(main(checkpoint=a.checkpoint, bundle=a.bundle, output=a.output, pace_ms=pace_ms))
