"""Typed answers from one request's logits, with the reference's temperatures, fields and rounding.

The arithmetic is numpy on float32 logits, step for step as the reference does it: the rounded
answers must come out byte-identical, and the float32/float64 promotions below are part of that.
Protocol 0.4.15 (`Answering.protocol`) adds to that: probabilities mapped back from a question's option
order, levels as text in a score's legend, the min_confidence gate's fields, and Jev's own confidence.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from laya_common import protocol04
from laya_common.contract import V03, V04
from laya_common.model import QTYPES, ModelConfig
from worker.engine.sequences import Question, render_criterion

DIGITS = 4  # every probability and score is rounded to this many decimals
SEQUENTIAL_SUM = 8  # numpy's add.reduce sums fewer values than this in order, more pairwise (in blocks of 8)


def decode_answers(
    config: ModelConfig,
    questions: list[Question],
    n_options: list[int],
    logits: np.ndarray,
    act_probs: np.ndarray,
    *,
    protocol: str = V03,
    min_confidence: float | dict[str, float] | None = None,
) -> dict:
    """Answers keyed by question id, in question order.

    logits: [R, K] float32, one row per question (padded options past each row's count), or a row per question
    of whatever length (rows from several passes); act_probs: [R, n_act] float32 softmax of the act head, or
    its rows. Under protocol 0.4 a row's logits are in its question's option order, and `min_confidence`
    (None: no gate) gates every answer.
    """
    answers = {}
    numbers = _distributions(config, questions, n_options, logits, protocol)
    for r, (question, k, (p, best, top, concentration, mean_level)) in enumerate(
        zip(questions, n_options, numbers, strict=True)
    ):
        action = {"act_probability": round(float(act_probs[r][0]), DIGITS)}
        answer_confidence = round(top, DIGITS)
        if question.type == "choice":
            labels = list(question.criteria)
            answers[question.qid] = {
                "type": "choice",
                "choice": labels[best],
                "probabilities": {label: round(v, DIGITS) for label, v in zip(labels, p, strict=True)},
                "confidence": round(concentration, DIGITS),
                "answer_confidence": answer_confidence,
                "action": action,
            }
        elif question.type == "score":
            legend = question.criteria if protocol == V03 else [render_criterion(c) for c in question.criteria]
            answers[question.qid] = {
                "type": "score",
                "score": round(mean_level, DIGITS),
                "legend": {str(i): level for i, level in enumerate(legend)},
                "probabilities": {str(i): round(v, DIGITS) for i, v in enumerate(p)},
                "confidence": round(concentration, DIGITS),
                "answer_confidence": answer_confidence,
                "action": action,
            }
        else:
            p_true = p[1]
            answers[question.qid] = {
                "type": "noul",
                "noul": round(p_true, DIGITS),
                "confidence": round(max(p_true, 1.0 - p_true), DIGITS),
                "answer_confidence": answer_confidence,
                "action": action,
            }
        if protocol == V04:
            _add_v04_fields(answers[question.qid], k, min_confidence)
    return answers


class _Distribution(NamedTuple):
    """One question's option distribution and what its answer reads from it, as Python floats."""

    p: list[float]  # float32 probabilities in the question's option order
    best: int  # the most probable option
    top: float  # max(p): the calibrated confidence, the quantity temperature scaling fits
    concentration: float  # 1 - H(p) / log(k): how concentrated p is (not calibrated); 1.0 for one option
    mean_level: float  # sum(i * p_i): a score's expected level


def _distributions(
    config: ModelConfig, questions: list[Question], n_options: list[int], logits, protocol: str
) -> list[_Distribution]:
    """Each row's _Distribution, computed a group of rows at a time (`_groups`).

    Per element every step is the reference's one-row numpy arithmetic: the temperature divides in float32, the
    softmax, entropy and expected level reduce each row in its own order. laya 0.3.20 divides the float32 entropy
    by log(k) in float32, 0.4.15 widens it to float64 first: the fourth decimal can differ."""
    decoded: list[_Distribution | None] = [None] * len(questions)
    # the ufuncs' own reduce (not ndarray.sum, max) and only what a group's question types read: at a few rows
    # a group, numpy's fixed cost a call is most of the time here
    for rows in _groups(n_options):
        ks = [n_options[r] for r in rows]
        K, types = max(ks), {questions[r].type for r in rows}
        z = np.empty((len(rows), K), dtype=np.float32)
        z.fill(-np.inf)  # exp(-inf) = 0 past a row's options
        for i, (r, k) in enumerate(zip(rows, ks, strict=True)):
            z[i, :k] = logits[r][:k]
        temperatures = [config.temperature_for(QTYPES[questions[r].type], k) for r, k in zip(rows, ks, strict=True)]
        z /= np.array(temperatures, dtype=np.float32)[:, None]
        p = np.exp(z - np.maximum.reduce(z, axis=1, keepdims=True))
        p /= np.add.reduce(p, axis=1, keepdims=True)
        for i, (r, k) in enumerate(zip(rows, ks, strict=True)):
            order = questions[r].option_order
            if order is not None:  # slot s showed option order[s]
                p[i, list(order)] = p[i, :k].copy()
        concentration = mean_level = [1.0] * len(rows)
        if types - {"noul"}:
            entropy = -np.add.reduce(p * np.log(np.clip(p, 1e-12, 1.0)), axis=1)
            log_k = np.array([math.log(max(k, 2)) for k in ks], dtype=np.float32 if protocol == V03 else np.float64)
            widened = entropy if protocol == V03 else entropy.astype(np.float64)
            concentration = [1.0 if k < 2 else c for k, c in zip(ks, (1.0 - widened / log_k).tolist(), strict=True)]
        if "score" in types:
            mean_level = np.add.reduce(np.arange(K) * p, axis=1).tolist()
        for i, (r, k, values, best) in enumerate(zip(rows, ks, p.tolist(), p.argmax(axis=1).tolist(), strict=True)):
            decoded[r] = _Distribution(values[:k], best, _unit(values[best]), _unit(concentration[i]), mean_level[i])
    return decoded


def _groups(n_options: list[int]) -> list[list[int]]:
    """Rows (by index) whose arithmetic can run as one array each, unchanged. numpy sums fewer than
    SEQUENTIAL_SUM values one after another, so the zeros of a row padded to the group's width, added last, change
    none of its sums: rows of fewer options form one group. From SEQUENTIAL_SUM values on it sums in blocks
    (pairwise), which padding would move: those rows group by their exact count."""
    groups: dict[int, list[int]] = {}
    for r, k in enumerate(n_options):
        groups.setdefault(k if k >= SEQUENTIAL_SUM else 0, []).append(r)
    return list(groups.values())


def _add_v04_fields(answer: dict, k: int, min_confidence: float | dict[str, float] | None) -> None:
    """The gate's fields (when a min_confidence was given), then Jev's confidence on a choice or a score."""
    if min_confidence is not None:
        threshold = protocol04.threshold_for(min_confidence, answer["type"], k)
        low = answer["answer_confidence"] < threshold
        if low:
            answer["low_confidence"] = True
        answer["abstention"] = "abstained" if low else "passed"
        answer["abstention_threshold"] = float(threshold)
    if answer["type"] != "noul":
        answer["x_jev_confidence"] = round(
            jev_confidence(answer["type"], list(answer["probabilities"].values())), DIGITS
        )


def jev_confidence(answer_type: str, p: list[float]) -> float:
    """The confidence Jev's own adapter reports for rounded option probabilities `p` (a score's in level order):
    for a choice how far the top probability stands above uniform, for a score how little mass lies away from its
    mode against a uniform spread; 1.0 for a single option, and a zero total read as uniform. The float
    operations are those of laya 0.4.15's `laya.jev_confidence`, in its order: the rounded result must match."""
    n = len(p)
    if n == 1:
        return 1.0
    total = sum(p)
    p = [v / total for v in p] if total else [1.0 / n] * n
    if answer_type == "choice":
        return (max(p) - 1.0 / n) / (1.0 - 1.0 / n)
    mode = max(range(n), key=p.__getitem__)
    spread = sum(v * abs(i - mode) for i, v in enumerate(p))
    center = (n - 1) / 2
    uniform = sum(abs(i - center) for i in range(n)) / n
    return max(0.0, 1.0 - spread / uniform)


def _unit(x: float) -> float:
    """np.clip(x, 0.0, 1.0) of a float32 or float64 value held as a Python float, without numpy's per-call cost
    (both bounds are exact in float32, so clipping before or after the conversion gives the same float)."""
    return min(max(x, 0.0), 1.0)
