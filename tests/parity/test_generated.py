"""Generated requests: the engine's JSON equals laya 0.3.20's byte for byte, and it rejects what laya rejects.

Runs on both synthesized configs. Examples are derandomized, so CI sees the same inputs every run;
the counts keep the whole parity suite within a few minutes on two cores.
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from . import strategies as S
from .oracle import assert_parity, describe, expected, expected_many, ours, wire

SETTINGS = dict(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


@settings(max_examples=300, **SETTINGS)
@given(payload=S.requests(min_questions=1, max_questions=4))
def test_valid_requests_answer_like_the_reference(pair, payload):
    want = assert_parity(pair.oracle, pair.engine, payload)
    assert want is not None, "premise: every generated valid request is answered by the reference"


@settings(max_examples=60, **SETTINGS)
@given(type_name=st.sampled_from(["choice", "score", "noul"]), data=st.data())
def test_every_question_type_alone(pair, type_name, data):
    questions = {"choice": S.choice_questions, "score": S.score_questions, "noul": S.noul_questions}[type_name]
    question = data.draw(questions)
    payload = {"state": data.draw(S.states), "questions": {"q": question}}
    assert assert_parity(pair.oracle, pair.engine, payload) is not None


@settings(max_examples=150, **SETTINGS)
@given(payload=S.requests(questions=S.mixed_questions, min_questions=1, max_questions=4))
def test_mixed_valid_and_invalid_questions(pair, payload):
    assert_parity(pair.oracle, pair.engine, payload)


@settings(max_examples=120, **SETTINGS)
@given(bad=S.invalid_questions, good=st.lists(S.valid_questions, max_size=2), state=S.states, at=st.integers(0, 2))
def test_a_question_the_reference_rejects_is_a_422(pair, bad, good, state, at):
    questions = [(f"ok{i}", q) for i, q in enumerate(good)]
    questions.insert(min(at, len(questions)), ("bad", bad))
    payload = {"state": state, "questions": dict(questions)}
    assert expected(pair.oracle, payload) is None, "premise: the reference rejects this question"
    assert ours(pair.engine, payload) is None, f"engine answered a request the reference rejects: {wire(payload)}"


@settings(max_examples=60, **SETTINGS)
@given(payload=S.invalid_payloads)
def test_malformed_payloads_are_a_422(pair, payload):
    assert expected(pair.oracle, payload) is None, "premise: the service must refuse this payload"
    assert ours(pair.engine, payload) is None


@settings(max_examples=50, **SETTINGS)
@given(payloads=st.lists(S.requests(questions=S.mixed_questions, max_questions=3), min_size=1, max_size=5))
def test_decide_many_packs_payloads_like_the_reference(pair, payloads):
    """Batch scoring: each payload's response or 422 body, in order; the accepted payloads' rows (at most 15
    here, one forward pass) score exactly as laya scores the same rows packed together."""
    payloads = [wire(p) for p in payloads]
    want = expected_many(pair.oracle, payloads)
    got = pair.engine.decide_many([wire(p) for p in payloads])
    assert isinstance(got, list) and len(got) == len(payloads)
    for payload, result, text in zip(payloads, got, want, strict=True):
        if text is None:
            assert isinstance(result, dict) and result.get("status") == 422, f"expected a 422 body for {payload}"
            assert result.get("error") == "validation" and isinstance(result.get("detail"), str)
        else:
            assert "status" not in result, f"engine rejected {describe(payload)}: {result}"
            assert json.dumps(result) == text, f"answers differ for {describe(payload)}"


@settings(max_examples=25, **SETTINGS)
@given(
    states=st.lists(S.states, min_size=2, max_size=4),
    questions=st.dictionaries(S.question_ids, S.valid_questions, min_size=1, max_size=4),
)
def test_decide_many_matches_predict_batch(pair, states, questions):
    """One question set over several states (at most 16 rows): equal to the reference's `predict_batch`."""
    questions, states = wire(questions), wire(states)
    want = pair.oracle.predict_batch(states, questions)
    got = pair.engine.decide_many([{"state": s, "questions": questions} for s in states])
    assert [json.dumps(r) for r in got] == [json.dumps(r) for r in want]
