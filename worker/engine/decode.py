"""Typed answers from one request's logits, with the reference's temperatures, fields and rounding.

The arithmetic is numpy on float32 logits, step for step as the reference does it: the rounded
answers must come out byte-identical, and the float32/float64 promotions below are part of that.
Protocol 0.4.15 (`Answering.protocol`) adds to that: probabilities mapped back from a question's option
order, levels as text in a score's legend, the min_confidence gate's fields, and Jev's own confidence.
"""

from __future__ import annotations

import math

import numpy as np

from laya_common import protocol04
from laya_common.contract import V03, V04
from laya_common.model import QTYPES, ModelConfig
from worker.engine.sequences import Question, render_criterion

DIGITS = 4  # every probability and score is rounded to this many decimals


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
    for r, (question, k) in enumerate(zip(questions, n_options, strict=True)):
        qtype = QTYPES[question.type]
        z = logits[r][:k] / config.temperature_for(qtype, k)
        p = np.exp(z - z.max())
        p = p / p.sum()
        if question.option_order is not None:  # slot s showed option option_order[s]
            slots, p = p, np.empty_like(p)
            p[list(question.option_order)] = slots
        action = {"act_probability": round(float(act_probs[r][0]), DIGITS)}
        answer_confidence = round(_top_probability(p, k), DIGITS)
        if question.type == "choice":
            labels = list(question.criteria)
            answers[question.qid] = {
                "type": "choice",
                "choice": labels[int(p.argmax())],
                "probabilities": {label: round(float(v), DIGITS) for label, v in zip(labels, p, strict=True)},
                "confidence": round(_entropy_confidence(p, k, protocol), DIGITS),
                "answer_confidence": answer_confidence,
                "action": action,
            }
        elif question.type == "score":
            legend = question.criteria if protocol == V03 else [render_criterion(c) for c in question.criteria]
            answers[question.qid] = {
                "type": "score",
                "score": round(float((np.arange(k) * p).sum()), DIGITS),
                "legend": {str(i): level for i, level in enumerate(legend)},
                "probabilities": {str(i): round(float(v), DIGITS) for i, v in enumerate(p)},
                "confidence": round(_entropy_confidence(p, k, protocol), DIGITS),
                "answer_confidence": answer_confidence,
                "action": action,
            }
        else:
            p_true = float(p[1])
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


def _top_probability(p: np.ndarray, k: int) -> float:
    """max(p): the calibrated confidence, the quantity temperature scaling fits."""
    if k < 1:
        return 1.0
    return _unit(p[:k].max())


def _entropy_confidence(p: np.ndarray, k: int, protocol: str) -> float:
    """1 - H(p) / log(k): how concentrated the distribution is (not calibrated). laya 0.3.20 divides the float32
    entropy in float32, 0.4.15 widens it to float64 first: the fourth decimal can differ."""
    if k < 2:
        return 1.0
    p = p[:k]
    entropy = -(p * np.log(np.clip(p, 1e-12, 1.0))).sum()
    return _unit(1.0 - (entropy if protocol == V03 else float(entropy)) / math.log(k))


def _unit(x: np.floating) -> float:
    """float(np.clip(x, 0.0, 1.0)) for a numpy scalar, without numpy's per-call cost (both bounds are exact
    in float32, so clipping before or after the conversion gives the same float)."""
    return min(max(float(x), 0.0), 1.0)
