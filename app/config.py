"""The API's settings: DEFAULTS, overridden by LAYA_<KEY> environment variables, then by a test mapping.

Read by `laya_common.settings`, as the worker's are: LAYA_API_KEY=1234 stays a string, LAYA_PORT=x fails
at startup with one line naming the variable.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from laya_common import contract, settings
from laya_common.settings import Setting

MIB = 1 << 20

# key -> its setting; `laya-api --help` prints this table.
SETTINGS = {
    "HOST": Setting("LAYA_HOST", "127.0.0.1", "address the API binds"),
    "PORT": Setting("LAYA_PORT", 8080, "port the API binds"),
    "REDIS_URL": Setting(
        "LAYA_REDIS_URL", contract.DEFAULT_REDIS_URL, "broker and results (redis://, rediss://, redis://:password@...)"
    ),
    "API_KEY": Setting("LAYA_API_KEY", "", "bearer token every /v1 route requires (empty: no auth)"),
    "REQUIRE_API_KEY": Setting(
        "LAYA_REQUIRE_API_KEY",
        False,
        "1: refuse to start without LAYA_API_KEY (docker-compose.yml sets it; 0 opens the API on purpose)",
    ),
    "MODELS": Setting(
        "LAYA_MODELS",
        "english",
        "comma-separated Laya models served, the default first; each has the queue laya.<model>",
    ),
    "PROTOCOL": Setting(
        "LAYA_PROTOCOL",
        contract.PROTOCOLS[0],
        f"laya release whose /v1/systemone a request without an x-laya-protocol header speaks "
        f"({', '.join(contract.PROTOCOLS)})",
    ),
    "SYNC_TIMEOUT_S": Setting(
        "LAYA_SYNC_TIMEOUT_S", 30.0, "how long POST /v1/systemone waits before answering 504 with the job id"
    ),
    "RESULT_TTL_S": Setting(
        "LAYA_RESULT_TTL_S", contract.DEFAULT_RESULT_TTL_S, "how long jobs and batches stay fetchable"
    ),
    "MAX_BODY_BYTES": Setting(
        "LAYA_MAX_BODY_BYTES", 1 * MIB, "body cap of /v1/systemone and /v1/jobs (counted while streaming)"
    ),
    "MAX_BATCH_BYTES": Setting("LAYA_MAX_BATCH_BYTES", 64 * MIB, "body cap of /v1/batches"),
    "MAX_BATCH_STATES": Setting("LAYA_MAX_BATCH_STATES", 10000, "most states (or JSON lines) in one batch"),
    "MAX_QUEUED_JOBS": Setting(
        "LAYA_MAX_QUEUED_JOBS", 1000, "jobs queued per model past which POST /v1/jobs answers 503 with Retry-After"
    ),
    "MAX_QUEUED_BATCHES": Setting(
        "LAYA_MAX_QUEUED_BATCHES",
        8,
        "batches queued per model past which POST /v1/batches answers 503 with Retry-After",
    ),
    "BATCH_PAGE_SIZE": Setting("LAYA_BATCH_PAGE_SIZE", 1000, "most results in one GET /v1/batches/<id> page"),
    "API_CONNECTIONS": Setting(
        "LAYA_API_CONNECTIONS",
        8192,
        "open connections per API process; each is a greenlet, so a waiting sync call, an idle or a slow client "
        "holds no thread",
    ),
    "API_PROCESSES": Setting("LAYA_API_PROCESSES", 1, "gunicorn worker processes"),
    "API_SPIN_MS": Setting(
        "LAYA_API_SPIN_MS",
        5.0,
        "while one sync call alone waits in an API process, and this long after, the process polls instead of "
        "sleeping (a core busy meanwhile; 0: it sleeps): it answers sooner (app/hot_wait.py)",
    ),
    "TRACE": Setting(
        "LAYA_TRACE",
        False,
        "1: requests sending x-laya-trace: 1 get their stage times stored in Redis (recipe/http_overhead.py)",
    ),
}
DEFAULTS = {key: setting.default for key, setting in SETTINGS.items()}


def from_env(environ: Mapping[str, str] = os.environ) -> dict:
    """Every setting that `environ` overrides. :raise SettingsError: naming a variable with a bad value."""
    return settings.read(SETTINGS, environ, overrides_only=True)


def env_help() -> str:
    return settings.help_text(SETTINGS)
