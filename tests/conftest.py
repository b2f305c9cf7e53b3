"""Shared test setup: fixed seeds, and the `gpu` marker skipping cleanly where no Hopper GPU is present."""

from __future__ import annotations

import os
import random

import pytest

os.environ.setdefault("PYTHONHASHSEED", "0")


def hopper_gpu_present() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available() and torch.cuda.get_device_capability() >= (9, 0)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if hopper_gpu_present():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU of compute capability 9.0 (H100/H200)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _seeded() -> None:
    random.seed(0)
