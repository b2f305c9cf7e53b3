"""The generators reach every case issue 2 names (no model involved): a strategy that silently stopped
producing, say, conversation states would leave the parity tests green and the case untested."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings

from . import strategies as S

SAMPLE = 500  # examples drawn from each strategy, as the parity tests draw them (derandomized)
NON_ASCII = ("é", "日本語", "🙂", "ü", "ß", "п")


def _questions(p):
    return [q for q in p["questions"].values() if isinstance(q, dict)]


def _texts(value):
    """Every string inside a JSON value, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from _texts(v)
    elif isinstance(value, list):
        for v in value:
            yield from _texts(v)


def _has(value, needle) -> bool:
    return any(needle(t) for t in _texts(value))


def _mask(t):
    return S.MASK in t


def _non_ascii(t):
    return any(c in t for c in NON_ASCII)


def _words(t):
    return len(t.split())


def _choice_crit(p, test):
    return any(q.get("type") == "choice" and test(q["criteria"]) for q in _questions(p))


FEATURES = {
    "state: text over 600 words": lambda p: isinstance(p["state"], str) and _words(p["state"]) > 600,
    "state: empty string": lambda p: p["state"] == "",
    "state: empty object": lambda p: p["state"] == {},
    "state: empty list": lambda p: p["state"] == [],
    "state: JSON object": lambda p: isinstance(p["state"], dict) and len(p["state"]) >= 2,
    "state: long conversation": lambda p: isinstance(p["state"], list) and len(p["state"]) >= 8,
    "state: [MASK]": lambda p: _has(p["state"], _mask),
    "state: non-ASCII": lambda p: _has(p["state"], _non_ascii),
    "question id: [MASK]": lambda p: any(_mask(k) for k in p["questions"]),
    "question id: non-ASCII": lambda p: any(_non_ascii(k) for k in p["questions"]),
    "model given": lambda p: p.get("model") == "english",
    "every type in one request": lambda p: {q["type"] for q in _questions(p)} == {"choice", "score", "noul"},
    "instructions: [MASK]": lambda p: any(_has(q["instructions"], _mask) for q in _questions(p)),
    "instructions: non-ASCII": lambda p: any(_has(q["instructions"], _non_ascii) for q in _questions(p)),
    "instructions: not a string": lambda p: any(not isinstance(q["instructions"], str) for q in _questions(p)),
    "instructions: over 600 words": lambda p: any(
        _has(q["instructions"], lambda t: _words(t) > 600) for q in _questions(p)
    ),
    "choice: list criteria with duplicates": lambda p: _choice_crit(
        p, lambda c: isinstance(c, list) and len(set(c)) < len(c)
    ),
    "choice: single option": lambda p: _choice_crit(p, lambda c: len(c) == 1),
    "choice: None, '' and 0 values": lambda p: _choice_crit(
        p, lambda c: isinstance(c, dict) and {"null", '""', "0"} <= {json.dumps(v) for v in c.values()}
    ),
    "choice: nested value": lambda p: _choice_crit(
        p, lambda c: isinstance(c, dict) and any(isinstance(v, (dict, list)) and v for v in c.values())
    ),
    "choice: [MASK] in a key": lambda p: _choice_crit(p, lambda c: any(_mask(k) for k in c)),
    "choice: non-ASCII in a key": lambda p: _choice_crit(p, lambda c: any(_non_ascii(k) for k in c)),
    "choice: option over 48 words": lambda p: _choice_crit(p, lambda c: _has(c, lambda t: _words(t) > 48)),
    "choice: per-option budget path": lambda p: _choice_crit(
        p, lambda c: isinstance(c, dict) and sum(_words(f"{k} {v}") for k, v in c.items()) > 200
    ),
    "choice: 20 options or more": lambda p: _choice_crit(p, lambda c: len(c) >= 20),
    "score: nested level": lambda p: any(
        q["type"] == "score" and any(isinstance(c, (dict, list)) for c in q["criteria"]) for q in _questions(p)
    ),
    "score: level over 48 words": lambda p: any(
        q["type"] == "score" and _has(q["criteria"], lambda t: _words(t) > 48) for q in _questions(p)
    ),
    "noul: criteria omitted": lambda p: any(q["type"] == "noul" and "criteria" not in q for q in _questions(p)),
    "noul: criteria null": lambda p: any(
        q["type"] == "noul" and "criteria" in q and q["criteria"] is None for q in _questions(p)
    ),
    "noul: both keys": lambda p: any(
        q["type"] == "noul"
        and isinstance(q.get("criteria"), dict)
        and {k.lower() for k in q["criteria"]} == {"true", "false"}
        for q in _questions(p)
    ),
    "noul: key not lower case": lambda p: any(
        q["type"] == "noul" and isinstance(q.get("criteria"), dict) and any(k != k.lower() for k in q["criteria"])
        for q in _questions(p)
    ),
    "noul: labels": lambda p: any(isinstance(q.get("labels"), dict) for q in _questions(p)),
    "noul: labels null": lambda p: any("labels" in q and q["labels"] is None for q in _questions(p)),
    "noul: label with [MASK]": lambda p: any(
        isinstance(q.get("labels"), dict) and _has(q["labels"], _mask) for q in _questions(p)
    ),
    "noul: label with non-ASCII": lambda p: any(
        isinstance(q.get("labels"), dict) and _has(q["labels"], _non_ascii) for q in _questions(p)
    ),
    "noul: label padded with whitespace": lambda p: any(
        isinstance(q.get("labels"), dict) and any(v != v.strip() for v in q["labels"].values()) for q in _questions(p)
    ),
}


def _sample(strategy) -> list:
    drawn = []

    @settings(
        max_examples=SAMPLE, derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck)
    )
    @given(strategy)
    def draw(example):
        drawn.append(example)

    draw()
    return drawn


@pytest.fixture(scope="module")
def valid_sample():
    return _sample(S.requests(min_questions=1, max_questions=4))


@pytest.fixture(scope="module")
def invalid_sample():
    return _sample(S.invalid_questions)


@pytest.mark.parametrize("feature", list(FEATURES))
def test_valid_requests_reach(valid_sample, feature):
    assert any(FEATURES[feature](p) for p in valid_sample), f"no generated request has {feature!r}"


INVALID = {
    "not a dict": lambda q: not isinstance(q, dict),
    "unknown type": lambda q: isinstance(q, dict) and "type" in q and q["type"] not in ("choice", "score", "noul"),
    "no instructions": lambda q: isinstance(q, dict) and "instructions" not in q,
    "choice criteria empty": lambda q: (
        isinstance(q, dict) and q.get("type") == "choice" and q.get("criteria") in ({}, [])
    ),
    "choice list with a non-string": lambda q: (
        isinstance(q, dict)
        and q.get("type") == "choice"
        and isinstance(q.get("criteria"), list)
        and any(not isinstance(c, str) for c in q["criteria"])
    ),
    "score criteria a dict": lambda q: (
        isinstance(q, dict) and q.get("type") == "score" and isinstance(q.get("criteria"), dict)
    ),
    "noul keyed otherwise": lambda q: (
        isinstance(q, dict) and q.get("type") == "noul" and isinstance(q.get("criteria"), dict)
    ),
    "labels on a choice": lambda q: isinstance(q, dict) and q.get("type") == "choice" and "labels" in q,
    "labels equal once stripped": lambda q: (
        isinstance(q, dict)
        and isinstance(q.get("labels"), dict)
        and set(q["labels"]) == {"false", "true"}
        and all(isinstance(v, str) for v in q["labels"].values())
        and q["labels"]["false"].strip() == q["labels"]["true"].strip() != ""
    ),
    "a lone surrogate": lambda q: any("\ud800" <= c <= "\udfff" for t in _texts(q) for c in t),
    "options overflowing max_len": lambda q: (
        isinstance(q, dict) and isinstance(q.get("criteria"), list) and len(q["criteria"]) > 130
    ),
}


@pytest.mark.parametrize("case", list(INVALID))
def test_invalid_questions_reach(invalid_sample, case):
    assert any(INVALID[case](q) for q in invalid_sample), f"no generated question is {case!r}"
