from __future__ import annotations

import pytest

from worker.commands.synthesize import synthesize


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory):
    return synthesize(tmp_path_factory.mktemp("tiny"), size="tiny", seed=0)


@pytest.fixture(scope="session")
def tiny_alt_checkpoint(tmp_path_factory):
    return synthesize(tmp_path_factory.mktemp("tiny-alt"), size="tiny-alt", seed=1)


@pytest.fixture(scope="session")
def engine(tiny_checkpoint):
    from worker.engine.engine import Engine

    return Engine(tiny_checkpoint)
