"""Named cases from issue 2, one test each, on both synthesized configs.

Each test checks its own premise against the reference's tokenizer or the reference itself (the
option really is past 48 tokens, the state really is truncated, the reference really accepts 17
questions), so it cannot quietly stop covering what its name says.
"""

from __future__ import annotations

import json

import pytest

from . import strategies as S
from .oracle import (
    EMPTY_RESPONSE,
    MAX_MARKERS,
    assert_parity,
    expected,
    oracle_result,
    ours,
    reference_accepts,
    wire,
)
from .strategies import MASK, WORDS

HEAD_MAX_LEN = 192  # rl_agent_config.json of the synthesized checkpoints
MAX_LEN = 512
OPTION_CAP = 48  # tokens of one option text the reference keeps


def words(n: int, offset: int = 0) -> str:
    return " ".join(WORDS[(offset + i) % len(WORDS)] for i in range(n))


def n_tokens(tok, text: str) -> int:
    return len(tok(text, add_special_tokens=False)["input_ids"])


def single_token_words(tok, n: int) -> list[str]:
    """`n` words that the tokenizer reads as one token after a space (an option of [MASK] + 1 token)."""
    vocab = sorted(t[1:] for t in tok.get_vocab() if t.startswith("Ġ") and t[1:].isascii() and t[1:].isalpha())
    found = [w for w in vocab if n_tokens(tok, " " + w) == 1]
    assert len(found) >= n, f"premise: the tokenizer has {n} single-token words, found {len(found)}"
    return found[:n]


def two_token_options(tok, n: int, salt: int = 0) -> list[str]:
    """`n` distinct options of two tokens each ([MASK] + 2 tokens in the row)."""
    base = single_token_words(tok, 40)
    options = [f"{base[(i + salt) % 40]} {base[(i // 40 + 7 * salt + 1) % 40]}" for i in range(n)]
    assert len(set(options)) == n and all(n_tokens(tok, " " + o) == 2 for o in options)
    return options


def check(pair, payload) -> dict:
    """Parity on `payload`, which the reference must answer; the reference's response."""
    want = assert_parity(pair.oracle, pair.engine, payload)
    assert want is not None, "premise: the reference answers this request"
    return json.loads(want)


def check_rejected(pair, payload, *, by_reference: bool = True):
    """The engine answers 422; `by_reference` says whether laya itself rejects it (else only the limits do)."""
    assert reference_accepts(pair.oracle, payload) != by_reference, "premise: who rejects this request"
    if by_reference:
        assert oracle_result(pair.oracle, payload) is None
    assert ours(pair.engine, payload) is None, "engine answered a request that must be a 422"


# ------------------------------------------------------------------------------------------- options


def test_options_past_48_tokens(pair):
    long_text = f"{words(90)} café 日本語 🙂 {MASK}"
    assert n_tokens(pair.tok, " " + long_text) > OPTION_CAP, "premise: the option text is past the cap"
    check(
        pair,
        {
            "state": "my card was charged twice",
            "questions": {
                "c": {"type": "choice", "instructions": "Which?", "criteria": {"refund": long_text, "other": None}},
                "s": {"type": "score", "instructions": "How bad?", "criteria": ["fine", long_text, "awful"]},
                "n": {"type": "noul", "instructions": "Fraud?", "criteria": {"true": long_text}},
                "k": {"type": "choice", "instructions": "Key?", "criteria": [long_text, "short"]},
            },
        },
    )


def test_per_option_budget_path(pair):
    """Options summing past head_max_len - 16 tokens are each cut to (192 - 16) // n tokens."""
    options = {f"opt{i}": words(30 + i, offset=i) for i in range(6)}
    total = sum(1 + min(OPTION_CAP, n_tokens(pair.tok, f" opt{i}: {t}")) for i, t in enumerate(options.values()))
    assert total > HEAD_MAX_LEN - 16, "premise: the options overflow the head budget"
    check(
        pair,
        {"state": words(50), "questions": {"q": {"type": "choice", "instructions": words(40), "criteria": options}}},
    )


def test_per_option_budget_floor_of_four_tokens(pair):
    """Many options: the per-option cut is max(4, 176 // n), so 60 options keep 4 tokens each."""
    options = [f"{w} {words(5, offset=i)}" for i, w in enumerate(single_token_words(pair.tok, 60))]
    check(
        pair, {"state": "short", "questions": {"q": {"type": "choice", "instructions": "Pick.", "criteria": options}}}
    )


def test_single_option_choice(pair):
    check(
        pair,
        {
            "state": "hello",
            "questions": {
                "dict": {"type": "choice", "instructions": "Only one", "criteria": {"only": "the only option"}},
                "list": {"type": "choice", "instructions": "Only one", "criteria": ["only"]},
                "dupes": {"type": "choice", "instructions": "One after de-duplication", "criteria": ["x", "x", "x"]},
                "score": {"type": "score", "instructions": "One level", "criteria": ["the only level"]},
            },
        },
    )


def _exact_words(tok, n: int, salt: int = 0) -> str:
    """A text of exactly `n` tokens after a leading space (one single-token word each)."""
    pool = single_token_words(tok, 100)
    text = " ".join(pool[(salt + 3 * i) % 100] for i in range(n))
    assert n_tokens(tok, " " + text) == n
    return text


@pytest.mark.parametrize(("lengths", "cut"), [((48, 42, 41, 41), False), ((48, 42, 42, 41), True)])
def test_per_option_budget_boundary(pair, lengths, cut):
    """Options of 176 row tokens leave a budget of exactly 16: no cut. At 177 each option is cut to 44 tokens
    (cutting the first option at 176 changes its probabilities, so an off-by-one cannot pass)."""
    options = [_exact_words(pair.tok, n, salt=i) for i, n in enumerate(lengths)]
    assert sum(1 + n for n in lengths) == HEAD_MAX_LEN - 16 + int(cut)
    check(
        pair,
        {
            "state": words(30),
            "questions": {
                "list": {"type": "choice", "instructions": words(40), "criteria": options},
                "dict": {"type": "choice", "instructions": words(40), "criteria": dict.fromkeys(options, "")},
            },
        },
    )


@pytest.mark.parametrize("state", ["a short state", [{"role": "user", "content": "left-truncated to nothing"}]])
def test_last_marker_at_max_len_minus_one_is_answered(pair, state):
    """168 options of 3 row tokens after a 10-token head: the last marker sits at 511, the row is cut at 512
    and no room is left for the state (a conversation's left cut must then keep none of it)."""
    options = two_token_options(pair.tok, 168)
    check(
        pair, {"state": state, "questions": {"q": {"type": "choice", "instructions": words(60), "criteria": options}}}
    )


def test_a_marker_at_max_len_is_rejected(pair):
    options = two_token_options(pair.tok, 169)
    check_rejected(
        pair, {"state": "x", "questions": {"q": {"type": "choice", "instructions": words(60), "criteria": options}}}
    )


def test_options_that_overflow_max_len_are_rejected(pair):
    """Past ~125 options of 4+ tokens the per-option cut cannot fit them: markers fall past max_len."""
    options = [f"{words(3, offset=i)} {i}" for i in range(200)]
    payload = {"state": "x", "questions": {"big": {"type": "choice", "instructions": "Pick.", "criteria": options}}}
    with pytest.raises(ValueError, match="options exceed head_max_len"):
        pair.oracle.predict(payload["state"], payload["questions"])
    check_rejected(pair, payload)


# ------------------------------------------------------------------------------------ criteria shapes


def test_choice_criteria_values(pair):
    """Only None and "" mean 'no description'; 0, False and structures are rendered as JSON."""
    check(
        pair,
        {
            "state": {"ticket": "refund please", "n": 0},
            "questions": {
                "values": {
                    "type": "choice",
                    "instructions": "Which?",
                    "criteria": {
                        "none": None,
                        "empty": "",
                        "zero": 0,
                        "false": False,
                        "true": True,
                        "float": 2.5,
                        "neg": -1,
                        "nested": {"desc": "a refund", "tags": ["money", None, 1.0e-7], "deep": {"x": {}}},
                        "list": [1, "two", [3]],
                        "emptydict": {},
                        "emptylist": [],
                        "text": "plain words",
                    },
                },
                "list": {"type": "choice", "instructions": "Which?", "criteria": ["b", "a", "b", "", " ", "a"]},
                "score": {
                    "type": "score",
                    "instructions": "Level?",
                    "criteria": [None, "", 0, False, {"d": "x"}, [1, 2]],
                },
            },
        },
    )


def test_noul_criteria_and_labels(pair):
    questions = {
        "omitted": {"type": "noul", "instructions": "Holds?"},
        "null": {"type": "noul", "instructions": "Holds?", "criteria": None},
        "empty": {"type": "noul", "instructions": "Holds?", "criteria": {}},
        "true_only": {"type": "noul", "instructions": "Holds?", "criteria": {"true": "it holds"}},
        "false_only": {"type": "noul", "instructions": "Holds?", "criteria": {"false": "it does not"}},
        "both": {"type": "noul", "instructions": "Holds?", "criteria": {"false": "no", "true": "yes"}},
        "cased": {"type": "noul", "instructions": "Holds?", "criteria": {"TRUE": "upper", "False": "title"}},
        "cased_twice": {"type": "noul", "instructions": "Holds?", "criteria": {"true": "a", "TRUE": "b"}},
        "blank": {"type": "noul", "instructions": "Holds?", "criteria": {"true": "", "false": None}},
        "zero": {"type": "noul", "instructions": "Holds?", "criteria": {"true": 0, "false": False}},
        "nested": {"type": "noul", "instructions": "Holds?", "criteria": {"true": {"because": ["x", 1]}}},
        "labels": {"type": "noul", "instructions": "Holds?", "labels": {"false": "B", "true": "A"}},
        "labels_null": {"type": "noul", "instructions": "Holds?", "labels": None},
        "labels_strip": {
            "type": "noul",
            "instructions": "Holds?",
            "labels": {"false": " no\u00a0", "true": "\u3000yes "},
        },
        "labels_both": {
            "type": "noul",
            "instructions": "Holds?",
            "criteria": {"true": "t"},
            "labels": {"true": "日本語 🙂", "false": f"non {MASK}"},
        },
    }
    check(pair, {"state": "The customer asks for a refund.", "questions": questions})


def test_non_string_instructions(pair):
    check(
        pair,
        {
            "state": "x",
            "questions": {
                "dict": {"type": "noul", "instructions": {"ask": "Is it urgent?", "lang": "日本語"}},
                "list": {"type": "noul", "instructions": ["a", 1, None]},
                "number": {"type": "noul", "instructions": 42},
                "null": {"type": "noul", "instructions": None},
                "bool": {"type": "noul", "instructions": False},
                "empty": {"type": "noul", "instructions": ""},
                "mask": {"type": "noul", "instructions": MASK},
            },
        },
    )


def test_non_finite_and_huge_numbers(pair):
    """Python's json reads NaN and Infinity; laya renders them (and 100-digit integers) with json.dumps."""
    nan, inf = float("nan"), float("inf")
    check(
        pair,
        {
            "state": {"x": nan, "y": -inf, "big": 10**100},
            "questions": {
                "s": {"type": "score", "instructions": {"n": nan}, "criteria": [nan, inf, 10**100, -0.0, 1e-300]},
                "c": {"type": "choice", "instructions": "x", "criteria": {"a": nan, "b": -inf, "c": 2**64}},
                "n": {"type": "noul", "instructions": inf, "criteria": {"true": nan}},
            },
        },
    )


def test_extra_payload_keys_are_ignored(pair):
    check(pair, {"model": "english", "state": "x", "questions": {"q": _Q}, "id": "abc", "lang": "de", "meta": {}})


def test_extra_question_keys_are_ignored(pair):
    check(
        pair,
        {
            "state": "x",
            "questions": {
                "q": {"type": "choice", "instructions": "Pick.", "criteria": ["a", "b"], "note": {"x": 1}, "weight": 2},
            },
        },
    )


# ------------------------------------------------------------------------------------------- text


def test_mask_and_non_ascii_in_every_text(pair):
    t = f"café {MASK} 日本語 🙂 {MASK}{MASK} привет"
    check(
        pair,
        {
            "model": "english",
            "state": {t: [t, {"turn": t}]},
            "questions": {
                t: {"type": "choice", "instructions": t, "criteria": {t: t, f"{MASK}": None, "ключ": {"d": t}}},
                f"{t}-s": {"type": "score", "instructions": {t: t}, "criteria": [t, MASK, "日本語"]},
                f"{t}-n": {
                    "type": "noul",
                    "instructions": t,
                    "criteria": {"true": t, "false": MASK},
                    "labels": {"false": f"{MASK} ✗", "true": "✓ café"},
                },
                "list": {"type": "choice", "instructions": MASK, "criteria": [t, MASK, "🙂"]},
            },
        },
    )


def test_question_order_is_preserved(pair):
    ids = ["b", "a", "10", "2", "日本", ""]
    questions = {qid: {"type": "noul", "instructions": f"Question {qid}?"} for qid in ids}
    want = check(pair, {"state": "x", "questions": questions})
    assert list(want["answers"]) == ids


# ------------------------------------------------------------------------------------------- states


@pytest.mark.parametrize("state", ["", " ", {}, [], [""], [{}], {"a": None}, MASK, f"{MASK} café 日本語 🙂"])
def test_empty_and_odd_states(pair, state):
    check(pair, {"state": state, "questions": {"q": {"type": "noul", "instructions": "Holds?"}}})


@pytest.mark.parametrize("state", [0, 3.5, -1, True, False, None])
def test_scalar_states_answer_like_the_reference(pair, state):
    """laya serializes any JSON value as the state (json.dumps), so a scalar state is answered, not rejected."""
    check(pair, {"state": state, "questions": {"q": {"type": "noul", "instructions": "Holds?"}}})


def _conversation(n_turns: int) -> list:
    roles = ["user", "assistant"]
    return [{"role": roles[i % 2], "content": f"turn {i}: {words(60, offset=7 * i)}"} for i in range(n_turns)]


def test_conversation_state_is_truncated_from_the_left(pair):
    state = _conversation(20)
    serialized = json.dumps(state, ensure_ascii=False)
    assert n_tokens(pair.tok, serialized) > 2 * MAX_LEN, "premise: the conversation is past max_len"
    questions = {
        "n": {"type": "noul", "instructions": "Angry?"},
        "c": {"type": "choice", "instructions": "Why?", "criteria": ["refund", "bug", "price"]},
    }
    want = check(pair, {"state": state, "questions": questions})
    assert want["usage"]["input_tokens"] == 2 * MAX_LEN, "premise: every row is cut to max_len"
    # the same text as one string is cut on the right: a different row, so a different answer
    right = expected(pair.oracle, {"state": serialized, "questions": questions})
    assert right != json.dumps(want), "premise: left and right truncation answer differently here"


def test_long_text_state_is_truncated_from_the_right(pair):
    state = f"{words(700)} {MASK} café 日本語 🙂"
    questions = {
        "n": {"type": "noul", "instructions": "Angry?"},
        "s": {"type": "score", "instructions": "How?", "criteria": ["a", "b", "c"]},
    }
    want = check(pair, {"state": state, "questions": questions})
    assert want["usage"]["input_tokens"] == 2 * MAX_LEN, "premise: every row is cut to max_len"
    left = expected(pair.oracle, {"state": [state], "questions": questions})
    assert left != json.dumps(want), "premise: left and right truncation answer differently here"


def test_long_instructions_are_cut(pair):
    check(
        pair,
        {
            "state": words(20),
            "questions": {
                "n": {"type": "noul", "instructions": words(400)},
                "c": {
                    "type": "choice",
                    "instructions": words(300),
                    "criteria": {f"o{i}": words(20, i) for i in range(8)},
                },
            },
        },
    )


# ---------------------------------------------------------------------------------- request limits


@pytest.mark.parametrize("state", ["x", None, [], {}])
def test_empty_questions_answer_nothing(pair, state):
    want = check(pair, {"state": state, "questions": {}})
    assert want == EMPTY_RESPONSE


def _mixed_questions(n: int) -> dict:
    kinds = [
        {"type": "noul", "instructions": "Urgent?"},
        {"type": "choice", "instructions": "Topic?", "criteria": ["refund", "bug", "price", "other"]},
        {"type": "score", "instructions": "Anger?", "criteria": ["calm", "annoyed", "angry"]},
        {"type": "choice", "instructions": "Next?", "criteria": {"reply": "answer now", "escalate": None}},
    ]
    return {f"q{i}": kinds[i % len(kinds)] for i in range(n)}


def test_sixteen_questions_are_answered(pair):
    check(pair, {"state": words(600), "questions": _mixed_questions(16)})


def test_seventeen_questions_are_a_422(pair):
    check_rejected(pair, {"state": "x", "questions": _mixed_questions(17)}, by_reference=False)


def _choices(pair, sizes: list[int]) -> dict:
    return {
        f"q{i}": {"type": "choice", "instructions": "Pick one.", "criteria": two_token_options(pair.tok, n, salt=i)}
        for i, n in enumerate(sizes)
    }


def test_2048_markers_are_answered(pair):
    questions = _choices(pair, [150] * 13 + [96])
    questions["n"] = {"type": "noul", "instructions": "Holds?"}  # a noul counts 2 markers
    assert MAX_MARKERS == 13 * 150 + 96 + 2
    check(pair, {"state": "x", "questions": questions})


def test_2049_markers_with_a_noul_are_a_422(pair):
    questions = _choices(pair, [150] * 13 + [97])
    questions["n"] = {"type": "noul", "instructions": "Holds?"}
    check_rejected(pair, {"state": "x", "questions": questions}, by_reference=False)


def test_2049_markers_with_a_score_are_a_422(pair):
    questions = _choices(pair, [150] * 13 + [96])
    questions["s"] = {"type": "score", "instructions": "Level?", "criteria": ["a", "b", "c"]}  # 3 levels
    check_rejected(pair, {"state": "x", "questions": questions}, by_reference=False)


def test_markers_count_choice_lists_after_de_duplication(pair):
    """16 lists of 256 entries each de-duplicate to 128 options: 2048 markers, answered."""
    questions = {}
    for i in range(16):
        options = two_token_options(pair.tok, 128, salt=i)
        questions[f"q{i}"] = {"type": "choice", "instructions": "Pick.", "criteria": options + options[::-1]}
    check(pair, {"state": "x", "questions": questions})


def test_16_choices_of_129_options_are_a_422(pair):
    check_rejected(pair, {"state": "x", "questions": _choices(pair, [129] * 16)}, by_reference=False)


# ---------------------------------------------------------------------------------------- rejections

_Q = {"type": "noul", "instructions": "Holds?"}
REJECTED_QUESTIONS = {
    "not a dict": "noul",
    "list": [_Q],
    "null": None,
    "unknown type": {"type": "bool", "instructions": "x"},
    "type in capitals": {"type": "Choice", "instructions": "x", "criteria": ["a"]},
    "no type": {"instructions": "x"},
    "list type": {"type": ["noul"], "instructions": "x"},
    "no instructions": {"type": "noul"},
    "choice without criteria": {"type": "choice", "instructions": "x"},
    "choice with null criteria": {"type": "choice", "instructions": "x", "criteria": None},
    "choice with empty dict": {"type": "choice", "instructions": "x", "criteria": {}},
    "choice with empty list": {"type": "choice", "instructions": "x", "criteria": []},
    "choice with string criteria": {"type": "choice", "instructions": "x", "criteria": "a, b"},
    "choice list with a number": {"type": "choice", "instructions": "x", "criteria": ["a", 1]},
    "choice list with null": {"type": "choice", "instructions": "x", "criteria": ["a", None]},
    "choice list with a bool": {"type": "choice", "instructions": "x", "criteria": [True, "a"]},
    "choice list with a float": {"type": "choice", "instructions": "x", "criteria": ["a", 0.5]},
    "choice list with a dict": {"type": "choice", "instructions": "x", "criteria": ["a", {"b": 1}]},
    "choice list with a list": {"type": "choice", "instructions": "x", "criteria": [["a"]]},
    "score with a dict": {"type": "score", "instructions": "x", "criteria": {"0": "low"}},
    "score with empty list": {"type": "score", "instructions": "x", "criteria": []},
    "score without criteria": {"type": "score", "instructions": "x"},
    "noul with a list": {"type": "noul", "instructions": "x", "criteria": ["no", "yes"]},
    "noul with a string": {"type": "noul", "instructions": "x", "criteria": "yes"},
    "noul with false": {"type": "noul", "instructions": "x", "criteria": False},
    "noul keyed yes/no": {"type": "noul", "instructions": "x", "criteria": {"yes": "a", "no": "b"}},
    "noul with one bad key": {"type": "noul", "instructions": "x", "criteria": {"true": "a", "maybe": "b"}},
    "choice with labels": {
        "type": "choice",
        "instructions": "x",
        "criteria": ["a"],
        "labels": {"false": "n", "true": "y"},
    },
    "choice with null labels": {"type": "choice", "instructions": "x", "criteria": ["a"], "labels": None},
    "score with labels": {
        "type": "score",
        "instructions": "x",
        "criteria": ["a"],
        "labels": {"false": "n", "true": "y"},
    },
    "labels not a dict": {**_Q, "labels": ["n", "y"]},
    "labels missing true": {**_Q, "labels": {"false": "n"}},
    "labels with extra key": {**_Q, "labels": {"false": "n", "true": "y", "maybe": "m"}},
    "labels keyed True": {**_Q, "labels": {"False": "n", "True": "y"}},
    "labels not strings": {**_Q, "labels": {"false": 0, "true": 1}},
    "labels empty": {**_Q, "labels": {"false": "", "true": "y"}},
    "labels blank": {**_Q, "labels": {"false": "n", "true": "\u3000 "}},
    "labels equal": {**_Q, "labels": {"false": "same", "true": "same"}},
    "labels equal once stripped": {**_Q, "labels": {"false": " same", "true": "same\u00a0"}},
}


@pytest.mark.parametrize("name", list(REJECTED_QUESTIONS))
def test_a_question_the_reference_rejects_is_a_422(pair, name):
    payload = {"state": "x", "questions": {"ok": _Q, name: REJECTED_QUESTIONS[name]}}
    check_rejected(pair, payload)


@pytest.mark.parametrize("name", ["unknown type", "choice list with a number", "labels equal", "noul keyed yes/no"])
def test_a_rejected_question_is_named_in_the_error(pair, name):
    """DESIGN.md: a 422 names the offending field, so the caller knows which question to fix."""
    from laya_common.contract import RequestError

    with pytest.raises(RequestError) as info:
        pair.engine.decide(wire({"state": "x", "questions": {"ok": _Q, "bad-q": REJECTED_QUESTIONS[name]}}))
    assert info.value.field is not None and "bad-q" in info.value.field, f"field {info.value.field!r}"


LONE = "\ud800"  # a valid JSON escape ("\\ud800") that is not a character: the tokenizer refuses it
SURROGATE_PAYLOADS = {
    "state": {"state": f"a {LONE} b", "questions": {"q": _Q}},
    "state object key": {"state": {LONE: 1}, "questions": {"q": _Q}},
    "conversation turn": {"state": [{"role": "user", "content": LONE}], "questions": {"q": _Q}},
    "instructions": {"state": "x", "questions": {"q": {"type": "noul", "instructions": f"why {LONE}"}}},
    "instructions object": {"state": "x", "questions": {"q": {"type": "noul", "instructions": {"k": LONE}}}},
    "choice label": {"state": "x", "questions": {"q": {"type": "choice", "instructions": "x", "criteria": [LONE]}}},
    "choice description": {
        "state": "x",
        "questions": {"q": {"type": "choice", "instructions": "x", "criteria": {"a": LONE, "b": None}}},
    },
    "score level": {"state": "x", "questions": {"q": {"type": "score", "instructions": "x", "criteria": ["a", LONE]}}},
    "noul criterion": {
        "state": "x",
        "questions": {"q": {"type": "noul", "instructions": "x", "criteria": {"true": LONE}}},
    },
    "noul label": {"state": "x", "questions": {"q": {**_Q, "labels": {"false": LONE, "true": "y"}}}},
}


@pytest.mark.parametrize("where", list(SURROGATE_PAYLOADS))
def test_a_lone_surrogate_in_a_tokenized_text_is_a_422(pair, where):
    """The reference's tokenizer raises on it, so laya rejects the request; the engine must answer 422, not fail."""
    check_rejected(pair, SURROGATE_PAYLOADS[where])


def test_a_lone_surrogate_in_a_question_id_is_answered(pair):
    """Question ids are echoed, never tokenized: the reference answers."""
    check(pair, {"state": "x", "questions": {LONE: _Q, f"b{LONE}": _Q}})


REJECTED_PAYLOADS = {
    "a list": [{"state": "x", "questions": {}}],
    "a string": "hello",
    "null": None,
    "a number": 3,
    "no state": {"questions": {"q": _Q}},
    "no questions": {"state": "x"},
    "no state, empty questions": {"questions": {}},
    "questions a list": {"state": "x", "questions": [_Q]},
    "questions a string": {"state": "x", "questions": "q"},
    "questions null": {"state": "x", "questions": None},
    "model multilingual": {"model": "multilingual", "state": "x", "questions": {"q": _Q}},
    "model typed, empty questions": {"model": "Typed", "state": "x", "questions": {}},
}


@pytest.mark.parametrize("name", list(REJECTED_PAYLOADS))
def test_a_malformed_payload_is_a_422(pair, name):
    assert expected(pair.oracle, REJECTED_PAYLOADS[name]) is None
    assert ours(pair.engine, REJECTED_PAYLOADS[name]) is None


@pytest.mark.parametrize("model", [None, "", 1, "jev-1", " EN ", "laya", "convaiinnovations/laya"])
def test_model_english_may_be_given_omitted_or_left_to_the_service(pair, model):
    """Any id that names no Laya model, or an alias of english, gets english's answer."""
    questions = {"q": _Q}
    with_model = check(pair, {"model": "english", "state": "x", "questions": questions})
    assert check(pair, {"state": "x", "questions": questions}) == with_model
    assert check(pair, {"model": model, "state": "x", "questions": questions}) == with_model


# ------------------------------------------------------------------------------------- batch scoring


def test_decide_many_of_nothing(pair):
    assert pair.engine.decide_many([]) == []


def test_decide_many_past_one_forward_pass(pair):
    """More rows than one forward pass holds: the engine packs payloads in order, up to the executor's max_rows per
    pass (its documented policy), and each pass must score exactly as laya scores those rows packed together.
    Errors and empty payloads answer in place without taking a row."""
    from .oracle import expected_many

    max_rows = pair.engine.executor.admits.max_rows

    payloads = [{"state": f"ticket {i}: {words(40 * i, offset=i)}", "questions": _mixed_questions(4)} for i in range(6)]
    payloads.insert(2, {"state": "x", "questions": {"bad": {"type": "choice", "instructions": "x", "criteria": []}}})
    payloads.insert(4, {"state": "x", "questions": {}})
    payloads.append({"state": "x", "questions": _mixed_questions(17)})
    groups, rows = [[]], 0
    for index, payload in enumerate(payloads):
        n = len(payload["questions"]) if expected(pair.oracle, payload) is not None else 0
        if n and rows + n > max_rows:
            groups.append([])
            rows = 0
        groups[-1].append(index)
        rows += n
    assert len(groups) > 1, "premise: the payloads need more than one forward pass"
    want: dict[int, str | None] = {}
    for group in groups:
        want.update(zip(group, expected_many(pair.oracle, [payloads[i] for i in group]), strict=True))
    got = pair.engine.decide_many([wire(p) for p in payloads])
    assert len(got) == len(payloads)
    for index, result in enumerate(got):
        if want[index] is None:
            assert result.get("status") == 422 and result.get("error") == "validation", result
        else:
            assert json.dumps(result) == want[index], f"payload {index} differs"


def test_found_case_score_rounding_boundary_json(pair):
    """Found by test_valid_requests on tiny-alt (see test_executor_bits.py): laya p("5") = 0.2678."""
    criteria = [S._words(49, seed) for seed in (31, 2161, 4313, 49552, 297, 487)]
    check(
        pair,
        {
            "state": S._words(91, 464),
            "questions": {"b": {"type": "score", "instructions": MASK * 3, "criteria": criteria}},
        },
    )
