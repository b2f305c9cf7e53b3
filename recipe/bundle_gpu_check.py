"""On a GPU machine: a full-size bundle end to end, and the reference executor's speed there.

Exports the RoPE tables on the GPU and again on the CPU and counts the elements that differ (the
reason tables must come from the GPU: bf16 rounding of cos/sin computed there), verifies the bundle
against the checkpoint, initializes every kernel through the loader, and times the fp32 reference
executor on two requests (median of 30 after 5 warmups, synchronized). Writes gpu_bundle_check.json.

    laya-bundle synthesize /tmp/large --size large && laya-bundle export-tables /tmp/large bundles/optimized
    python3 -m recipe.bundle_gpu_check --checkpoint /tmp/large --bundle bundles/optimized --output OUT
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from recipe.provenance import versions

TABLES = ("rope_global_cos", "rope_global_sin", "rope_local_cos", "rope_local_sin")
REQUESTS = {
    "1 noul, short state": {
        "state": "Please refund the duplicate charge on my card. " * 3,
        "questions": {"q": {"type": "noul", "instructions": "Refund?"}},
    },
    "16 choice, 512 tokens": {
        "state": "word " * 1000,
        "questions": {
            f"q{i}": {"type": "choice", "instructions": "Which topic?", "criteria": ["billing", "shipping", "other"]}
            for i in range(16)
        },
    },
}


def main(*, checkpoint: Path, bundle: Path, output: Path, warmups: int = 5, samples: int = 30) -> int:
    import torch

    from bundle import export_tables
    from bundle.loader import Kernels
    from bundle.verify import verify
    from worker.engine.engine import Engine
    from worker.engine.executors import ExecutorOptions

    output.mkdir(parents=True, exist_ok=True)
    result: dict = {
        "command": sys.argv,
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "versions": versions(("laya-service",)),
    }
    with tempfile.TemporaryDirectory() as tmp:
        cpu_bundle = Path(tmp)
        for name in ("manifest.json", "liblaya_kernels.so"):
            shutil.copy(bundle / name, cpu_bundle / name)
        export_tables.main(checkpoint=checkpoint, out=cpu_bundle, device="cpu")
        result["gpu_vs_cpu_tables"] = {
            name: _differences(bundle / f"{name}.f32", cpu_bundle / f"{name}.f32") for name in TABLES
        }
    result["verify_mismatches"] = [str(m) for m in verify(bundle, checkpoint)]
    Kernels(bundle).init()
    result["loader_init"] = "ok"
    engine = Engine(checkpoint, options=ExecutorOptions(device="cuda"))
    for name, payload in REQUESTS.items():
        for _ in range(warmups):
            engine.decide(payload)
        times = []
        for _ in range(samples):
            torch.cuda.synchronize()
            start = time.perf_counter()
            engine.decide(payload)
            torch.cuda.synchronize()
            times.append((time.perf_counter() - start) * 1e3)
        result[f"reference_fp32_ms[{name}]"] = {"median": statistics.median(times), "samples": times}
    (output / "gpu_bundle_check.json").write_text(json.dumps(result, indent=1) + "\n")
    print(
        json.dumps(
            {k: v["median"] if isinstance(v, dict) and "median" in v else v for k, v in result.items()}, indent=1
        )
    )
    return 0 if not result["verify_mismatches"] else 1


def _differences(a: Path, b: Path) -> dict:
    import torch

    ta = torch.frombuffer(bytearray(a.read_bytes()), dtype=torch.float32)
    tb = torch.frombuffer(bytearray(b.read_bytes()), dtype=torch.float32)
    return {"elements": ta.numel(), "differ": int((ta != tb).sum()), "max_abs": float((ta - tb).abs().max())}


def cli(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", type=Path, required=True, help="full-size checkpoint the bundle was built for")
    p.add_argument("--bundle", type=Path, required=True, help="bundle directory with exported tables")
    p.add_argument("--output", type=Path, required=True, help="directory for gpu_bundle_check.json")
    args = p.parse_args(argv)
    return main(checkpoint=args.checkpoint, bundle=args.bundle, output=args.output)


if __name__ == "__main__":
    sys.exit(cli())
