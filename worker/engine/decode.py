"""Typed answers from one request's logits, with the reference's temperatures, fields and rounding.

The arithmetic is numpy on float32 logits, step for step as the reference does it: the rounded
answers must come out byte-identical, and the float32/float64 promotions below are part of that.
"""

from __future__ import annotations

import math

import numpy as np

from laya_common.model import QTYPES, ModelConfig
from worker.engine.sequences import Question

DIGITS = 4  # every probability and score is rounded to this many decimals


def decode_answers(
    config: ModelConfig, questions: list[Question], n_options: list[int], logits: np.ndarray, act_probs: np.ndarray
) -> dict:
    """Answers keyed by question id, in question order.

    logits: [R, K] float32, one row per question (padded options past each row's count), or a row per question
    of whatever length (rows from several passes); act_probs: [R, n_act] float32 softmax of the act head, or
    its rows.
    """
    answers = {}
    for r, (question, k) in enumerate(zip(questions, n_options, strict=True)):
        qtype = QTYPES[question.type]
        z = logits[r][:k] / config.temperature_for(qtype, k)
        p = np.exp(z - z.max())
        p = p / p.sum()
        action = {"act_probability": round(float(act_probs[r][0]), DIGITS)}
        answer_confidence = round(_top_probability(p, k), DIGITS)
        if question.type == "choice":
            labels = list(question.criteria)
            answers[question.qid] = {
                "type": "choice",
                "choice": labels[int(p.argmax())],
                "probabilities": {label: round(float(v), DIGITS) for label, v in zip(labels, p, strict=True)},
                "confidence": round(_entropy_confidence(p, k), DIGITS),
                "answer_confidence": answer_confidence,
                "action": action,
            }
        elif question.type == "score":
            answers[question.qid] = {
                "type": "score",
                "score": round(float((np.arange(k) * p).sum()), DIGITS),
                "legend": {str(i): level for i, level in enumerate(question.criteria)},
                "probabilities": {str(i): round(float(v), DIGITS) for i, v in enumerate(p)},
                "confidence": round(_entropy_confidence(p, k), DIGITS),
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
    return answers


def _top_probability(p: np.ndarray, k: int) -> float:
    """max(p): the calibrated confidence, the quantity temperature scaling fits."""
    if k < 1:
        return 1.0
    return _unit(p[:k].max())


def _entropy_confidence(p: np.ndarray, k: int) -> float:
    """1 - H(p) / log(k): how concentrated the distribution is (not calibrated)."""
    if k < 2:
        return 1.0
    p = p[:k]
    entropy = -(p * np.log(np.clip(p, 1e-12, 1.0))).sum()
    return _unit(1.0 - entropy / math.log(k))


def _unit(x: np.floating) -> float:
    """float(np.clip(x, 0.0, 1.0)) for a numpy scalar, without numpy's per-call cost (both bounds are exact
    in float32, so clipping before or after the conversion gives the same float)."""
    return min(max(float(x), 0.0), 1.0)
