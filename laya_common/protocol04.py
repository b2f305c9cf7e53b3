"""What laya 0.4.15's /v1/systemone asks of a request before any question is parsed, and its request controls.

Under protocol 0.4.15 (contract.V04) the API checks a body with `check_request` before it queues it, and the
engine checks again (laya-run reads bodies too); each refusal is the status laya-serve 0.4.15 gives it: 400 for
a missing state or an unpaired surrogate, 413 for too many options or too large a state, 422 for the rest.
The controls that change the answer (`max_len`, `head_max_len`, `min_confidence`) are parsed here; `task`,
`lang` and `lang_guess` only choose a checkpoint in laya's router, which a named model makes moot, so they are
checked and otherwise ignored. Under 0.3.20 none of this applies: 0.3.20 ignores fields it does not know.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass

from laya_common.contract import RequestError, path_like_model

MAX_CHOICE_OPTIONS = 100
MAX_SCORE_LEVELS = 32
MAX_OPTIONS = 512  # choice options and score levels across a request's questions
# the question types whose options are counted: the criteria shape counted, the most one may have, their name
COUNTED = {"choice": (dict | list, MAX_CHOICE_OPTIONS, "options"), "score": (list, MAX_SCORE_LEVELS, "levels")}
MAX_STATE_CHARS = 50_000  # a text state's characters, or a JSON state's as compact-spaced JSON text
MAX_STATES = 64  # states of one POST /v1/systemone/batch
SURROGATE = re.compile("[\ud800-\udfff]")  # a code point no UTF-8 text can carry (one search is C-speed)
# Fields laya runs as code in its own process: a body may name them only as null.
HOOK_FIELDS = ("hooks", "on_predict_start", "on_predict_end", "hooks_raise", "hooks_timeout")
CONTROL_FIELDS = ("max_len", "head_max_len", "task", "lang", "lang_guess", "min_confidence")
# min_confidence may be a map from an answer's kind (type and option count) to its threshold
BUCKET_SIZES = ("2", "3-5", "6-10", "11+")
BUCKETS = tuple(f"{kind}:{size}" for kind in ("choice", "score", "noul") for size in BUCKET_SIZES) + ("default",)


@dataclass(frozen=True)
class Controls:
    """A request's controls that change its rows or its answers; None: the checkpoint's own (or no gate)."""

    max_len: int | None = None
    head_max_len: int | None = None
    min_confidence: float | dict[str, float] | None = None


NO_CONTROLS = Controls()


def check_request(payload: dict, *, check_common_fields: bool = True) -> None:
    """The request-level rules, in laya 0.4.15's order: a state, question and option counts, the state's size,
    no hook, no unpaired surrogate, no path for a model. The controls are checked by `parse_controls`."""
    if payload.get("state") is None:
        raise RequestError("'state' is required and may not be null", kind="bad_request", field="state")
    if not isinstance(payload.get("questions"), dict):
        raise RequestError("'questions' must be an object of question id -> question", kind="bad_request")
    check_option_counts(payload["questions"])
    check_state_size(payload["state"])
    if check_common_fields:
        check_common(payload)


def check_states_request(body: dict) -> None:
    """POST /v1/systemone/batch's rules, in laya 0.4.15's order: 1 to MAX_STATES states, each a state as
    `check_request` takes it, then what a single request and a batch share, then its own two options."""
    if not isinstance(body.get("states"), list) or not body["states"]:
        raise RequestError("'states' must be a list of 1 to 64 states", kind="bad_request", field="states")
    if len(body["states"]) > MAX_STATES:
        raise RequestError(
            f"{len(body['states'])} states; at most {MAX_STATES} in one call (POST /v1/batches takes more)",
            kind="payload_too_large",
            field="states",
        )
    for i, state in enumerate(body["states"]):
        if state is None:
            raise RequestError(f"state {i} is null; every state must be a value", kind="bad_request", field="states")
    check_request({**body, "state": body["states"][0]}, check_common_fields=False)
    for state in body["states"][1:]:
        check_state_size(state)
    check_common(body)
    if body.get("diagnostics") is not None:
        raise RequestError(
            "diagnostics are filled in for a caller in laya's own process; a service returns none", field="diagnostics"
        )
    size = body.get("batch_size")
    if size is not None and (not isinstance(size, int) or isinstance(size, bool) or size < 1):
        raise RequestError(f"batch_size must be a positive integer, or null; not {size!r}", field="batch_size")
    if body.get("sort_by_length") is not None and not isinstance(body["sort_by_length"], bool):
        raise RequestError("sort_by_length must be true, false or null", field="sort_by_length")


def check_option_counts(questions: dict) -> None:
    """413 past MAX_CHOICE_OPTIONS options of a choice, MAX_SCORE_LEVELS levels of a score or MAX_OPTIONS in all;
    422 for a score level that is null."""
    total = 0
    for qid, question in questions.items():
        if not isinstance(question, dict):
            continue
        kind, criteria = question.get("type"), question.get("criteria")
        if not isinstance(kind, str) or kind not in COUNTED or not isinstance(criteria, COUNTED[kind][0]):
            continue
        _, most, what = COUNTED[kind]
        total += len(criteria)
        if len(criteria) > most:
            raise RequestError(
                f"question {qid!r} has {len(criteria)} {what}; a {kind} takes at most {most}",
                kind="payload_too_large",
                field=f"questions.{qid}.criteria",
            )
        if kind == "score" and None in criteria:
            raise RequestError(
                f"question {qid!r}: level {criteria.index(None)} is null; describe every level",
                field=f"questions.{qid}.criteria",
            )
    if total > MAX_OPTIONS:
        raise RequestError(
            f"{total} options across the questions; at most {MAX_OPTIONS}", kind="payload_too_large", field="questions"
        )


def check_state_size(state: object) -> None:
    size = len(state) if isinstance(state, str) else len(json.dumps(state, ensure_ascii=False))
    if size > MAX_STATE_CHARS:
        raise RequestError(
            f"the state is {size} characters; at most {MAX_STATE_CHARS}", kind="payload_too_large", field="state"
        )


def check_common(payload: dict) -> None:
    """What a single request and a batch of states share: no hook, no unpaired surrogate, no path for a model."""
    hooks = sorted(name for name in HOOK_FIELDS if payload.get(name) is not None)
    if hooks:
        raise RequestError(
            f"{', '.join(hooks)}: code laya would run in its own process; a service takes none (send null or nothing)",
            field=hooks[0],
        )
    if has_lone_surrogate(payload):
        raise RequestError(
            "the body holds an unpaired UTF-16 surrogate escape, which no UTF-8 text can carry", kind="bad_request"
        )
    if path_like_model(payload.get("model")):
        raise RequestError(
            f"model {payload['model']!r} names no Laya model; a path or another hub id cannot be loaded here "
            "(name a served model, or omit model for the default)",
            field="model",
        )


def has_lone_surrogate(value: object) -> bool:
    """Whether any string in `value` (keys included, at any depth) holds a code point U+D800..U+DFFF."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if SURROGATE.search(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def parse_controls(payload: dict, *, max_tokens: int, limit_note: Callable[[], str]) -> Controls:
    """The request's controls, each absent or null for none; RequestError (422) naming the first bad one.
    `max_tokens` bounds max_len and head_max_len: what the served checkpoint and executor admit, which
    `limit_note()` says in words (built only for a refusal)."""
    budgets = {}
    for name in ("max_len", "head_max_len"):
        value = payload.get(name)
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool):
            raise RequestError(f"{name} must be an integer number of tokens, not {value!r}", field=name)
        if value <= 0:
            raise RequestError(f"{name} must be a positive number of tokens, not {value}", field=name)
        if value > max_tokens:
            raise RequestError(f"{name} {value} is more than {limit_note()}", field=name)
        budgets[name] = value
    for name in ("lang", "lang_guess"):
        value = payload.get(name)
        if value is not None and not isinstance(value, str):
            raise RequestError(f'{name} must be a language code such as "de", or null; not {value!r}', field=name)
    return Controls(**budgets, min_confidence=parse_min_confidence(payload.get("min_confidence")))


def parse_min_confidence(value: object) -> float | dict[str, float] | None:
    """None, one threshold in [0, 1], or a map from BUCKETS to thresholds."""
    if value is None:
        return None
    if isinstance(value, dict):
        if not value:
            raise RequestError("min_confidence as a map needs at least one bucket", field="min_confidence")
        for key in value:
            if key not in BUCKETS:
                raise RequestError(
                    f"min_confidence: {key!r} is no bucket; use 'default' or a type and option count such as "
                    "'choice:3-5' (sizes 2, 3-5, 6-10, 11+)",
                    field="min_confidence",
                )
        return {key: _threshold(v) for key, v in value.items()}
    return _threshold(value)


def _threshold(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or not 0 <= value <= 1:
        raise RequestError(f"min_confidence takes thresholds from 0.0 to 1.0, not {value!r}", field="min_confidence")
    return float(value)


def bucket(answer_type: str, n_options: int) -> str:
    """An answer's min_confidence bucket: its type and how many options it had."""
    size = "2" if n_options <= 2 else "3-5" if n_options <= 5 else "6-10" if n_options <= 10 else "11+"
    return f"{answer_type}:{size}"


def threshold_for(min_confidence: float | dict[str, float], answer_type: str, n_options: int) -> float:
    if not isinstance(min_confidence, dict):
        return min_confidence
    key = bucket(answer_type, n_options)
    return min_confidence[key] if key in min_confidence else min_confidence.get("default", 0.0)
