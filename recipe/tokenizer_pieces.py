"""A long state tokenized whole against in pieces on the tokenizer's threads (worker.state_tokens), A/B in one process.

    python -m recipe.tokenizer_pieces --checkpoint CKPT --output OUT [--bundle BUNDLE]

For each state of the benchmark's inputs (recipe.bench_inputs.INPUTS: ms per `state_ids` call, need 512, 200
calls after 30 warm-ups) and for its 1,000 batch states (ms for all of them), every variant in turn, several
rounds: whole (one piece) and pieces of at least PIECE_CHARS characters, at most MAX_PIECES. Every variant's
ids are checked equal to the whole text's first. Prints the medians; writes OUT/tokenizer_pieces.json.

With --bundle (a GPU), the same variants end to end: `Engine.decide` on each input (engine time, 100 calls a
round) and `Engine.decide_in_windows` on the 1,000 batch states (states/s), the cuda executor with CUDA graphs,
where the tokenizer's threads sleep between requests as they do in a worker; written to OUT/engine.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

from laya_common.checkpoint import TOKENIZER
from recipe.bench_inputs import INPUTS, batch_states
from worker import state_tokens

# name -> (PIECE_CHARS, MAX_PIECES); None: the whole text in one call
VARIANTS = {
    "whole": None,
    "split 256/16": (256, 16),
    "split 512/8": (512, 8),
    "split 1024/8": (1024, 8),
    "split 384/4": (384, 4),
}
ENGINE_VARIANTS = {"whole": (1 << 30, 1), "split 256/16": (256, 16), "split 512/16": (512, 16)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", required=True, type=Path, help="a checkpoint directory (its tokenizer is used)")
    p.add_argument("--output", required=True, type=Path, help="directory for tokenizer_pieces.json")
    p.add_argument("--rounds", type=int, default=4, help="rounds over every variant (default 4)")
    p.add_argument("--bundle", type=Path, help="also time the engine end to end with this bundle (a CUDA GPU)")
    args = p.parse_args(argv)
    from tokenizers import Tokenizer

    backend = Tokenizer.from_file(str(args.checkpoint / TOKENIZER))
    prefix_safe, split_safe = state_tokens.cut_safe(backend)
    if not split_safe:
        p.error(f"{args.checkpoint / TOKENIZER}: the gate does not admit pieces for this tokenizer")

    def ids(text: str, variant: tuple[int, int] | None) -> list[int]:
        if variant is not None:
            state_tokens.PIECE_CHARS, state_tokens.MAX_PIECES = variant
        return state_tokens.state_ids(backend, text, 512, from_end=False, safe=prefix_safe, split=variant is not None)

    texts = {name: payload["state"] for name, payload in INPUTS.items()}
    batch = batch_states()
    for text in [*texts.values(), *batch]:
        whole = ids(text, None)
        assert all(ids(text, v) == whole for v in VARIANTS.values()), text[:80]
    samples = {name: {v: [] for v in VARIANTS} for name in [*texts, "1000 batch states"]}
    for _ in range(args.rounds):
        for name, variant in VARIANTS.items():
            for text_name, text in texts.items():
                for _ in range(30):
                    ids(text, variant)
                t0 = time.perf_counter()
                for _ in range(200):
                    ids(text, variant)
                samples[text_name][name].append((time.perf_counter() - t0) / 200 * 1e3)
            t0 = time.perf_counter()
            for text in batch:
                ids(text, variant)
            samples["1000 batch states"][name].append((time.perf_counter() - t0) * 1e3)
    report = {"cpus": os.cpu_count(), "medians_ms": medians(samples), "rounds_ms": samples}
    args.output.mkdir(parents=True, exist_ok=True)
    (args.output / "tokenizer_pieces.json").write_text(json.dumps(report, indent=1) + "\n")
    if args.bundle is not None:
        engine = engine_ab(args.checkpoint, args.bundle, args.rounds)
        (args.output / "engine.json").write_text(json.dumps(engine, indent=1) + "\n")
    return 0


def engine_ab(checkpoint: Path, bundle: Path, rounds: int) -> dict:
    """Engine time per input (ms) and decide_in_windows (states/s) for each ENGINE_VARIANTS, alternating."""
    from recipe.bench_inputs import BATCH_QUESTIONS
    from worker.engine import Engine
    from worker.executors import ExecutorOptions
    from worker.settings import ENV

    engine = Engine(checkpoint, executor="cuda", options=ExecutorOptions(bundle=bundle))
    engine.warmup()
    payloads = [{"model": "english", "state": s, "questions": BATCH_QUESTIONS} for s in batch_states()]
    window = ENV["batch_chunk"].default
    samples = {name: {v: [] for v in ENGINE_VARIANTS} for name in [*INPUTS, "decide_in_windows states/s"]}
    for _ in range(rounds):
        for variant, (piece_chars, max_pieces) in ENGINE_VARIANTS.items():
            state_tokens.PIECE_CHARS, state_tokens.MAX_PIECES = piece_chars, max_pieces
            for name, payload in INPUTS.items():
                for _ in range(10):
                    engine.decide(payload)
                for _ in range(100):
                    t0 = time.perf_counter()
                    engine.decide(payload)
                    samples[name][variant].append((time.perf_counter() - t0) * 1e3)
            t0 = time.perf_counter()
            for _ in engine.decide_in_windows(payloads, window):
                pass
            samples["decide_in_windows states/s"][variant].append(len(payloads) / (time.perf_counter() - t0))
    return {"medians": medians(samples), "samples": samples}


def medians(samples: dict[str, dict[str, list[float]]]) -> dict[str, dict[str, float]]:
    """Per measured thing, each variant's median; printed one line per thing."""
    found = {name: {v: statistics.median(s) for v, s in by.items()} for name, by in samples.items()}
    for name, by in found.items():
        print(f"{name:28s}", "  ".join(f"{v} {x:.3f}" for v, x in by.items()))
    return found


if __name__ == "__main__":
    raise SystemExit(main())
