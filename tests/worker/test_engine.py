import json

import numpy as np
import pytest

from laya_common.contract import ExecutorError, RequestError
from worker.engine.engine import Engine, _split

NOUL = {"type": "noul", "instructions": "Does the customer ask for a refund?"}
CHOICE = {"type": "choice", "instructions": "Which topic?", "criteria": ["billing", "shipping", "login", "other"]}


def payload(state="Please refund the duplicate charge.", **questions):
    return {"model": "english", "state": state, "questions": questions or {"q": NOUL}}


def numbers(tree):
    """Every number in a response, in order, with the rest of its structure."""
    if isinstance(tree, dict):
        return [x for k in tree for x in numbers(tree[k])]
    return [tree] if isinstance(tree, float) else []


def test_answers_keep_question_order(engine):
    response = engine.decide(payload(b=NOUL, a=CHOICE, **{"10": NOUL, "2": CHOICE}))
    assert list(response["answers"]) == ["b", "a", "10", "2"]


def test_usage_counts_every_row_token(engine):
    one = engine.decide(payload(q=NOUL))["usage"]
    two = engine.decide(payload(q=NOUL, r=NOUL))["usage"]
    assert one["output_tokens"] == two["output_tokens"] == 0
    assert two["input_tokens"] == 2 * one["input_tokens"] > 0


def test_rows_are_cut_to_max_len(engine):
    prepared = engine.prepare(payload(state="word " * 5000, q=NOUL))
    assert len(prepared.rows[0].ids) == engine.config.max_len


def test_state_is_tokenized_once_and_question_texts_come_from_the_cache_when_seen(engine, tiny_checkpoint, monkeypatch):
    calls = []
    tok = engine.tokenizer
    encode_many, encode_state = tok.encode_many, tok.encode_state
    monkeypatch.setattr(tok, "encode_many", lambda texts: calls.append(("texts", texts)) or encode_many(texts))
    monkeypatch.setattr(
        tok, "encode_state", lambda text, need, **kw: calls.append(("state", text)) or encode_state(text, need, **kw)
    )
    monkeypatch.setattr(tok, "encode", lambda text: pytest.fail("one text at a time"))
    questions = {"q": NOUL, "r": {**NOUL, "instructions": "A question not asked before?"}, "s": CHOICE}
    first = engine.prepare(payload(state="unique state text", **questions))
    assert calls[0] == ("state", "unique state text") and [kind for kind, _ in calls] == ["state", "texts"]
    assert not any("unique state text" in text for text in calls[1][1])
    calls.clear()
    again = engine.prepare(payload(state="another state text", **questions))
    assert calls == [("state", "another state text")]  # the question texts all came from the cache
    fresh = Engine(tiny_checkpoint, executor=engine.executor).prepare(payload(state="another state text", **questions))
    assert (
        [r.ids.tolist() for r in again.rows]
        == [r.ids.tolist() for r in fresh.rows]
        != [r.ids.tolist() for r in first.rows]
    )


def test_a_long_state_is_tokenized_only_as_far_as_a_row_can_hold(engine):
    state = "refund the duplicate charge, please. " * 2000
    whole = engine.tokenizer.encode(state)
    part = engine.tokenizer.encode_state(state, engine.config.max_len, from_end=False)
    assert engine.config.max_len <= len(part) < len(whole) // 4 and part == whole[: len(part)]
    turns = [{"role": "user", "content": "refund the duplicate charge, please."}] * 400
    rows = engine.prepare(payload(state=turns, q=NOUL)).rows
    whole = engine.tokenizer.encode(json.dumps(turns, ensure_ascii=False))
    assert rows[0].ids[-engine.config.max_len // 2 :][:-1].tolist() == whole[-(engine.config.max_len // 2 - 1) :]


def test_the_text_cache_keeps_the_most_recent_texts(engine, monkeypatch):
    import worker.engine.tokenizer

    monkeypatch.setattr(worker.engine.tokenizer, "CACHED_TEXTS", 3)
    tok = engine.tokenizer
    tok._cache.clear()
    tok.encode_cached(["a", "b", "c"])
    tok.encode_cached(["a", "d"])  # "a" was used again, so "b" is the oldest and leaves
    assert list(tok._cache) == ["c", "a", "d"]
    assert tok.encode_cached(["d", "x", "x"]) == [tok.encode("d"), tok.encode("x"), tok.encode("x")]


def test_a_text_that_cannot_be_tokenized_is_named(engine):
    with pytest.raises(RequestError) as e:
        engine.prepare(payload(state="fine", q=NOUL, r={**NOUL, "instructions": "bad \ud800"}))
    assert e.value.field == "questions.r.instructions"


@pytest.mark.parametrize("model_id", ["jev-1", " EN", "laya", "", None, "convaiinnovations/laya"])
def test_a_request_naming_this_model_or_no_laya_model_is_answered_by_it(engine, model_id):
    """laya-serve's resolution, as `laya-run` applies it: only another Laya model is refused."""
    assert engine.decide({**payload(q=NOUL), "model": model_id}) == engine.decide(payload(q=NOUL))


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ([], None),
        ({"model": "typed-decisions", "state": "x", "questions": {}}, "model"),
        ({"state": "x"}, "questions"),
        ({"questions": {}}, "state"),
        ({"state": "x", "questions": {f"q{i}": NOUL for i in range(17)}}, "questions"),
        (
            {"state": "x", "questions": {"q": {"type": "choice", "instructions": "i", "criteria": [1, 2]}}},
            "questions.q.criteria",
        ),
    ],
)
def test_invalid_requests_name_the_field(engine, bad, field):
    with pytest.raises(RequestError) as e:
        engine.decide(bad)
    assert e.value.kind == "validation" and e.value.field == field
    assert e.value.to_dict()["status"] == 422


def test_options_that_overflow_the_head_budget_are_rejected(engine):
    many = {"type": "choice", "instructions": "pick", "criteria": [f"option number {i}" for i in range(130)]}
    with pytest.raises(RequestError, match="of its .* options fit in a row") as e:
        engine.decide(payload(q=many))
    assert e.value.field == "questions.q.criteria"


def test_more_than_2048_markers_are_rejected_before_any_tokenizing(engine, monkeypatch):
    monkeypatch.setattr(engine.tokenizer, "encode", lambda text: pytest.fail("tokenized a rejected request"))
    wide = {"type": "choice", "instructions": "pick", "criteria": [f"o{i}" for i in range(129)]}
    with pytest.raises(RequestError, match="2064 options"):
        engine.decide(payload(**{f"q{i}": wide for i in range(16)}))


def test_decide_many_keeps_order_places_errors_and_matches_decide(engine):
    payloads = [payload(state=f"state {i} " * (1 + 7 * i), q=NOUL, c=CHOICE) for i in range(11)]
    payloads[4] = {"state": "x", "questions": {"q": {"type": "nope"}}}
    results = engine.decide_many(payloads)
    assert len(results) == len(payloads)
    assert results[4]["status"] == 422 and results[4]["field"] == "questions.q.type"
    for i, (p, result) in enumerate(zip(payloads, results, strict=True)):
        if i == 4:
            continue
        alone = engine.decide(p)
        # padding to another batch's longest row may move the last bits of a float: numbers agree to
        # the rounding step, everything else exactly
        assert result["usage"] == alone["usage"]
        assert result["answers"].keys() == alone["answers"].keys()
        np.testing.assert_allclose(numbers(result), numbers(alone), atol=2e-4)


def test_decide_many_packs_rows_into_few_forward_passes(engine, monkeypatch):
    passes = []
    forward = engine.executor.forward

    def counting(batch):
        passes.append(batch.n_rows)
        return forward(batch)

    monkeypatch.setattr(engine.executor, "forward", counting)
    engine.decide_many([payload(q=NOUL, r=NOUL, s=NOUL) for _ in range(10)])
    assert passes == [15, 15]
    assert max(passes) <= engine.executor.admits.max_rows


def test_the_next_window_is_prepared_in_pieces_as_long_as_each_pass_runs():
    # a pass's share of the next window follows its padded tokens (its GPU time): less during a short pass
    assert _split(range(10), [100, 300, 100]) == [range(0, 2), range(2, 8), range(8, 10)]
    assert _split(range(3), [0, 0]) == [range(0, 1), range(1, 3)]  # passes without rows: equal shares
    pieces = _split(range(7), [5, 1, 9, 2])
    assert len(pieces) == 4 and [i for piece in pieces for i in piece] == list(range(7))


def test_an_executor_failure_is_an_executor_error(engine, monkeypatch):
    def broken(batch):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setattr(engine.executor, "forward", broken)
    with pytest.raises(ExecutorError, match="illegal memory access"):
        engine.decide(payload())


def test_second_config_answers(tiny_alt_checkpoint):
    response = Engine(tiny_alt_checkpoint).decide(payload(state="long " * 300, q=NOUL, c=CHOICE))
    assert set(response["answers"]) == {"q", "c"}


def test_unknown_executor_is_refused_at_startup(tiny_checkpoint):
    with pytest.raises(ValueError, match="unknown executor 'tpu'; available: auto, reference, cuda"):
        Engine(tiny_checkpoint, executor="tpu")


def test_missing_artifacts_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="model.safetensors"):
        Engine(tmp_path)
