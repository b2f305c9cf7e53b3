"""Session fixtures: two synthesized checkpoints, laya 0.3.20 on each (the oracle), our engine on each.

`tiny` is 4 layers with global attention every 3rd layer; `tiny-alt` is 3 layers, every 2nd, with
another window and other RoPE thetas, so configuration must come from the checkpoint's files.
Every parity test runs on both: the `pair` fixture is parametrized over them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .oracle import load_oracle

SIZES = ("tiny", "tiny-alt")
SEED = 0


@dataclass
class Pair:
    size: str
    checkpoint: Path
    oracle: Any  # laya.Agent, fp32 on CPU
    engine: Any  # worker.engine.engine.Engine, the reference executor

    @property
    def tok(self):
        """The checkpoint's tokenizer as laya loads it: tests use it to check their own premise."""
        return self.oracle.tok


@pytest.fixture(scope="session")
def checkpoint_dirs(tmp_path_factory) -> dict[str, Path]:
    from worker.commands.synthesize import synthesize

    root = tmp_path_factory.mktemp("checkpoints")
    return {size: Path(synthesize(root / size, size=size, seed=SEED)) for size in SIZES}


@pytest.fixture(scope="session")
def load_pair(checkpoint_dirs):
    """size -> Pair, each loaded once per session (oracle and engine take seconds to load)."""
    loaded: dict[str, Pair] = {}

    def load(size: str) -> Pair:
        if size not in loaded:
            from worker.engine.engine import Engine
            from worker.engine.executors import ExecutorOptions

            checkpoint = checkpoint_dirs[size]
            # fp32 on CPU on both sides, also on a machine with a GPU
            engine = Engine(checkpoint, executor="reference", options=ExecutorOptions(device="cpu"))
            loaded[size] = Pair(size, checkpoint, load_oracle(checkpoint), engine)
        return loaded[size]

    return load


@pytest.fixture(scope="session", params=SIZES)
def pair(request, load_pair) -> Pair:
    return load_pair(request.param)
