"""GET /openapi.json: the OpenAPI 3.1 document, generated from the marshmallow schemas and the error table."""

from __future__ import annotations

from flask import Blueprint, current_app, jsonify
from marshmallow import Schema, fields, missing, validate

from app import schemas
from app.errors import ERROR_STATUS
from laya_common import contract
from laya_common.version import version_info

bp = Blueprint("openapi", __name__)

COMPONENTS = (
    schemas.QuestionSchema,
    schemas.RequestSchema,
    schemas.Request04Schema,
    schemas.StatesSchema,
    schemas.BatchSchema,
    schemas.ResponseSchema,
    schemas.ErrorSchema,
    schemas.SubmittedSchema,
    schemas.JobSchema,
    schemas.BatchStatusSchema,
    schemas.HealthSchema,
    schemas.UsageSchema,
)
_TYPES = {
    fields.String: "string",
    fields.Integer: "integer",
    fields.Float: "number",
    fields.Boolean: "boolean",
    fields.Dict: "object",
    fields.List: "array",
}


def field_schema(field: fields.Field) -> dict:
    """JSON Schema of one marshmallow field."""
    if isinstance(field, fields.Nested):
        nested = field.nested if isinstance(field.nested, type) else type(field.nested)
        out: dict = {"$ref": f"#/components/schemas/{_name(nested)}"}
    else:
        out = {"type": t} if (t := _TYPES.get(type(field))) else {}
        if isinstance(field, fields.List):
            out["items"] = field_schema(field.inner)
        if isinstance(field, fields.Dict) and field.value_field is not None:
            out["additionalProperties"] = field_schema(field.value_field)
    for v in field.validators:
        if isinstance(v, validate.OneOf):
            out["enum"] = list(v.choices)
        elif isinstance(v, validate.Length):
            prefix = "Items" if isinstance(field, fields.List) else "Properties"
            if v.min is not None:
                out[f"min{prefix}"] = v.min
            if v.max is not None:
                out[f"max{prefix}"] = v.max
        elif isinstance(v, validate.Range) and v.min is not None:
            out["minimum"] = v.min
    if field.load_default is not missing and not callable(field.load_default):
        out["default"] = field.load_default
    if "description" in field.metadata:
        out["description"] = field.metadata["description"]
    return out


def schema_component(schema: type[Schema]) -> dict:
    declared = schema._declared_fields
    out = {"type": "object", "properties": {name: field_schema(f) for name, f in declared.items()}}
    required = [name for name, f in declared.items() if f.required]
    if required:
        out["required"] = required
    if schema.__doc__:
        out["description"] = " ".join(schema.__doc__.split())
    return out


def document(limits: dict, models: tuple[str, ...], versions: dict[str, str]) -> dict:
    ref = "#/components/schemas/{}".format

    def body(name: str) -> dict:
        return {"required": True, "content": {"application/json": {"schema": {"$ref": ref(name)}}}}

    def answer(name: str, description: str) -> dict:
        return {"description": description, "content": {"application/json": {"schema": {"$ref": ref(name)}}}}

    def resolved(response: dict) -> dict:
        header = {"description": "the served model that answers (see Request.model)", "schema": {"type": "string"}}
        return {**response, "headers": {"x-laya-model": header, contract.PROTOCOL_HEADER: protocol_header}}

    def timed(response: dict) -> dict:
        """A waited-for answer's headers: its job id and where its time went, in ms (TEI's names)."""
        described = {
            "x-job-id": "the request's id (GET /v1/jobs/<id> after a 504)",
            "x-queue-time": "ms from accepted to a worker starting on it",
            "x-inference-time": "ms in the worker's engine: prepare, pass, decode",
            "x-executor-time": "ms of the request's pass alone (on the GPU for cuda), where the executor measures it",
            "x-total-time": "ms in the API, from the request to the answer",
        }
        headers = {name: {"description": text, "schema": {"type": "string"}} for name, text in described.items()}
        return {**response, "headers": {**response["headers"], **headers}}

    protocol_header = {
        "description": f"the laya release whose protocol the answer is given in: {' or '.join(contract.PROTOCOLS)}",
        "schema": {"type": "string", "enum": list(contract.PROTOCOLS)},
    }
    protocol_param = [
        {
            "name": contract.PROTOCOL_HEADER,
            "in": "header",
            "description": f"the laya release whose /v1/systemone this request speaks (0.3 or 0.4 is enough); "
            f"without it, the server's default (LAYA_PROTOCOL, {contract.PROTOCOLS[0]} unless set). Under 0.3.20 the "
            f"body is Request and fields 0.3.20 does not know are ignored; under 0.4.15 it is Request04, answers "
            f"carry 0.4.15's fields (x_jev_confidence, usage.state_tokens, ...) and refusals its statuses",
            "schema": {"type": "string"},
        }
    ]
    both = {
        "required": True,
        "content": {"application/json": {"schema": {"oneOf": [{"$ref": ref("Request")}, {"$ref": ref("Request04")}]}}},
    }

    def errors(*statuses: int) -> dict:
        kinds: dict[int, list[str]] = {}
        for kind, status in ERROR_STATUS.items():
            kinds.setdefault(status, []).append(kind)
        out = {str(s): answer("Error", " or ".join(kinds[s])) for s in statuses}
        if "503" in out:
            retry = {"description": "overloaded: seconds until the queue ahead should have room", "schema": {}}
            out["503"] = {**out["503"], "headers": {"Retry-After": {**retry, "schema": {"type": "integer"}}}}
        return out

    submit_errors = errors(400, 401, 413, 415, 422, 500, 503)
    id_param = [{"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}]
    wait_param = [
        {
            "name": "wait",
            "in": "query",
            "description": "seconds to wait for it to finish before answering (at most the sync timeout)",
            "schema": {"type": "number", "minimum": 0},
        }
    ]
    page_params = [
        {"name": n, "in": "query", "schema": {"type": "integer", "minimum": m}}
        for n, m in (("offset", 0), ("limit", 1))
    ] + wait_param
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Laya decision service",
            "version": versions["version"],
            "x-commit": versions["commit"],
            "description": f"Laya typed decisions over the Jev /v1/systemone protocol. Models served: "
            f"{', '.join(models)} (default: {models[0]}). Limits: {limits}.",
        },
        "components": {
            "schemas": {_name(s): schema_component(s) for s in COMPONENTS},
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
        "paths": {
            "/v1/systemone": {
                "post": {
                    "summary": "Answer one request, waiting for it",
                    "parameters": protocol_param,
                    "requestBody": both,
                    "responses": {
                        "200": timed(resolved(answer("Response", "the answers, in order"))),
                        **submit_errors,
                        **errors(504),
                    },
                }
            },
            "/v1/systemone/batch": {
                "post": {
                    "summary": "Protocol 0.4.15 only: the same questions of up to 64 states, waiting for all; "
                    '{"results": each state\'s Response, "total_usage"}',
                    "requestBody": body("States"),
                    "responses": {
                        "200": resolved({"description": "results, in the order of the states"}),
                        **submit_errors,
                        **errors(504),
                    },
                }
            },
            "/v1/jobs": {
                "post": {
                    "summary": "Submit one request; poll its Location",
                    "parameters": protocol_param,
                    "requestBody": both,
                    "responses": {"202": resolved(answer("Submitted", "queued")), **submit_errors},
                }
            },
            "/v1/jobs/{id}": {
                "get": {
                    "summary": "A job's status, and its result when done",
                    "parameters": id_param + wait_param,
                    "responses": {"200": answer("Job", "status"), **errors(401, 404, 422, 503)},
                },
                "delete": {
                    "summary": "Cancel a queued or running job (its worker skips it)",
                    "parameters": id_param,
                    "responses": {"200": answer("Job", "cancelled"), **errors(401, 404, 409, 503)},
                },
            },
            "/v1/batches": {
                "post": {
                    "summary": "Submit many states (or JSON lines of requests) for scoring",
                    "parameters": protocol_param,
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {"schema": {"$ref": ref("Batch")}},
                            "application/x-ndjson": {
                                "schema": {"type": "string", "description": "one Request per line"}
                            },
                        },
                    },
                    "responses": {"202": resolved(answer("Submitted", "queued")), **submit_errors},
                }
            },
            "/v1/batches/{id}": {
                "get": {
                    "summary": "A batch's progress and a page of results, in input order",
                    "parameters": id_param + page_params,
                    "responses": {"200": answer("BatchStatus", "progress and results"), **errors(401, 404, 422, 503)},
                },
                "delete": {
                    "summary": "Cancel a queued batch, or stop a running one at its next window (its results so far "
                    "stay readable)",
                    "parameters": id_param,
                    "responses": {
                        "200": answer("BatchStatus", "cancelled, with its progress"),
                        **errors(401, 404, 409),
                    },
                },
            },
            "/health": {
                "get": {
                    "summary": "200 while every served model has a warm worker",
                    "security": [],
                    "responses": {"200": answer("Health", "ready"), **errors(503)},
                }
            },
            "/info": {
                "get": {
                    "summary": "What serves this API: each worker's model, executor, bundle, kernel mapping, "
                    "limits and versions",
                    "responses": {"200": {"description": "JSON"}},
                }
            },
            "/metrics": {"get": {"summary": "Prometheus metrics", "responses": {"200": {"description": "text"}}}},
        },
    }


def _name(schema: type[Schema]) -> str:
    return schema.__name__.removesuffix("Schema")


@bp.get("/openapi.json")
def openapi():
    return jsonify(
        document(
            {
                **contract.LIMITS,
                "max_body_bytes": current_app.config["MAX_BODY_BYTES"],
                "max_batch_states": current_app.config["MAX_BATCH_STATES"],
            },
            current_app.config["SERVED_MODELS"],
            version_info(),
        )
    )
