"""What the API, the worker and `laya-run` agree on: task names, error kinds, status codes, envelopes.

Standard library only, in `laya_common/`, which is all of the project `app/` imports: the API process never
loads torch.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import socket

TASK_DECIDE = "laya.decide"
TASK_DECIDE_BATCH = "laya.decide_batch"

# The service limits: every admitted request fits workspaces sized for 16 rows x max_len tokens, and its
# JSON is read and written again (Celery message, state text) well inside Python's recursion limit.
LIMITS = {"max_questions": 16, "max_markers": 2048, "max_json_depth": 128}

# The only table that maps an error kind to an HTTP status. `laya-run` uses it too, so a request
# gets the same status on the command line as over HTTP.
ERROR_STATUS = {
    "bad_request": 400,
    "unauthorized": 401,
    "not_found": 404,
    "conflict": 409,
    "payload_too_large": 413,
    "unsupported_media_type": 415,
    "validation": 422,
    "executor_failure": 500,
    "overloaded": 503,
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


# --- Which laya release's /v1/systemone a request speaks. ---

# The laya releases whose protocol the service speaks, by version; the first is the default unless LAYA_PROTOCOL
# says otherwise. A caller picks one per request with the PROTOCOL_HEADER (the major.minor is enough), and every
# answer names the one it was given in.
PROTOCOLS = ("0.3.20", "0.4.15")
V03, V04 = PROTOCOLS
PROTOCOL_HEADER = "x-laya-protocol"
PROTOCOL_KEY = "protocol"  # a task's argument names its protocol here, unless it is 0.3.20


def parse_protocol(value: str, where: str = PROTOCOL_HEADER) -> str:
    """The protocol `value` names ("0.4", "0.4.15", "0.3", ...); RequestError (400) naming `where` otherwise."""
    text = value.strip()
    for version in PROTOCOLS:
        if text in (version, version.rsplit(".", 1)[0]):
            return version
    raise RequestError(
        f"{where}: {value!r} is no protocol this service speaks; use one of {', '.join(PROTOCOLS)}",
        kind="bad_request",
    )


# --- Which model a request's `model` field names, as laya-serve 0.3.20 resolves it. ---

MODELS = ("english", "multilingual", "typed-decisions")  # the Laya checkpoints, by canonical name
# Other ids naming a Laya model, compared after stripping spaces and lowercasing: laya 0.3.20's aliases and
# the published checkpoint ids. `convaiinnovations/laya` is absent on purpose: laya-serve reads that
# documented id (the repository holding all three) as "choose for me", so it goes to the default model.
MODEL_ALIASES = {
    "en": "english",
    "laya": "english",
    "default": "english",
    "multi": "multilingual",
    "ml": "multilingual",
    "laya-multilingual": "multilingual",
    "convaiinnovations/laya-multilingual": "multilingual",
    "typed": "typed-decisions",
    "typed_decisions": "typed-decisions",
    "laya-typed-decisions": "typed-decisions",
    "decisions": "typed-decisions",
    "convaiinnovations/laya-typed-decisions": "typed-decisions",
}


def laya_model(model_id: object) -> str | None:
    """The canonical name of the Laya model `model_id` names, or None for anything else (a Jev client's own
    id such as "jev-1", an empty or missing one, `convaiinnovations/laya`)."""
    if not isinstance(model_id, str):
        return None
    key = model_id.strip().lower()
    key = MODEL_ALIASES.get(key, key)
    return key if key in MODELS else None


def path_like_model(model_id: object) -> bool:
    """Whether laya 0.4 refuses `model_id` as a checkpoint path or an unpublished hub id (with a 422) instead of
    choosing for the caller: a value naming no Laya model whose text starts with . or ~ or holds a slash."""
    if not model_id:
        return False
    text = str(model_id).strip()
    if laya_model(text) is not None or text.lower() == "convaiinnovations/laya":
        return False
    return text.startswith((".", "~")) or "/" in text or "\\" in text


def resolve_model(model_id: object, served: tuple[str, ...]) -> str:
    """The served model that answers a request naming `model_id`: the Laya model it names, or else the
    default (the first served). RequestError (422) for a Laya model that is not served."""
    model = laya_model(model_id) or served[0]
    if model not in served:
        asked = "" if model_id == model else f" (asked as {model_id!r})"
        raise RequestError(
            f"this service does not serve the Laya model {model!r}{asked}; it serves {', '.join(served)}", field="model"
        )
    return model


def canonical_model(name: str, variable: str) -> str:
    """The canonical name of the Laya model `name` (or an alias of it); ValueError naming `variable` otherwise."""
    model = laya_model(name)
    if model is None:
        raise ValueError(f"{variable}={name!r} names no Laya model; use {', '.join(MODELS)} (or an alias)")
    return model


def parse_models(value: str, variable: str) -> tuple[str, ...]:
    """The canonical names in a comma-separated list of Laya models, first the default; ValueError naming
    `variable` for an empty list or a name that is not a Laya model."""
    names = [name.strip() for name in value.split(",") if name.strip()]
    if not names:
        raise ValueError(f"{variable} is empty; list the Laya models to serve, e.g. {MODELS[0]}")
    return tuple(dict.fromkeys(canonical_model(name, variable) for name in names))


def error_body(kind: str, detail: str, *, field: str | None = None, **extra: object) -> dict:
    """The JSON body of every error: `{"status", "error", "detail", "field"?}` plus extra keys (a job id)."""
    body: dict = {"status": ERROR_STATUS[kind], "error": kind, "detail": detail}
    if field is not None:
        body["field"] = field
    body.update(extra)
    return body


def read_json(text: bytes | bytearray | str) -> object:
    """A request's JSON text as Python values, read strictly: ValueError saying why for text that is not
    JSON (bytes: not UTF-8 JSON), for the NaN and Infinity literals Python's json would let through
    (RFC 8259 has neither), and for arrays and objects nested deeper than LIMITS["max_json_depth"]."""
    limit = LIMITS["max_json_depth"]
    too_deep = f"arrays and objects nested deeper than {limit} levels"
    is_text = isinstance(text, str)
    try:
        # UTF-8 only (RFC 8259 8.1), where json.loads would also read UTF-16 and UTF-32 bytes
        value = json.loads(text if is_text else text.decode("utf-8"), parse_constant=_not_json)
    except RecursionError:
        raise ValueError(too_deep) from None
    # counting brackets first: only text with many is encoded again (for a str) and walked
    if text.count("[" if is_text else b"[") + text.count("{" if is_text else b"{") > limit:
        raw = text.encode("utf-8", "surrogatepass") if is_text else text
        if json_depth(raw) > limit:
            raise ValueError(too_deep)
    return value


def _not_json(literal: str) -> object:
    raise ValueError(f"{literal} is not JSON")


_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')
_NOT_BRACKETS = bytes(sorted(set(range(256)) - set(b"[]{}")))
_NESTING_STEP = [0] * 256
for _opening, _closing in (b"[]", b"{}"):
    _NESTING_STEP[_opening], _NESTING_STEP[_closing] = 1, -1


def json_depth(text: bytes | bytearray) -> int:
    """How deep arrays and objects nest in valid JSON text, counted in C-speed passes (a Python walk of a
    1 MB body of small arrays would hold the API's interpreter lock for a tenth of a second or more)."""
    brackets = _JSON_STRING.sub(b"", text).translate(None, _NOT_BRACKETS)
    return max(itertools.accumulate(map(_NESTING_STEP.__getitem__, brackets)), default=0)


def wire_json(obj: object) -> str:
    """JSON text as `laya-run` and the API write it: json.dumps defaults with non-ASCII kept as UTF-8, unless
    the object holds text UTF-8 cannot carry (a lone surrogate in a question id), which is then escaped."""
    text = json.dumps(obj, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(obj)
    return text


def ok_envelope(response: dict, timings: dict | None = None) -> dict:
    """What a task returns for an answered request."""
    return {"ok": True, "response": response, "timings": timings or {}}


def error_envelope(kind: str, detail: str, *, field: str | None = None) -> dict:
    """What a task returns for a request it could not answer (never an exception across Redis)."""
    envelope = {"ok": False, "error": kind, "detail": detail}
    if field is not None:
        envelope["field"] = field
    return envelope


# --- What the API and the workers share through Redis: queue and key names, Celery settings. ---

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
DEFAULT_RESULT_TTL_S = 86400  # how long job and batch results stay fetchable
# An unacknowledged task returns to its queue after this long; it must exceed the longest batch.
DEFAULT_VISIBILITY_TIMEOUT_S = 6 * 3600
# A broker connection idle this long is PINGed before its next command (kombu's default, passed to redis-py).
DEFAULT_HEALTH_CHECK_INTERVAL_S = 25
WORKERS_KEY = "laya:workers"  # set of every worker key ever announced; expired ones are pruned by readers
# Upper bounds (seconds) of the executor-time histogram the workers keep in Redis for /metrics.
EXECUTOR_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


def worker_key(model: str, node: str) -> str:
    """A worker's heartbeat: JSON {"state": "ready"|"failed", "tasks", "drain", ...}, expiring unless refreshed;
    "tasks" lists [id, delivery tag] of each task it is running (worker.service.heartbeat)."""
    return f"laya:worker:{model}:{node}"


def worker_node() -> str:
    """This process's name in its worker record ("node")."""
    return f"{socket.gethostname()}:{os.getpid()}"


def read_workers(redis) -> list[dict]:
    """Every worker record that has not expired: ready ones, and failed ones with the reason.

    Expired records are pruned from WORKERS_KEY on the way.
    """
    keys = sorted(redis.smembers(WORKERS_KEY))
    if not keys:
        return []
    records = redis.mget(keys)
    expired = [key for key, record in zip(keys, records, strict=True) if record is None]
    if expired:
        redis.srem(WORKERS_KEY, *expired)
    return [json.loads(record) for record in records if record is not None]


def result_key(job_id: str) -> str:
    """A task's envelope, as a one-item Redis list: a sync call pops it (BLPOP), a job fetch reads it (LINDEX)."""
    return f"laya:result:{job_id}"


def job_key(job_id: str) -> str:
    """A submitted job or batch: JSON {"kind": "job"|"batch", "model", "total"?}; its existence means 'known id'."""
    return f"laya:job:{job_id}"


def batch_input_key(batch_id: str) -> str:
    """A batch's input as a Redis list in input order: one JSON text per state, or per request (JSON lines)."""
    return f"laya:batch:{batch_id}:input"


def batch_results_key(batch_id: str) -> str:
    """A batch's results as a Redis list, one JSON document per state, appended in input order."""
    return f"laya:batch:{batch_id}:results"


def trace_key(job_id: str) -> str:
    """One request's stage times (hash: stage -> time.time()), written by each process it passed through."""
    return f"laya:trace:{job_id}"


# A request carrying this HTTP header (to an API with LAYA_TRACE=1) is traced; the API passes the
# request on with the Celery message header of the same name, which is how the worker knows.
TRACE_HEADER = "x-laya-trace"
TRACE_MESSAGE_HEADER = "laya_trace"
TRACE_TTL_S = 600


def write_trace(redis, job_id: str, stamps: dict[str, float]) -> None:
    """Add `stamps` to the request's trace in Redis (kept TRACE_TTL_S)."""
    pipe = redis.pipeline()
    for command in trace_commands(job_id, stamps):
        pipe.execute_command(*command)
    pipe.execute()


def trace_commands(job_id: str, stamps: dict[str, float]) -> list[tuple]:
    """`write_trace`'s commands, as Redis reads them."""
    key = trace_key(job_id)
    return [("HSET", key, *(x for pair in stamps.items() for x in pair)), ("EXPIRE", key, TRACE_TTL_S)]


def executor_metrics_key(model: str) -> str:
    """Hash of executor-time histogram counters: "bucket:<bound>" (observations above the bucket below, up to
    this bound: three commands per observation, where cumulative counters would take one per bucket),
    "count", "sum"."""
    return f"laya:metrics:executor:{model}"


# kombu's Redis channel stores a task's JSON body in base64 by default: a batch of 1.1 MB then travels as 1.5 MB, and
# the API's encoding and the worker's decoding of it took about 4 ms each (CPU machine). None: the JSON as it is.
TASK_BODY_ENCODING = None


def celery_config(
    redis_url: str,
    *,
    visibility_timeout_s: int = DEFAULT_VISIBILITY_TIMEOUT_S,
    health_check_interval_s: int = DEFAULT_HEALTH_CHECK_INTERVAL_S,
) -> dict:
    """Celery settings both sides use: Redis broker, JSON only, one unacked task per worker.

    No result backend: a task writes its envelope to `result_key` itself, in the round trip that also
    updates the job's metrics, and the API blocks on that key (BLPOP).
    """
    import ssl

    config = {
        "broker_url": redis_url,
        "task_serializer": "json",
        "accept_content": ["json"],
        "task_ignore_result": True,
        "task_acks_late": True,
        "worker_prefetch_multiplier": 1,
        "worker_concurrency": 1,
        "broker_connection_retry_on_startup": True,
        "broker_transport_options": {
            "visibility_timeout": visibility_timeout_s,
            "socket_connect_timeout": 5,
            "health_check_interval": health_check_interval_s,
            "body_encoding": TASK_BODY_ENCODING,
            # one Redis list per queue (the API writes every message at priority 0): a worker takes from its one
            # queue with BLMOVE, which reads one list (laya_common.broker.transport)
            "priority_steps": [0],
        },
        "redis_socket_connect_timeout": 5,
        "worker_hijack_root_logger": False,
    }
    if redis_url.startswith("rediss://") and "ssl_cert_reqs" not in redis_url:
        # Celery refuses a TLS URL without an explicit certificate policy; verify certificates by default.
        config["broker_use_ssl"] = {"ssl_cert_reqs": ssl.CERT_REQUIRED}
    return config
