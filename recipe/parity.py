"""How far the cuda executor's answers are from fp32, next to how far laya 0.3.20's own bf16 path is (GPU).

    python -m recipe.parity --checkpoint CKPT --bundle BUNDLE --output OUT [--per-class 40]

Generates requests (seeded) in six classes: one noul; one choice of 2-5 options; one choice of 10-40
options; one score of 3-10 levels; 3-8 mixed questions; 2-5 questions over a long state (cut to max_len).
Each is answered by the fp32 reference executor on the GPU (the oracle), the cuda executor in CUDA
graphs with each RoPE mode, and laya 0.3.20's stock bf16 autocast path on the same GPU and weights.
Per class and system: max, p99 and rms of |dp| (every option probability of every question, as answered on
the wire) and the fraction of requests where some question's top answer differs from fp32's.
Writes OUT/parity.json (every request's distances, the summary, versions) and OUT/parity.md (the table).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import warnings
from pathlib import Path

import numpy as np

from recipe.bench_inputs import WORDS
from recipe.provenance import versions

CLASSES = ("noul", "choice-few", "choice-many", "score", "mixed", "long-state")


def words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def question(rng: random.Random, kind: str, n_options: int | None = None) -> dict:
    instructions = f"{words(rng, rng.randint(3, 12))}?"
    if kind == "noul":
        return {"type": "noul", "instructions": instructions}
    n = n_options or rng.randint(2, 5)
    labels = list(dict.fromkeys(f"{rng.choice(WORDS)}{i}" for i in range(n)))
    if kind == "choice":
        return {
            "type": "choice",
            "instructions": instructions,
            "criteria": {label: words(rng, rng.randint(0, 6)) or None for label in labels},
        }
    return {"type": "score", "instructions": instructions, "criteria": [words(rng, rng.randint(1, 5)) for _ in labels]}


def generate(per_class: int, seed: int = 0) -> list[tuple[str, dict]]:
    rng = random.Random(seed)
    made = []
    for _ in range(per_class):
        made += [
            ("noul", {"state": words(rng, rng.randint(20, 150)), "questions": {"q": question(rng, "noul")}}),
            (
                "choice-few",
                {
                    "state": words(rng, rng.randint(20, 150)),
                    "questions": {"q": question(rng, "choice", rng.randint(2, 5))},
                },
            ),
            (
                "choice-many",
                {
                    "state": words(rng, rng.randint(20, 150)),
                    "questions": {"q": question(rng, "choice", rng.randint(10, 40))},
                },
            ),
            (
                "score",
                {
                    "state": words(rng, rng.randint(20, 150)),
                    "questions": {"q": question(rng, "score", rng.randint(3, 10))},
                },
            ),
            (
                "mixed",
                {
                    "state": words(rng, rng.randint(20, 200)),
                    "questions": {
                        f"q{i}": question(rng, rng.choice(("noul", "choice", "score")))
                        for i in range(rng.randint(3, 8))
                    },
                },
            ),
            (
                "long-state",
                {
                    "state": words(rng, rng.randint(400, 900)),
                    "questions": {
                        f"q{i}": question(rng, rng.choice(("noul", "choice", "score")))
                        for i in range(rng.randint(2, 5))
                    },
                },
            ),
        ]
    return made


def probabilities(answer: dict) -> np.ndarray:
    """The option probabilities of one wire answer (a noul's as [p(false), p(true)])."""
    if answer["type"] == "noul":
        return np.array([1.0 - answer["noul"], answer["noul"]])
    return np.array(list(answer["probabilities"].values()))


def distances(got: dict, want: dict) -> tuple[list[float], bool]:
    """|dp| of every option probability, and whether some question's top answer differs."""
    dp, top_differs = [], False
    for qid, answer in want["answers"].items():
        p, q = probabilities(got["answers"][qid]), probabilities(answer)
        dp += np.abs(p - q).tolist()
        top_differs |= int(p.argmax()) != int(q.argmax())
    return dp, top_differs


class LayaStock:
    """laya 0.3.20's Agent on the GPU: its stock path, bf16 autocast (the checkpoint's amp_dtype)."""

    def __init__(self, checkpoint: Path) -> None:
        import laya

        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=RuntimeWarning)
            self.agent = laya.Agent(str(checkpoint), device="cuda")

    def decide(self, payload: dict) -> dict:
        return self.agent.predict(payload["state"], payload["questions"])


def systems(checkpoint: Path, bundle: Path) -> dict:
    from worker.engine.engine import Engine
    from worker.engine.executors import ExecutorOptions

    return {
        "cuda (graphs, fp32 RoPE)": Engine(checkpoint, executor="cuda", options=ExecutorOptions(bundle=bundle)),
        "cuda (graphs, original RoPE)": Engine(
            checkpoint, executor="cuda", options=ExecutorOptions(bundle=bundle, original_rope=True)
        ),
        "laya 0.3.20 stock bf16": LayaStock(checkpoint),
    }


def summarize(samples: list[dict], names: list[str]) -> dict:
    summary = {}
    for cls in CLASSES:
        rows = [s for s in samples if s["class"] == cls]
        summary[cls] = {"requests": len(rows)}
        for name in names:
            dp = np.concatenate([s["systems"][name]["dp"] for s in rows])
            summary[cls][name] = {
                "max_dp": float(dp.max()),
                "p99_dp": float(np.percentile(dp, 99)),
                "rms_dp": float(np.sqrt(np.mean(dp**2))),
                "top_differs": sum(s["systems"][name]["top_differs"] for s in rows) / len(rows),
            }
    return summary


def table(summary: dict, names: list[str]) -> str:
    head = "| class | requests | " + " | ".join(f"{n}: max / p99 / rms dp, top differs" for n in names) + " |"
    lines = [head, "|" + " --- |" * (2 + len(names))]
    for cls, row in summary.items():
        distance = {n: " / ".join(f"{row[n][k]:.4f}" for k in ("max_dp", "p99_dp", "rms_dp")) for n in names}
        cells = [f"{distance[n]}, {100 * row[n]['top_differs']:.1f}%" for n in names]
        lines.append(f"| {cls} | {row['requests']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(*, checkpoint: Path, bundle: Path, output: Path, per_class: int, seed: int) -> int:
    import torch

    from worker.engine.engine import Engine
    from worker.engine.executors import ExecutorOptions

    output.mkdir(parents=True)
    reference = Engine(checkpoint, executor="reference", options=ExecutorOptions(device="cuda"))
    compared = systems(checkpoint, bundle)
    requests = generate(per_class, seed)
    samples = []
    for i, (cls, payload) in enumerate(requests):
        want = reference.decide(payload)
        sample = {"class": cls, "payload": payload, "systems": {}}
        for name, system in compared.items():
            dp, top = distances(system.decide(payload), want)
            sample["systems"][name] = {"dp": dp, "top_differs": top}
        samples.append(sample)
        if (i + 1) % 60 == 0:
            print(f"parity: {i + 1}/{len(requests)} requests", file=sys.stderr, flush=True)
    names = list(compared)
    summary = summarize(samples, names)
    meta = {
        "command": sys.argv,
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "versions": versions(("laya-service", "laya", "transformers")),
        "checkpoint": str(checkpoint),
        "bundle": compared[names[0]].executor.describe()["bundle"],
        "per_class": per_class,
        "seed": seed,
    }
    (output / "parity.json").write_text(json.dumps({"meta": meta, "summary": summary, "samples": samples}) + "\n")
    text = table(summary, names)
    (output / "parity.md").write_text(text + "\n")
    print(text)
    return 0


def cli(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m recipe.parity", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--checkpoint", type=Path, required=True, help="a large (full-size) checkpoint")
    p.add_argument("--bundle", type=Path, required=True, help="a bundle verified against that checkpoint")
    p.add_argument("--output", type=Path, required=True, help="a directory that does not exist yet")
    p.add_argument("--per-class", type=int, default=40, help="requests per class (default 40: 240 in all)")
    p.add_argument("--seed", type=int, default=0, help="seed of the generated requests (default 0)")
    args = p.parse_args(argv)
    if args.output.exists():
        p.error(f"{args.output} exists; give a fresh directory")
    return main(
        checkpoint=args.checkpoint, bundle=args.bundle, output=args.output, per_class=args.per_class, seed=args.seed
    )


if __name__ == "__main__":
    sys.exit(cli())
