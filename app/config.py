"""The API's settings: DEFAULTS, overridden by LAYA_<KEY> environment variables, then by a test mapping.

Each value is converted to its default's type, so LAYA_API_KEY=1234 stays a string and LAYA_PORT=x fails
at startup naming the variable.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from worker import contract

MIB = 1 << 20

# key -> (default, meaning); `laya-api --help` prints this table with the LAYA_ prefix.
SETTINGS = {
    "HOST": ("127.0.0.1", "address the API binds"),
    "PORT": (8080, "port the API binds"),
    "REDIS_URL": (contract.DEFAULT_REDIS_URL, "broker and results (redis://, rediss://, redis://:password@...)"),
    "API_KEY": ("", "bearer token every /v1 route requires (empty: no auth)"),
    "MODELS": ("english", "comma-separated Laya models served, the default first; each has the queue laya.<model>"),
    "SYNC_TIMEOUT_S": (30.0, "how long POST /v1/systemone waits before answering 504 with the job id"),
    "RESULT_TTL_S": (contract.DEFAULT_RESULT_TTL_S, "how long jobs and batches stay fetchable"),
    "MAX_BODY_BYTES": (1 * MIB, "body cap of /v1/systemone and /v1/jobs (counted while streaming)"),
    "MAX_BATCH_BYTES": (64 * MIB, "body cap of /v1/batches"),
    "MAX_BATCH_STATES": (10000, "most states (or JSON lines) in one batch"),
    "BATCH_PAGE_SIZE": (1000, "most results in one GET /v1/batches/<id> page"),
    "API_THREADS": (32, "gunicorn threads (each sync call holds one while it waits)"),
    "API_PROCESSES": (1, "gunicorn worker processes"),
    "TRACE": (0, "1: requests sending x-laya-trace: 1 get their stage times stored in Redis (recipe/http_overhead.py)"),
}
DEFAULTS = {key: default for key, (default, _) in SETTINGS.items()}


def from_env(environ: Mapping[str, str] = os.environ, prefix: str = "LAYA_") -> dict:
    """Every setting that `environ` overrides, converted to its default's type."""
    overrides = {}
    for key, default in DEFAULTS.items():
        raw = environ.get(prefix + key)
        if raw is None or raw == "":
            continue
        try:
            overrides[key] = type(default)(raw)
        except ValueError:
            raise ValueError(f"{prefix}{key}={raw!r} is not a valid {type(default).__name__}") from None
    return overrides


def env_help(prefix: str = "LAYA_") -> str:
    return "environment:\n" + "\n".join(f"  {prefix + key:24} {desc} (default: {default!r})"
                                        for key, (default, desc) in SETTINGS.items())
