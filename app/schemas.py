"""marshmallow schemas: the request shapes and limits the API checks, and the response shapes it documents.

The API checks shape and the limits in `contract.LIMITS`, and resolves the model; rules that need the
tokenizer or the reference's own checks (criteria, labels, option markers) run in the worker and come
back in the same error shape. Unknown keys inside a question pass through to the worker, as the
reference ignores them; unknown top-level keys are dropped.
"""

from __future__ import annotations

from marshmallow import EXCLUDE, INCLUDE, Schema, ValidationError, fields, validate, validates

from app.models import resolution_table
from laya_common import contract

QUESTION_TYPES = ("noul", "choice", "score")
MAX_OFFSET = 10**9
JOB_STATUSES = ("queued", "running", "done", "failed", "cancelled")


def _check_state(value: object) -> None:
    if not isinstance(value, str | dict | list):
        raise ValidationError("must be a string, an object or a list")


class QuestionSchema(Schema):
    class Meta:
        unknown = INCLUDE

    type = fields.String(required=True, validate=validate.OneOf(QUESTION_TYPES))
    instructions = fields.Raw(required=True, allow_none=True, metadata={"description": "text the model answers"})
    criteria = fields.Raw(
        allow_none=True,
        metadata={
            "description": "choice: labels or label->description; "
            "score: level descriptions; noul: true/false descriptions"
        },
    )
    labels = fields.Raw(metadata={"description": "noul only: the words for true and false"})
    option_order = fields.Raw(
        metadata={
            "description": "protocol 0.4.15 only (0.3.20 ignores it): the order the options are shown in, a "
            "permutation of their indices (a noul's: 0 false, 1 true); answers keep the criteria's order"
        }
    )


def _questions_field() -> fields.Dict:
    return fields.Dict(
        keys=fields.String(),
        values=fields.Nested(QuestionSchema),
        required=True,
        validate=validate.Length(max=contract.LIMITS["max_questions"]),
        metadata={"description": "question id -> question; answers keep this order"},
    )


def _model_field() -> fields.Raw:
    # any JSON value, as laya-serve takes it: what names no Laya model (a number too) goes to the default model
    return fields.Raw(load_default=None, allow_none=True, metadata={"description": resolution_table()})


class RequestSchema(Schema):
    """The /v1/systemone body (also a POST /v1/jobs body and one line of a JSON-lines batch)."""

    class Meta:
        unknown = EXCLUDE

    model = _model_field()
    state = fields.Raw(required=True, validate=_check_state, metadata={"description": "string, object or list"})
    questions = _questions_field()


def _control(description: str) -> fields.Raw:
    return fields.Raw(allow_none=True, metadata={"description": f"protocol 0.4.15 only: {description}"})


class Request04Schema(Schema):
    """The /v1/systemone body under protocol 0.4.15, after laya_common.protocol04's request rules: the 0.3.20
    fields, a state of any JSON kind, and the controls (checked by the worker against what it admits)."""

    class Meta:
        unknown = EXCLUDE

    model = _model_field()
    state = fields.Raw(required=True, metadata={"description": "any JSON value but null"})
    questions = _questions_field()
    max_len = _control("tokens a row may hold, at most the checkpoint's own max_len")
    head_max_len = _control("tokens of a row the question (instructions and options) may take")
    min_confidence = _control(
        "a threshold in [0, 1], or a map from 'default' or '<type>:<2|3-5|6-10|11+>' to one: answers below it "
        "say low_confidence, and every answer says abstention and abstention_threshold"
    )
    task = _control("checked, then ignored: laya's router reads it only when no model is named")
    lang = _control("a language code, checked, then ignored (as task)")
    lang_guess = _control("a language code, checked, then ignored (as task)")


class StatesSchema(Request04Schema):
    """POST /v1/systemone/batch (protocol 0.4.15): the same questions asked of up to 64 states, in one answer."""

    class Meta:
        unknown = EXCLUDE
        exclude = ("state",)

    states = fields.List(fields.Raw(), required=True, metadata={"description": "1 to 64 states, any JSON but null"})
    batch_size = fields.Raw(allow_none=True, metadata={"description": "checked, then ignored: states a pass takes"})
    sort_by_length = fields.Raw(allow_none=True, metadata={"description": "checked, then ignored"})


class BatchSchema(Schema):
    """POST /v1/batches as JSON: the same questions asked of many states."""

    class Meta:
        unknown = EXCLUDE

    model = _model_field()
    states = fields.List(fields.Raw(validate=_check_state), required=True, validate=validate.Length(min=1))
    questions = _questions_field()

    def __init__(self, *, max_states: int, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.max_states = max_states

    @validates("states")
    def _at_most_max_states(self, states: list, **_: object) -> None:
        if len(states) > self.max_states:
            raise ValidationError(f"{len(states)} states; at most {self.max_states} per batch")


class WaitSchema(Schema):
    """Query of GET /v1/jobs/<id>: how many seconds to wait for the job to finish before answering."""

    wait = fields.Float(load_default=0.0, validate=validate.Range(min=0))


class PageSchema(WaitSchema):
    """Query of GET /v1/batches/<id>: which slice of the results, and how long to wait for the batch to finish."""

    # bounded so that offset + limit stays a Redis list index (a 64-bit integer)
    offset = fields.Integer(load_default=0, validate=validate.Range(min=0, max=MAX_OFFSET))
    limit = fields.Integer(validate=validate.Range(min=1))


def _since04(field: fields.Field, description: str) -> fields.Field:
    field.metadata["description"] = f"protocol 0.4.15 only: {description}"
    return field


class UsageSchema(Schema):
    input_tokens = fields.Integer()
    output_tokens = fields.Integer()
    state_tokens = _since04(fields.Integer(), "tokens of the whole state")
    state_tokens_dropped = _since04(fields.Integer(), "the most state tokens one question's row could not hold")
    truncated = _since04(fields.Boolean(), "whether some row dropped state tokens")
    truncated_questions = _since04(fields.List(fields.String()), "the questions whose rows dropped state tokens")
    options = _since04(
        fields.Dict(),
        "present only when options lost their own token spans to the head budget: question id -> "
        "{total, distinct, tokens_per_option}",
    )


class ResponseSchema(Schema):
    """What /v1/systemone answers (laya 0.3.20's response, byte for byte)."""

    model = fields.String()
    answers = fields.Dict(
        keys=fields.String(),
        values=fields.Raw(),
        metadata={
            "description": "question id -> typed answer, in question order. Protocol 0.4.15 adds, in this order: "
            "with min_confidence low_confidence (only when below it), abstention and abstention_threshold; on a "
            "choice or a score x_jev_confidence, last; and a score's legend holds its levels as text"
        },
    )
    usage = fields.Nested(UsageSchema)


class ErrorSchema(Schema):
    status = fields.Integer(required=True)
    error = fields.String(required=True)
    detail = fields.String(required=True)
    field = fields.String(metadata={"description": "the request field at fault, dotted"})
    id = fields.String(metadata={"description": "the job id (504: fetch the answer from /v1/jobs/<id>)"})
    retry_after = fields.Integer(
        metadata={"description": "503: seconds after which the work queued ahead should have room (Retry-After)"}
    )


class SubmittedSchema(Schema):
    id = fields.String(required=True)
    status = fields.String(required=True, validate=validate.OneOf(JOB_STATUSES))


class JobSchema(SubmittedSchema):
    result = fields.Nested(ResponseSchema, metadata={"description": "when done: what /v1/systemone answers"})
    error = fields.Nested(ErrorSchema, metadata={"description": "when failed"})


class BatchStatusSchema(SubmittedSchema):
    done = fields.Integer(required=True)
    total = fields.Integer(required=True)
    offset = fields.Integer(required=True)
    results = fields.List(
        fields.Raw(),
        required=True,
        metadata={"description": "from offset, in input order: a response or an error object"},
    )
    next = fields.String(metadata={"description": "the next page, while results remain beyond this one"})
    error = fields.Nested(ErrorSchema, metadata={"description": "when the batch failed (executor failure)"})


class HealthSchema(Schema):
    status = fields.String(required=True, validate=validate.OneOf(("ok",)))
    models = fields.Dict(
        keys=fields.String(),
        values=fields.Integer(),
        required=True,
        metadata={"description": "each served model (LAYA_MODELS, the default first) -> warm workers"},
    )
    detail = fields.String(metadata={"description": "503: why a model has no warm worker"})
