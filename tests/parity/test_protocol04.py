"""Protocol 0.4.15: the engine answers as laya-serve 0.4.15 does on the same checkpoint, fp32 on the CPU.

Generated bodies exercise the request controls (max_len, head_max_len, min_confidence, task, lang, lang_guess),
option orders, the labels and levels 0.4 takes and refuses, and the request rules (a missing state, option counts,
hooks, paths for a model): the status must match, and a 200 must be the same JSON text (laya's `routing` left out).
Every checkpoint's token budget bounds max_len here (laya's own bound is 8192): larger ones are a 422 of ours.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings

from . import strategies as S
from .oracle04 import Laya04, assert_parity04

SETTINGS = dict(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
STATUSES = {200: 0, 400: 0, 413: 0, 422: 0}


@pytest.fixture(scope="session")
def laya04(checkpoint_dirs):
    started: dict[str, Laya04] = {}

    def get(size: str) -> Laya04:
        if size not in started:
            started[size] = Laya04(checkpoint_dirs[size])
        return started[size]

    yield get
    for server in started.values():
        server.close()


@settings(max_examples=600, **SETTINGS)
@given(payload=S.requests04())
@example(payload=S.ENTROPY_WIDENED)
@example(payload=S.KEYS_ALIKE)
def test_generated_bodies_answer_as_laya_serve_0_4_15(pair, laya04, payload):
    status = assert_parity04(laya04(pair.size), pair.engine, payload)
    STATUSES[status] += 1


def test_the_generated_bodies_were_answered_and_refused_in_every_way():
    """Premise of the test above (which runs first): a corpus that was mostly answered, and refused with each status."""
    assert STATUSES[200] >= 300 and all(STATUSES[s] > 0 for s in (400, 413, 422)), STATUSES
