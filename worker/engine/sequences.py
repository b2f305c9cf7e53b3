"""Requests to rows: validation with the reference's rules, option texts, and one token row per question.

A row is `[CLS] <type> question: <instructions> [SEP] [MASK] opt0 [MASK] opt1 ... [SEP] <state> [SEP]`,
cut to the checkpoint's `max_len`; `markers` are the positions of the [MASK] tokens that open options.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from laya_common import protocol04
from laya_common.contract import LIMITS, RequestError, resolve_model
from laya_common.model import QTYPES
from worker.engine.tokenizer import Tokenizer, UnencodableText

OPTION_MAX_TOKENS = 48  # an option's text is cut to this many tokens (its marker not counted)
OPTION_MIN_BUDGET = 16  # below this much head room, options are cut to an equal share each
HEAD_MIN_TOKENS = 8  # the instructions always keep at least this many tokens
DEFAULT_NOUL_LABELS = {"false": "false", "true": "true"}
DEFAULT_NOUL_TEXT = {"false": "no, the statement does not hold", "true": "yes, the statement holds"}


@dataclass(frozen=True)
class Question:
    """A validated question in the form rows are built from."""

    qid: str
    type: str  # "choice", "score" or "noul", as on the wire; its qtype is QTYPES[type]
    instructions: str
    criteria: dict | list | None  # choice: dict label -> description; score: list; noul: dict or None
    labels: tuple[str, str]  # noul: (false label, true label)
    # protocol 0.4: slot s of the row shows option option_order[s] (None: options in their own order)
    option_order: tuple[int, ...] | None = None

    @property
    def options(self) -> list[str]:
        """Option texts in label order; a noul's order is always (false, true). A choice label that is a
        number or a boolean (protocol 0.4) reads as Python writes it."""
        if self.type == "choice":
            return [str(k) if v is None or v == "" else f"{k}: {render_criterion(v)}" for k, v in self.criteria.items()]
        if self.type == "score":
            return [f"level {i}: {render_criterion(c)}" for i, c in enumerate(self.criteria)]
        crit = self.criteria or {}
        texts = []
        for key, label in zip(("false", "true"), self.labels, strict=True):
            value = crit.get(key)
            text = render_criterion(value) if value not in (None, "") else DEFAULT_NOUL_TEXT[key]
            texts.append(f"{label}: {text}")
        return texts

    @property
    def slots(self) -> list[str]:
        """Option texts in the order the row shows them."""
        options = self.options
        return options if self.option_order is None else [options[i] for i in self.option_order]


@dataclass(frozen=True)
class Row:
    """One question's token sequence and where its options' markers are; what it kept of the state and of its
    options (protocol 0.4 reports both in `usage`)."""

    ids: np.ndarray  # int32, cut from `held_ids`
    markers: list[int]
    qtype: int  # the question's type as the model takes it: the row of its type embedding
    state_kept: int = 0  # state tokens in the row
    distinct_options: int = 0  # options whose token spans differ once cut to the head budget
    option_cap: int | None = None  # tokens each option was cut to when the head budget was short, else None


def render_criterion(value: object) -> str:
    """A criterion as text: strings as they are, anything else as compact JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)


def serialize_state(state: object) -> str:
    return state if isinstance(state, str) else json.dumps(state, ensure_ascii=False)


def parse_payload(payload: object, model_name: str, *, strict: bool = False) -> tuple[object, dict]:
    """The state and the questions dict of a /v1/systemone body for the model `model_name`, or RequestError
    naming the field (a `model` naming another Laya model among them). `strict`: protocol 0.4's request rules
    (laya_common.protocol04) first."""
    if not isinstance(payload, dict):
        raise RequestError("the request must be a JSON object with 'state' and 'questions'")
    if strict:
        protocol04.check_request(payload)
    resolve_model(payload.get("model"), served=(model_name,))
    if "state" not in payload:
        raise RequestError("'state' is required: a text, a JSON value or a list of conversation turns", field="state")
    questions = payload.get("questions")
    if not isinstance(questions, dict):
        raise RequestError("'questions' must be an object mapping question ids to questions", field="questions")
    if len(questions) > LIMITS["max_questions"]:
        raise RequestError(
            f"{len(questions)} questions; at most {LIMITS['max_questions']} per request", field="questions"
        )
    return payload["state"], questions


def parse_questions(questions: dict, *, strict: bool = False) -> list[Question]:
    """Validate every question (in order; `strict`: with protocol 0.4's rules) and count markers against the
    limit."""
    parsed = [parse_question(str(qid), qdef, strict=strict) for qid, qdef in questions.items()]
    n_markers = sum(len(q.options) for q in parsed)
    if n_markers > LIMITS["max_markers"]:
        raise RequestError(
            f"{n_markers} options in all; at most {LIMITS['max_markers']} per request", field="questions"
        )
    return parsed


def parse_question(qid: str, qdef: object, *, strict: bool = False) -> Question:
    field = f"questions.{qid}"
    if strict and not qid.strip():
        raise RequestError("a question id must hold more than spaces", field=field)
    if not isinstance(qdef, dict):
        raise RequestError(f"question {qid!r} must be an object, not {type(qdef).__name__}", field=field)
    type_name = qdef.get("type")
    if not isinstance(type_name, str) or type_name not in QTYPES:
        raise RequestError(
            f"question {qid!r} has type {type_name!r}; use one of {sorted(QTYPES)}", field=field + ".type"
        )
    if "instructions" not in qdef:
        raise RequestError(f"question {qid!r} has no 'instructions'", field=field + ".instructions")
    instructions = qdef["instructions"]
    if strict and (instructions is None or instructions in ("", [], {}) or str(instructions).isspace()):
        raise RequestError(
            f"question {qid!r}: 'instructions' is empty; say what to answer", field=field + ".instructions"
        )
    if not isinstance(instructions, str):
        instructions = json.dumps(instructions, ensure_ascii=False)
    parse = _parse_criteria_strictly if strict else _parse_criteria
    criteria = parse(qid, type_name, qdef.get("criteria"), field + ".criteria")
    if "labels" in qdef and type_name != "noul":
        raise RequestError(f"question {qid!r}: 'labels' applies to noul questions only", field=field + ".labels")
    labels = _parse_labels(qid, qdef.get("labels"), field + ".labels")
    order = None
    if strict and "option_order" in qdef:
        n_options = len(criteria) if type_name != "noul" else 2
        order = _parse_option_order(qid, qdef["option_order"], n_options, field + ".option_order")
    return Question(qid, type_name, instructions, criteria, labels, order)


def _parse_option_order(qid: str, order: object, n_options: int, field: str) -> tuple[int, ...]:
    """A permutation of the question's option indices (a null one too is refused, as laya 0.4 refuses it)."""
    if not (
        isinstance(order, list)
        and all(isinstance(i, int) and not isinstance(i, bool) for i in order)
        and sorted(order) == list(range(n_options))
    ):
        raise RequestError(
            f"question {qid!r}: 'option_order' must list each of its {n_options} option indices (0 to "
            f"{n_options - 1}) once, in the order the options are shown; got {order!r}",
            field=field,
        )
    return tuple(order)


def _parse_criteria_strictly(qid: str, type_name: str, crit: object, field: str) -> dict | list | None:
    """Protocol 0.4's criteria: a choice list may hold numbers and booleans too, but no null, no list or object
    and no label twice (1, 1.0 and true are one label)."""
    if type_name == "choice" and isinstance(crit, list):
        seen: dict = {}
        for i, label in enumerate(crit):
            if label is None or isinstance(label, dict | list):
                what = "null" if label is None else f"a{'n object' if isinstance(label, dict) else ' list'}"
                raise RequestError(
                    f"question {qid!r}: label {i} is {what}; a label names its option and its answer, so it must be "
                    "a string, a number or a boolean",
                    field=field,
                )
            if label in seen:
                raise RequestError(
                    f"question {qid!r}: label {i} ({label!r}) is label {seen[label]} again; every option needs its "
                    "own label",
                    field=field,
                )
            seen[label] = i
        crit = dict.fromkeys(crit)
    return _parse_criteria(qid, type_name, crit, field)


def _parse_criteria(qid: str, type_name: str, crit: object, field: str) -> dict | list | None:
    if type_name == "choice":
        if isinstance(crit, list):
            if not all(isinstance(c, str) for c in crit):
                raise RequestError(f"choice question {qid!r}: a criteria list holds label strings only", field=field)
            crit = dict.fromkeys(crit)
        if not isinstance(crit, dict):
            raise RequestError(
                f"choice question {qid!r} takes 'criteria' as an object of label -> description or a list of labels",
                field=field,
            )
        if not crit:
            raise RequestError(f"choice question {qid!r} needs at least one option", field=field)
        return crit
    if type_name == "score":
        if not isinstance(crit, list):
            raise RequestError(
                f"score question {qid!r} takes 'criteria' as a list of levels, level 0 first", field=field
            )
        if not crit:
            raise RequestError(f"score question {qid!r} needs at least one level", field=field)
        return crit
    if crit is None:
        return None
    if not isinstance(crit, dict):
        raise RequestError(
            f"noul question {qid!r} takes 'criteria' as an object keyed 'true'/'false', or none", field=field
        )
    normalized = {str(k).lower(): v for k, v in crit.items()}
    if not set(normalized) <= {"true", "false"}:
        raise RequestError(
            f"noul question {qid!r}: 'criteria' may only have the keys 'true' and 'false', "
            f"not {sorted(set(normalized) - {'true', 'false'})}; use 'labels' to rename the answers",
            field=field,
        )
    return normalized


def _parse_labels(qid: str, labels: object, field: str) -> tuple[str, str]:
    if labels is None:
        labels = DEFAULT_NOUL_LABELS
    problem = f"noul question {qid!r}: 'labels' must map exactly 'false' and 'true' to two different non-empty texts"
    if not isinstance(labels, dict) or set(labels) != {"false", "true"}:
        raise RequestError(problem, field=field)
    false_label, true_label = labels["false"], labels["true"]
    if not isinstance(false_label, str) or not isinstance(true_label, str):
        raise RequestError(problem, field=field)
    false_label, true_label = false_label.strip(), true_label.strip()
    if not false_label or not true_label or false_label == true_label:
        raise RequestError(problem, field=field)
    return false_label, true_label


def row_texts(tok: Tokenizer, question: Question) -> list[tuple[str, str]]:
    """(text, field) pairs to tokenize for one question's row: its head, then each option's text."""
    field = f"questions.{question.qid}"
    head = (f"{question.type} question: {tok.scrub(question.instructions)}", field + ".instructions")
    return [head] + [(" " + tok.scrub(text), field + ".criteria") for text in question.slots]


def encode_state(tok: Tokenizer, state: object, need: int) -> list[int]:
    """The state's ids, of which the `need` a row can hold (the first; a conversation's last) are the whole
    state's; RequestError naming the state when it cannot be tokenized."""
    try:
        return tok.encode_state(tok.scrub(serialize_state(state)), need, from_end=is_conversation(state))
    except UnencodableText as e:
        raise RequestError(str(e), field="state") from None


def encode_whole_state(tok: Tokenizer, state: object) -> list[int]:
    """Every id of the state (protocol 0.4 reports how many, and how many a row dropped)."""
    try:
        return tok.encode(tok.scrub(serialize_state(state)))
    except UnencodableText as e:
        raise RequestError(str(e), field="state") from None


def held_ids(state: object, state_ids: list[int], max_len: int) -> np.ndarray:
    """The most of the state's ids a row of `max_len` can hold, as int32 (its first; a conversation's last): the
    rows are cut from this one array, so a pass's batch copies them rather than converting each id."""
    return np.array(state_ids[-max_len:] if is_conversation(state) else state_ids[:max_len], dtype=np.int32)


def is_conversation(state: object) -> bool:
    """A list of turns: its rows keep the newest turns when the state does not fit."""
    return isinstance(state, list)


def encode_texts(tok: Tokenizer, texts: list[tuple[str, str]], *, cached: bool = False) -> list[list[int]]:
    """Token ids of every (text, field) in one tokenizer call (`cached`: texts seen recently from the
    tokenizer's cache); RequestError naming the first field that cannot be tokenized."""
    try:
        encode = tok.encode_cached if cached else tok.encode_many
        return encode([text for text, _ in texts])
    except UnencodableText as e:
        for text, field in texts:
            try:
                tok.encode(text)
            except UnencodableText:
                raise RequestError(str(e), field=field) from None
        raise


def build_row(
    tok: Tokenizer,
    question: Question,
    encoded: list[list[int]],
    state_ids: np.ndarray,
    *,
    truncate_left: bool,
    max_len: int,
    head_max_len: int,
) -> Row:
    """One question's row from its encoded `row_texts` and the state's `held_ids`; RequestError when its options do
    not all fit before `max_len`. A conversation (truncate_left) keeps its newest turns."""
    head_ids = encoded[0]
    option_ids = [[tok.mask_id] + ids[:OPTION_MAX_TOKENS] for ids in encoded[1:]]
    option_budget = head_max_len - sum(len(o) for o in option_ids)
    share = None
    if option_budget < OPTION_MIN_BUDGET:
        share = max(4, (head_max_len - OPTION_MIN_BUDGET) // max(1, len(option_ids)))
        option_ids = [o[:share] for o in option_ids]
        option_budget = head_max_len - sum(len(o) for o in option_ids)
    ids = [tok.cls_id] + head_ids[: max(HEAD_MIN_TOKENS, option_budget)] + [tok.sep_id]
    markers = []
    for option in option_ids:
        markers.append(len(ids))
        ids.extend(option)
    ids.append(tok.sep_id)
    room = max(0, max_len - len(ids) - 1)
    state_part = state_ids[max(0, len(state_ids) - room) :] if truncate_left else state_ids[:room]
    ids = np.concatenate((ids, state_part, (tok.sep_id,)), dtype=np.int32)[:max_len]
    markers = [m for m in markers if m < max_len]
    if len(markers) != len(option_ids):
        raise RequestError(
            f"question {question.qid!r}: only {len(markers)} of its {len(option_ids)} options fit in a row of "
            f"{max_len} tokens with {head_max_len} for the question; fewer or shorter options fit",
            field=f"questions.{question.qid}.criteria",
        )
    distinct = len({tuple(o) for o in option_ids})
    return Row(ids, markers, QTYPES[question.type], len(state_part), distinct, share)
