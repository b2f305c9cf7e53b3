"""Reading request bodies: content type (415), a size cap counted while streaming (413), JSON (400), shape (422)."""

from __future__ import annotations

from flask import current_app, request
from marshmallow import ValidationError

from app.errors import ApiError, first_error
from app.models import resolved_model
from app.protocol import request_protocol
from app.schemas import BatchSchema, Request04Schema, RequestSchema, StatesSchema
from laya_common import contract, protocol04

JSON_TYPE = "application/json"
JSON_LINES_TYPES = ("application/x-ndjson", "application/jsonl", "application/x-jsonlines", "application/json-lines")
CHUNK_BYTES = 64 * 1024
# Built once: building a marshmallow schema copies every field (about 0.2 ms a request here); loading is reentrant.
REQUEST_SCHEMA = RequestSchema()
REQUEST04_SCHEMA = Request04Schema()
STATES_SCHEMA = StatesSchema()


def read_body(limit: int) -> bytearray:
    """The raw body, refused once more than `limit` bytes have arrived, whatever Content-Length claimed.

    :raise 413: the body (or its declared length) is over `limit`.
    """
    if request.content_length is not None and request.content_length > limit:
        raise _too_large(limit)
    body = bytearray()  # grown in place: a list of chunks joined at the end held the body twice
    while chunk := _read_chunk():
        if len(body) + len(chunk) > limit:
            raise _too_large(limit)
        body += chunk
    return body


def _read_chunk() -> bytes:
    """The next piece of the body. :raise 400: its framing is broken (a chunk size that is not hex, a chunk
    without its CRLF, a body shorter than its Content-Length): the HTTP server's parser raises as it reads."""
    from gunicorn.http.errors import ParseException

    try:
        return request.stream.read(CHUNK_BYTES)
    except (ParseException, OSError) as e:
        raise ApiError("bad_request", f"the body's framing is broken ({type(e).__name__})") from None


def require_content_type(*allowed: str) -> str:
    """:raise 415: the body is not one of `allowed` media types."""
    if request.mimetype not in allowed:
        raise ApiError(
            "unsupported_media_type", f"Content-Type {request.mimetype or '(none)'!r}; use {' or '.join(allowed)}"
        )
    return request.mimetype


def parse_json(body: bytes | bytearray, where: str = "body") -> object:
    """:raise 400: empty, not JSON (NaN and Infinity are not), or nested too deeply (contract.read_json).

    A bytearray is emptied once decoded, before it is parsed: the bytes, their text and the values parsed from it
    would otherwise be held at once (a maximal batch: 64 MB each).
    """
    if not body.strip():
        raise ApiError("bad_request", f"{where} is empty; send a JSON request (examples/ holds one of each kind)")
    try:
        text = body.decode("utf-8")  # UTF-8 only (RFC 8259 8.1)
        if isinstance(body, bytearray):
            body.clear()
        return contract.read_json(text)
    except ValueError as e:  # UnicodeDecodeError included
        raise ApiError("bad_request", f"{where} is not valid JSON: {e}") from None


def request_payload() -> dict:
    """The validated /v1/systemone body (also POST /v1/jobs), its `model` resolved to the served model; under
    protocol 0.4.15 with its controls and the protocol, which the worker answers in."""
    protocol = request_protocol()
    require_content_type(JSON_TYPE)
    body = parse_json(read_body(current_app.config["MAX_BODY_BYTES"]))
    payload = load_request(body, protocol)
    payload["model"] = resolved_model(payload["model"])
    return with_protocol(payload, protocol)


def states_request() -> dict:
    """The validated POST /v1/systemone/batch body (protocol 0.4.15's own route), its `model` resolved."""
    require_content_type(JSON_TYPE)
    body = parse_json(read_body(current_app.config["MAX_BODY_BYTES"]))
    if not isinstance(body, dict) or "states" not in body or "questions" not in body:
        raise ApiError("bad_request", "the body must be a JSON object with 'states' and 'questions'")
    protocol04.check_states_request(body)
    payload = STATES_SCHEMA.load(body)
    payload["model"] = resolved_model(payload["model"])
    return with_protocol(payload, contract.V04)


def load_request(body: object, protocol: str) -> dict:
    """A /v1/systemone body validated in `protocol`: under 0.4.15, laya_common.protocol04's request rules first
    (laya-serve's statuses), then its schema."""
    if protocol != contract.V04:
        return REQUEST_SCHEMA.load(body)
    if not isinstance(body, dict) or "questions" not in body:
        raise ApiError("bad_request", "the body must be a JSON object with 'state' and 'questions'")
    protocol04.check_request(body)
    return REQUEST04_SCHEMA.load(body)


def with_protocol(argument: dict, protocol: str) -> dict:
    """A task's argument with the protocol its answer is given in (0.3.20's arguments stay as they were)."""
    return argument if protocol == contract.V03 else {**argument, contract.PROTOCOL_KEY: protocol}


def batch_request() -> tuple[dict, list]:
    """(task argument {"model", "total", "questions"?}, its items: the states, or the requests) of a POST
    /v1/batches body: JSON (shared questions over many states) or JSON lines (one request per line)."""
    protocol = request_protocol()
    kind = require_content_type(JSON_TYPE, *JSON_LINES_TYPES)
    body = read_body(current_app.config["MAX_BATCH_BYTES"])
    max_states = current_app.config["MAX_BATCH_STATES"]
    if kind == JSON_TYPE:
        parsed = parse_json(body)
        batch = BatchSchema(max_states=max_states).load(parsed)
        argument = {"model": resolved_model(batch["model"]), "total": len(batch["states"])}
        if protocol == contract.V04:  # the controls apply to every state
            controls = {k: parsed[k] for k in protocol04.CONTROL_FIELDS if parsed.get(k) is not None}
            argument = {**argument, "controls": controls}
        return with_protocol({**argument, "questions": batch["questions"]}, protocol), batch["states"]
    requests = _json_lines(body, max_states, protocol)
    model = requests[0]["model"]
    for number, payload in enumerate(requests, start=1):
        if payload["model"] != model:
            raise ApiError(
                "validation",
                f"line {number}: model {payload['model']!r}; a batch serves one model (line 1: {model!r})",
                field=f"lines.{number}.model",
            )
    return with_protocol({"model": model, "total": len(requests)}, protocol), requests


def _json_lines(body: bytes, max_states: int, protocol: str) -> list[dict]:
    """Each non-empty line validated as a /v1/systemone body; errors name the line (counting from 1)."""
    lines = [(number, line) for number, line in enumerate(body.splitlines(), start=1) if line.strip()]
    if not lines:
        raise ApiError("validation", "no requests: send one JSON request per line", field="lines")
    if len(lines) > max_states:
        raise ApiError("validation", f"{len(lines)} lines; at most {max_states} per batch", field="lines")
    requests = []
    for number, line in lines:
        try:
            payload = load_request(parse_json(line, where=f"line {number}"), protocol)
        except contract.RequestError as e:
            raise ApiError(e.kind, f"line {number}: {e.detail}", field=f"lines.{number}") from None
        except ValidationError as e:
            field, message = first_error(e.messages)
            raise ApiError(
                "validation",
                f"line {number}: {field}: {message}",
                field=f"lines.{number}" + (f".{field}" if field else ""),
            ) from None
        try:
            payload["model"] = resolved_model(payload["model"])
        except ApiError as e:
            raise ApiError("validation", f"line {number}: {e.detail}", field=f"lines.{number}.model") from None
        requests.append(payload)
    return requests


def _too_large(limit: int) -> ApiError:
    return ApiError("payload_too_large", f"body over {limit} bytes")
