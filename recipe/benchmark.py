"""The benchmark: five B=1 inputs, 20 warmups and 100 samples each, engine time and executor time (GPU).

    python -m recipe.benchmark --checkpoint CKPT --bundle BUNDLE --output OUT [--eager] [--original-rope]
                               [--executor cuda|reference] [--tilelang-only] [--[no-]split-k] [--torch-readout]
                               [--compare]

Engine time is `Engine.decide` from the request dict to typed answers (tokenizing, rows, the executor, the
readback and decoding; the answers are on the host when it returns); executor time is the cuda executor's
GPU events around the input copy, the graph replay (or the eager chain) and the readout. Startup, the
first capture of a shape and HTTP are outside the timing boundary: every input is warmed up first.

--compare runs, in the same process, the same inputs, warmups and samples through laya 0.3.20's stock
bf16 path, its fast path (TileLang, `accelerate()`) and laya-cuda 0.1.1.post1 on the same checkpoint,
and batch scoring: `Engine.decide_many` (and `decide_in_windows` as the worker scores a batch) against laya's fast
`predict_batch(batch_size=64)` on 1,000 states.

OUT (a fresh directory) holds samples.json (every sample of every system), summary.json (per input: each
system's median and p90, our ratio to each, the two floors, the matmul share), startup.log, requests.log,
provenance.json (git commit and dirty flag, sha256 of the library, manifest, checkpoint artifacts and
inputs, GPU, driver and clocks before and after, the kernel mapping loaded per shape) and benchmark.png.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

from recipe.bench_inputs import BATCH_QUESTIONS, INPUTS, batch_states
from recipe.provenance import versions
from worker.service.settings import ENV

WARMUPS, SAMPLES = 20, 100
OURS = "ours"


class Ours:
    """Our engine: engine time around decide (`Engine.start` then `finish`, as `decide` runs them), executor time
    the pass's own (the cuda executor's GPU events)."""

    def __init__(self, checkpoint: Path, executor: str, options) -> None:
        from worker.engine.engine import Engine

        self.engine = Engine(checkpoint, executor=executor, options=options)
        self.engine.warmup()
        self._executor_ms: float | None = None

    def decide(self, payload: dict) -> dict:
        answered = self.engine.finish(self.engine.start(payload))
        self._executor_ms = answered.executor_ms
        return answered.response

    def executor_ms(self) -> float | None:
        return self._executor_ms


class LayaAgent:
    """laya 0.3.20 on the GPU: its stock bf16 autocast path, or its TileLang fast path."""

    def __init__(self, checkpoint: Path, *, fast: bool) -> None:
        import laya

        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=RuntimeWarning)
            self.agent = laya.Agent(str(checkpoint), device="cuda")
        if fast:
            self.agent.accelerate(strict=True)

    def decide(self, payload: dict) -> dict:
        return self.agent.predict(payload["state"], payload["questions"])

    def executor_ms(self) -> None:
        return None


class LayaCuda:
    """laya-cuda 0.1.1.post1 (CuPy + cuBLAS, fp16) on the same checkpoint directory."""

    def __init__(self, checkpoint: Path) -> None:
        from laya_cuda import Engine

        self.engine = Engine(str(checkpoint))

    def decide(self, payload: dict) -> dict:
        return self.engine.predict(payload["state"], payload["questions"])

    def executor_ms(self) -> float | None:
        return self.engine.last_metrics.get("gpu_ms")


def time_input(system, payload: dict, *, warmups: int, samples: int, log) -> dict:
    import torch

    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    for _ in range(warmups):
        system.decide(payload)
    engine_ms, executor_ms = [], []
    for i in range(samples):
        sync()
        t0 = time.perf_counter()
        system.decide(payload)
        engine_ms.append((time.perf_counter() - t0) * 1e3)
        executor_ms.append(system.executor_ms())
        log(f"sample {i} engine_ms {engine_ms[-1]:.4f} executor_ms {executor_ms[-1]}")
    return {"engine_ms": engine_ms, "executor_ms": executor_ms}


def stats(values: list[float | None]) -> dict | None:
    values = [v for v in values if v is not None]
    if not values:
        return None
    ordered = sorted(values)
    return {
        "median": statistics.median(values),
        "p90": ordered[int(0.9 * (len(ordered) - 1))],
        "min": ordered[0],
        "max": ordered[-1],
    }


# ---- what the hardware allows, measured in the same run


def ceilings() -> dict:
    """bf16 matmul rate (TFLOP/s, 8192^3 on random data) and device copy bandwidth (TB/s, read + write)."""
    import torch

    n = 8192
    a, b = (torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    src = torch.randn(1 << 29, device="cuda", dtype=torch.float32)  # 2 GiB
    dst = torch.empty_like(src)

    def timed(fn, reps: int) -> float:
        for _ in range(3):
            fn()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3 / reps

    matmul_s = timed(lambda: a @ b, 20)
    copy_s = timed(lambda: dst.copy_(src), 20)
    return {"matmul_tflops": 2 * n**3 / matmul_s / 1e12, "copy_tbps": 2 * src.numel() * 4 / copy_s / 1e12}


def model_cost(cfg, row_tokens: list[int]) -> dict:
    """FLOPs the model needs for these rows (real tokens, no padding) and the fewest bytes it must move."""
    d, f, n_layers = cfg.hidden_size, cfg.intermediate_size, cfg.num_layers
    per_token = 2 * n_layers * d * (4 * d + 3 * f) + 2 * cfg.head_layers * 12 * d * d
    flops = per_token * sum(row_tokens)
    n_global = sum(t == "full_attention" for t in cfg.layer_types)
    for n in row_tokens:  # q k^T and p v: 4 n keys d per query, per layer
        flops += 4 * n * d * (n * (n_global + cfg.head_layers) + min(n, 2 * cfg.window + 1) * (n_layers - n_global))
    weight_bytes = 2 * (n_layers * d * (4 * d + 3 * f) + cfg.head_layers * 12 * d * d)
    stream_bytes = 8 * d * sum(row_tokens) * (n_layers + cfg.head_layers)  # the fp32 stream read + written per layer
    return {"flops": flops, "bytes": weight_bytes + stream_bytes}


# ---- provenance


def sha256(path: Path) -> str:
    from laya_common.checkpoint import sha256_file

    return sha256_file(path)


def gpu_state() -> dict:
    fields = "name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,temperature.gpu,power.draw,utilization.gpu"
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader"], capture_output=True, text=True, timeout=20
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError) as e:
        return {"error": str(e)}
    return dict(zip(fields.split(","), (v.strip() for v in out.split(",")), strict=False))


def provenance(checkpoint: Path, bundle: Path | None) -> dict:
    from laya_common.checkpoint import artifact_hashes

    inputs = json.dumps(INPUTS, sort_keys=True).encode()
    found = {
        "versions": versions(("laya-service", "torch", "laya", "laya-cuda", "tilelang", "transformers")),
        "checkpoint": {"path": str(checkpoint), "artifacts": artifact_hashes(checkpoint)},
        "inputs_sha256": hashlib.sha256(inputs).hexdigest(),
        "command": sys.argv,
    }
    if bundle is not None:
        found["bundle"] = {
            "path": str(bundle),
            "manifest_sha256": sha256(bundle / "manifest.json"),
            "library_sha256": sha256(bundle / "liblaya_kernels.so"),
        }
    return found


# ---- the run


def run_inputs(systems: dict, output: Path, *, warmups: int, samples: int) -> dict:
    samples_by_input = {}
    with open(output / "requests.log", "w") as log_file:
        for name, payload in INPUTS.items():
            samples_by_input[name] = {}
            for system_name, system in systems.items():

                def log(line: str, tag=f"{name} | {system_name}") -> None:
                    log_file.write(f"{tag} | {line}\n")

                samples_by_input[name][system_name] = time_input(
                    system, payload, warmups=warmups, samples=samples, log=log
                )
                median = statistics.median(samples_by_input[name][system_name]["engine_ms"])
                print(f"{name:22} {system_name:16} median {median:8.3f} ms", flush=True)
    return samples_by_input


def summarize(samples: dict, engine, ceiling: dict | None) -> dict:
    summary = {}
    for name, by_system in samples.items():
        rows = engine.prepare(INPUTS[name]).rows
        entry: dict = {"shape": f"{len(rows)}x{max(len(r.ids) for r in rows)}", "systems": {}}
        for system_name, s in by_system.items():
            entry["systems"][system_name] = {"engine": stats(s["engine_ms"]), "executor": stats(s["executor_ms"])}
        ours = entry["systems"][OURS]["engine"]["median"]
        entry["speedup"] = {
            other: round(v["engine"]["median"] / ours, 3) for other, v in entry["systems"].items() if other != OURS
        }
        if ceiling:
            cost = model_cost(engine.config, [len(r.ids) for r in rows])
            entry["floors_ms"] = {
                "flops": cost["flops"] / (ceiling["matmul_tflops"] * 1e12) * 1e3,
                "bytes": cost["bytes"] / (ceiling["copy_tbps"] * 1e12) * 1e3,
            }
            executor = entry["systems"][OURS]["executor"]
            if executor:
                entry["matmul_share"] = entry["floors_ms"]["flops"] / executor["median"]
                entry["over_bytes_floor"] = executor["median"] / entry["floors_ms"]["bytes"]
        summary[name] = entry
    return summary


def batch_scoring(systems: dict) -> dict:
    """States per second over 1,000 states (a noul and a 4-option choice each): ours and laya's fast path.

    Both return answers on the host, so the clock stops after the GPU work."""
    states = batch_states()
    result = {"states": len(states), "questions": list(BATCH_QUESTIONS)}
    payloads = [{"model": "english", "state": s, "questions": BATCH_QUESTIONS} for s in states]
    engine = systems[OURS].engine
    engine.decide_many(payloads[:64])
    t0 = time.perf_counter()
    engine.decide_many(payloads)
    result[f"{OURS}_decide_many"] = len(states) / (time.perf_counter() - t0)
    window = ENV["batch_chunk"].default  # as the worker scores a batch: windows of this many, prepared ahead
    t0 = time.perf_counter()
    for _ in engine.decide_in_windows(payloads, window):
        pass
    result[f"{OURS}_decide_in_windows_{window}"] = len(states) / (time.perf_counter() - t0)
    if "laya fast" in systems:
        agent = systems["laya fast"].agent
        agent.predict_batch(states[:64], BATCH_QUESTIONS, batch_size=64)
        t0 = time.perf_counter()
        agent.predict_batch(states, BATCH_QUESTIONS, batch_size=64)
        result["laya_fast_predict_batch_64"] = len(states) / (time.perf_counter() - t0)
        result["ratio"] = result[f"{OURS}_decide_many"] / result["laya_fast_predict_batch_64"]
    return result


def plot(samples: dict, path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("benchmark: matplotlib is not installed; no plot", file=sys.stderr)
        return
    names = list(samples)
    systems = list(samples[names[0]])
    fig, axes = plt.subplots(1, len(names), figsize=(4 * len(names), 4.5))
    for ax, name in zip(axes, names, strict=True):
        data = [samples[name][s]["engine_ms"] for s in systems]
        ax.boxplot(data, showfliers=True, whis=(10, 90))
        ax.set_xticks(range(1, len(systems) + 1), systems, rotation=35, ha="right", fontsize=8)
        ax.set_yscale("log")
        ax.set_title(name, fontsize=10)
        ax.set_ylabel("engine time, ms (log)")
        for i, d in enumerate(data, start=1):
            ax.annotate(f"{statistics.median(d):.2f}", (i, statistics.median(d)), fontsize=7, ha="center", va="bottom")
    fig.suptitle("B=1 engine time per input: median, box 25-75%, whiskers 10-90%")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(args: argparse.Namespace) -> int:
    import torch

    from worker.engine.executors import ExecutorOptions

    output: Path = args.output
    output.mkdir(parents=True)
    before = gpu_state()
    options = ExecutorOptions(
        bundle=args.bundle,
        eager=args.eager,
        original_rope=args.original_rope,
        cublas=not args.tilelang_only,
        torch_readout=args.torch_readout,
        split_k=args.split_k,
    )
    t0 = time.perf_counter()
    systems = {OURS: Ours(args.checkpoint, args.executor, options)}
    startup = [f"{OURS}: {systems[OURS].engine.startup_line()} (load + warmup {time.perf_counter() - t0:.1f} s)"]
    if args.compare:
        for name, make in (
            ("laya stock bf16", lambda: LayaAgent(args.checkpoint, fast=False)),
            ("laya fast", lambda: LayaAgent(args.checkpoint, fast=True)),
            ("laya-cuda", lambda: LayaCuda(args.checkpoint)),
        ):
            t0 = time.perf_counter()
            try:
                systems[name] = make()
                startup.append(f"{name}: loaded in {time.perf_counter() - t0:.1f} s")
            except Exception as e:  # a peer that cannot run here is reported, not fatal
                startup.append(f"{name}: could not start: {type(e).__name__}: {e}")
    (output / "startup.log").write_text("\n".join(startup) + "\n")
    print("\n".join(startup), flush=True)
    ceiling = ceilings() if torch.cuda.is_available() else None
    samples = run_inputs(systems, output, warmups=args.warmups, samples=args.samples)
    engine = systems[OURS].engine
    summary = {"ceilings": ceiling, "inputs": summarize(samples, engine, ceiling)}
    if args.compare:
        summary["batch_scoring"] = batch_scoring(systems)
    described = engine.executor.describe()
    record = provenance(args.checkpoint, args.bundle if engine.executor.name == "cuda" else None)
    record.update(
        gpu_before=before,
        gpu_after=gpu_state(),
        torch=torch.__version__,
        executor=described,
        kernel_mapping=engine.executor.mapping(),
        inputs=INPUTS,
        warmups=args.warmups,
        samples=args.samples,
    )
    (output / "samples.json").write_text(json.dumps(samples) + "\n")
    (output / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    (output / "provenance.json").write_text(json.dumps(record, indent=1) + "\n")
    plot(samples, output / "benchmark.png")
    print(json.dumps(summary, indent=1))
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m recipe.benchmark", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--checkpoint", type=Path, required=True, help="a full-size checkpoint")
    p.add_argument("--bundle", type=Path, help="a bundle verified against it (for the cuda executor)")
    p.add_argument("--output", type=Path, required=True, help="a directory that does not exist yet")
    p.add_argument("--executor", choices=("cuda", "reference"), default="cuda", help="our executor (default cuda)")
    p.add_argument("--eager", action="store_true", help="cuda executor without CUDA graphs")
    p.add_argument("--original-rope", action="store_true", help="cuda executor with the table RoPE")
    p.add_argument("--tilelang-only", action="store_true", help="every GEMM on the bundle's kernels (no cuBLAS)")
    p.add_argument(
        "--split-k",
        action=argparse.BooleanOptionalAction,
        help="the split-K GEMMs at every small M (--split-k) or nowhere (--no-split-k); default: the routing table",
    )
    p.add_argument(
        "--torch-readout", action="store_true", help="the scorer and act head in torch ops, not the readout kernels"
    )
    p.add_argument("--compare", action="store_true", help="also laya stock bf16, laya fast, laya-cuda; batch scoring")
    p.add_argument("--warmups", type=int, default=WARMUPS, help=f"warmup requests per input (default {WARMUPS})")
    p.add_argument("--samples", type=int, default=SAMPLES, help=f"timed requests per input (default {SAMPLES})")
    return p


if __name__ == "__main__":
    a = parser().parse_args()
    if a.output.exists():
        parser().error(f"{a.output} exists; give a fresh directory")
    if a.executor == "cuda" and a.bundle is None:
        parser().error("--executor cuda needs --bundle")
    sys.exit(main(a))
