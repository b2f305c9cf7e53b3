"""What the API, the worker and `laya-run` agree on: task names, error kinds, status codes, envelopes.

Standard library only: `app/` imports this module and nothing else from `worker/`, so the API process
never loads torch.
"""

from __future__ import annotations

TASK_DECIDE = "laya.decide"
TASK_DECIDE_BATCH = "laya.decide_batch"

# The service limits: every admitted request fits workspaces sized for 16 rows x max_len tokens.
LIMITS = {"max_questions": 16, "max_markers": 2048}

# The only table that maps an error kind to an HTTP status. `laya-run` uses it too, so a request
# gets the same status on the command line as over HTTP.
ERROR_STATUS = {
    "bad_request": 400,
    "unauthorized": 401,
    "not_found": 404,
    "payload_too_large": 413,
    "unsupported_media_type": 415,
    "validation": 422,
    "executor_failure": 500,
    "unavailable": 503,
    "timeout": 504,
}


class RequestError(Exception):
    """A request that cannot be answered, with the kind of error and the field it is about."""

    def __init__(self, detail: str, *, kind: str = "validation", field: str | None = None) -> None:
        if kind not in ERROR_STATUS:
            raise ValueError(f"unknown error kind {kind!r}; known: {sorted(ERROR_STATUS)}")
        super().__init__(detail)
        self.kind, self.detail, self.field = kind, detail, field

    def to_dict(self) -> dict:
        return error_body(self.kind, self.detail, field=self.field)


class ExecutorError(RuntimeError):
    """The executor (native code, the GPU) failed: that request answers 500 and the worker stops."""


def error_body(kind: str, detail: str, *, field: str | None = None, **extra: object) -> dict:
    """The JSON body of every error: `{"status", "error", "detail", "field"?}` plus extra keys (a job id)."""
    body: dict = {"status": ERROR_STATUS[kind], "error": kind, "detail": detail}
    if field is not None:
        body["field"] = field
    body.update(extra)
    return body


def ok_envelope(response: dict, timings: dict | None = None) -> dict:
    """What a task returns for an answered request."""
    return {"ok": True, "response": response, "timings": timings or {}}


def error_envelope(kind: str, detail: str, *, field: str | None = None) -> dict:
    """What a task returns for a request it could not answer (never an exception across Redis)."""
    envelope = {"ok": False, "error": kind, "detail": detail}
    if field is not None:
        envelope["field"] = field
    return envelope
