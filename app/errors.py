"""Every error the API answers: one exception, one body shape, one table of status codes.

Views raise ApiError(kind, detail, ...); the handlers registered here turn everything else (marshmallow,
Werkzeug, Redis, unexpected exceptions) into one too. A body is always JSON
{"status", "error", "detail", "field"?, "id"?} and never carries a stack trace or a path.
"""

from __future__ import annotations

import json
import logging

from flask import Flask, jsonify
from marshmallow import ValidationError
from werkzeug.exceptions import HTTPException

from laya_common import contract

log = logging.getLogger("laya.api")

# The contract's table plus kinds that only HTTP has (they never cross Redis).
ERROR_STATUS = {
    **contract.ERROR_STATUS,
    "method_not_allowed": 405,
    "uri_too_long": 414,
    "header_fields_too_large": 431,
    "internal": 500,
}
_KIND_BY_STATUS = {status: kind for kind, status in ERROR_STATUS.items()}  # 500 -> "internal", the later one


class ApiError(Exception):
    """An error answered over HTTP: its kind (the body's "error"), as contract.RequestError names it."""

    def __init__(self, kind: str, detail: str, **extra: object) -> None:
        if kind not in ERROR_STATUS:
            raise ValueError(f"unknown error kind {kind!r}")
        super().__init__(detail)
        self.kind, self.detail = kind, detail
        self.extra = {k: v for k, v in extra.items() if v is not None}  # field, id, models, retry_after

    @property
    def status(self) -> int:
        return ERROR_STATUS[self.kind]

    def to_dict(self) -> dict:
        return {"status": self.status, "error": self.kind, "detail": self.detail, **self.extra}


def json_error(status: int, detail: str) -> bytes:
    """The JSON error body for a status that no ApiError raised (one the HTTP server chose)."""
    return json.dumps({"status": status, "error": _KIND_BY_STATUS.get(status, "http_error"), "detail": detail}).encode()


def from_envelope(envelope: dict, **extra: object) -> ApiError:
    """The ApiError for a worker's error envelope ({"ok": false, "error", "detail", "field"?})."""
    return ApiError(envelope["error"], envelope["detail"], field=envelope.get("field"), **extra)


def first_error(messages: object, path: tuple[str, ...] = ()) -> tuple[str, str]:
    """(dotted field, message) of the first error in marshmallow's nested messages."""
    if isinstance(messages, dict):
        key, value = next(iter(messages.items()))
        step = () if key in ("value", "_schema") else (str(key),)  # Dict values nest under "value"
        return first_error(value, path + step)
    if isinstance(messages, list) and messages:
        return first_error(messages[0], path)
    return ".".join(path), str(messages)


def init_app(app: Flask) -> None:
    @app.errorhandler(ApiError)
    def _api_error(e: ApiError):
        headers = {"WWW-Authenticate": "Bearer"} if e.kind == "unauthorized" else {}
        if "retry_after" in e.extra:
            headers["Retry-After"] = str(e.extra["retry_after"])
        return jsonify(e.to_dict()), e.status, headers

    @app.errorhandler(contract.RequestError)
    def _request_error(e: contract.RequestError):
        return _api_error(ApiError(e.kind, e.detail, field=e.field))

    @app.errorhandler(ValidationError)
    def _validation(e: ValidationError):
        field, message = first_error(e.messages)
        return _api_error(ApiError("validation", f"{field}: {message}" if field else message, field=field or None))

    @app.errorhandler(HTTPException)
    def _http(e: HTTPException):
        kind = _KIND_BY_STATUS.get(e.code or 500)
        if kind is None or e.code is None:  # a status the table does not name: report it as it is
            return jsonify({"status": e.code, "error": "http_error", "detail": e.description}), e.code
        return _api_error(ApiError(kind, e.description or kind))

    @app.errorhandler(Exception)
    def _unexpected(e: Exception):
        unavailable = _unavailable_error(e)
        if unavailable is not None:
            return _api_error(unavailable)
        log.exception("laya api: unhandled error")
        return _api_error(ApiError("internal", f"internal error ({type(e).__name__})"))


def _unavailable_error(e: Exception) -> ApiError | None:
    """503 for a broker or Redis that cannot be reached, whichever client raised it, or that is full (it refuses
    writes past its memory bound rather than evicting queued work)."""
    from kombu.exceptions import OperationalError
    from redis.exceptions import ConnectionError, OutOfMemoryError, TimeoutError

    if isinstance(e, ConnectionError | TimeoutError | OperationalError):
        return ApiError("unavailable", f"the broker cannot be reached ({type(e).__name__})")
    if isinstance(e, OutOfMemoryError):
        return ApiError("overloaded", "Redis is at its memory bound; nothing was queued", retry_after=30)
    return None
