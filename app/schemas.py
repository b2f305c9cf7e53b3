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


class UsageSchema(Schema):
    input_tokens = fields.Integer()
    output_tokens = fields.Integer()


class ResponseSchema(Schema):
    """What /v1/systemone answers (laya 0.3.20's response, byte for byte)."""

    model = fields.String()
    answers = fields.Dict(
        keys=fields.String(),
        values=fields.Raw(),
        metadata={"description": "question id -> typed answer, in question order"},
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
