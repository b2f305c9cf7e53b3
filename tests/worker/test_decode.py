"""decode_answers computes a group of rows at a time, the short ones padded: the answers must be those of each
question decoded alone, byte for byte (the parity suites check one question alone against laya). It fails when
numpy's summation order moves (decode.SEQUENTIAL_SUM)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from laya_common.contract import V03, V04
from laya_common.model import ModelConfig
from worker.engine.decode import _distributions, decode_answers
from worker.engine.sequences import Question


def _questions(rng: np.random.Generator, n: int) -> list[Question]:
    questions = []
    for i in range(n):
        kind = ("choice", "score", "noul")[i % 3]
        k = 2 if kind == "noul" else int(rng.integers(1, 13))
        criteria = {f"c{j}": None for j in range(k)} if kind == "choice" else [f"level {j}" for j in range(k)]
        order = tuple(rng.permutation(k).tolist()) if i % 4 == 1 else None
        questions.append(Question(f"q{i}", kind, "?", None if kind == "noul" else criteria, ("no", "yes"), order))
    return questions


@pytest.mark.parametrize("protocol", [V03, V04])
def test_rows_decoded_together_answer_as_each_alone(protocol):
    rng = np.random.default_rng(3)
    config = ModelConfig.from_preset("tiny")
    questions = _questions(rng, 48)
    n_options = [2 if q.type == "noul" else len(q.criteria) for q in questions]
    logits = (rng.standard_normal((48, 12)) * rng.choice([0.1, 1.0, 8.0], size=(48, 1))).astype(np.float32)
    act_probs = rng.dirichlet(np.ones(4), size=48).astype(np.float32)
    options = dict(protocol=protocol, min_confidence=0.6 if protocol == V04 else None)
    together = decode_answers(config, questions, n_options, logits, act_probs, **options)
    alone = {}
    for r, question in enumerate(questions):
        alone |= decode_answers(config, [question], [n_options[r]], logits[r : r + 1], act_probs[r : r + 1], **options)
    # premise: short and long rows (one padded group; a group for each long count), option orders
    assert {1, 2, 7, 8, 11} <= set(n_options) and any(q.option_order for q in questions)
    assert json.dumps(together) == json.dumps(alone)
    # unrounded too: rounding to DIGITS hides most one-ulp differences, not all
    grouped = _distributions(config, questions, n_options, logits, protocol)
    for r, question in enumerate(questions):
        one = _distributions(config, [question], [n_options[r]], logits[r : r + 1], protocol)[0]
        assert _read(grouped[r], question.type) == _read(one, question.type)


def _read(numbers, kind: str) -> tuple:
    """What an answer of this kind reads of its _Distribution."""
    return (
        *numbers[:3],
        numbers.concentration if kind != "noul" else None,
        numbers.mean_level if kind == "score" else None,
    )
