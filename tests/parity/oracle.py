"""What a correct answer is: laya 0.3.20's `Agent.predict`, plus the service's own limits.

`expected(agent, payload)` gives the JSON text our engine must return byte for byte, or None where
the engine must reject the request with a validation error (422): every input the reference
rejects, and the inputs the service refuses on top of that (DESIGN.md "Limits and errors").
"""

from __future__ import annotations

import copy
import json
import warnings
from pathlib import Path

from laya_common.contract import RequestError, laya_model

MAX_QUESTIONS = 16  # DESIGN.md: more than 16 questions -> 422
MAX_MARKERS = 2048  # DESIGN.md: more than 2048 option markers in a request -> 422
MODEL = "english"  # the model these checkpoints serve: ids naming no Laya model (or none) go to it

# laya warns once per load that the synthesized config ships clamped / invalid temperatures.
TEMPERATURE_WARNING = r"laya: this checkpoint ships invalid temperatures"


def load_oracle(checkpoint: Path):
    """laya 0.3.20 on `checkpoint`, fp32 on CPU: the behavioural reference."""
    import laya

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=TEMPERATURE_WARNING, category=RuntimeWarning)
        return laya.Agent(str(checkpoint), device="cpu")


def wire(payload):
    """`payload` as it arrives over the wire: a fresh copy that survived a JSON round trip."""
    return json.loads(json.dumps(payload))


def n_markers(question: dict) -> int:
    """Option markers of a question the reference accepted (choice lists count after de-duplication)."""
    t, crit = question["type"], question.get("criteria")
    if t == "choice":
        return len(dict.fromkeys(crit)) if isinstance(crit, list) else len(crit)
    if t == "score":
        return len(crit)
    return 2


def structural_reject(payload) -> str | None:
    """Why the service refuses `payload` before the reference sees it, or None."""
    if not isinstance(payload, dict):
        return "payload is not an object"
    if laya_model(payload.get("model")) not in (None, MODEL):
        return "a Laya model this service does not serve"
    if "state" not in payload or "questions" not in payload:
        return "missing state or questions"
    if not isinstance(payload["questions"], dict):
        return "questions is not an object"
    if len(payload["questions"]) > MAX_QUESTIONS:
        return "more than 16 questions"
    return None


def oracle_result(agent, payload) -> dict | None:
    """laya's `Agent.predict(state, questions)` for a structurally sound payload; None if it raises."""
    payload = wire(payload)
    try:
        return agent.predict(payload["state"], payload["questions"])
    except Exception:
        return None


def reference_accepts(agent, payload) -> bool:
    """Whether laya would answer a structurally sound payload: `predict_batch`'s own checks, tokenization and
    row building (everything before the forward pass, which is where it rejects), without the forward pass."""
    payload = wire(payload)
    questions = payload["questions"]
    try:
        for qid in questions:
            agent._check_question(qid, questions[qid])
        internal = {qid: agent._to_internal(questions[qid]) for qid in questions}
        agent._encode_state(payload["state"], list(questions), internal)
    except Exception:
        return False
    return True


def expected(agent, payload) -> str | None:
    """The JSON text the engine must return for `payload`, or None where it must answer 422."""
    if structural_reject(payload) is not None:
        return None
    result = oracle_result(agent, payload)
    if result is None:
        return None
    if sum(n_markers(q) for q in payload["questions"].values()) > MAX_MARKERS:
        return None
    return json.dumps(result)


EMPTY_RESPONSE = {"model": "laya-rl-agent", "answers": {}, "usage": {"input_tokens": 0, "output_tokens": 0}}


def expected_many(agent, payloads: list) -> list[str | None]:
    """What batch scoring must return: laya's `predict_batch` machinery with every accepted payload's rows packed
    into one forward pass (each payload with its own questions), or None for a payload that must be a 422.

    For payloads that share their questions this is exactly `agent.predict_batch(states, questions)`.
    """
    from laya.common import collate_items

    results: list[str | None] = []
    packed = []  # (index in results, question ids, internal questions, items)
    for payload in payloads:
        if expected(agent, payload) is None:
            results.append(None)
            continue
        payload = wire(payload)
        ids = list(payload["questions"])
        results.append(json.dumps(EMPTY_RESPONSE))
        if ids:
            internal = {qid: agent._to_internal(payload["questions"][qid]) for qid in ids}
            packed.append((len(results) - 1, ids, internal, agent._encode_state(payload["state"], ids, internal)))
    if packed:
        import torch

        batch = collate_items([items for *_, items in packed], agent.tok.pad_token_id)
        with torch.no_grad():  # as in predict_batch
            logits, act = agent._forward(batch)
        row = 0
        for index, ids, internal, items in packed:
            answers = agent._decode_answers(logits, act, items, ids, internal, row)
            n_tokens = int(batch["attention_mask"][row : row + len(items)].sum())
            usage = {"input_tokens": n_tokens, "output_tokens": 0}
            results[index] = json.dumps({"model": "laya-rl-agent", "answers": answers, "usage": usage})
            row += len(items)
    return results


def ours(engine, payload) -> str | None:
    """The engine's JSON text for `payload`, or None where it rejected it as a validation error.

    Any other exception propagates: the engine must never fail on a request in another way.
    """
    given = wire(payload) if _is_json(payload) else copy.deepcopy(payload)
    before = repr(given)
    try:
        result = engine.decide(given)
    except RequestError as e:
        assert e.kind == "validation", f"rejected as {e.kind!r}, expected 'validation': {e.detail}"
        assert isinstance(e.detail, str) and e.detail, "a rejection must say why"
        return None
    finally:
        assert repr(given) == before, "the engine changed the payload it was given"
    return json.dumps(result)


def _is_json(payload) -> bool:
    try:
        json.dumps(payload)
    except (TypeError, ValueError):
        return False
    return True


def describe(payload, limit: int = 2000) -> str:
    # lone surrogates (valid JSON escapes, not valid UTF-8) are shown escaped, so a report can be printed
    text = json.dumps(payload, ensure_ascii=False).encode("utf-8", "backslashreplace").decode("utf-8")
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} chars)"


def assert_parity(agent, engine, payload) -> str | None:
    """Assert the engine answers `payload` exactly as the oracle does (JSON bytes, or both reject)."""
    want = expected(agent, payload)
    got = ours(engine, payload)
    if want is None:
        assert got is None, f"engine answered a request that must be rejected (422):\n{describe(payload)}\n-> {got}"
    else:
        assert got is not None, f"engine rejected a request the reference answers:\n{describe(payload)}\n-> {want}"
        assert got == want, f"answers differ for\n{describe(payload)}\nexpected {want}\nactual   {got}"
    return want
