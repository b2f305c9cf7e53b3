"""A worker's settings, read from LAYA_* environment variables: one table holds every name, default and meaning."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from laya_common import contract, settings
from laya_common.broker import queues
from laya_common.settings import Setting, SettingsError

# field -> its setting; `laya-worker --help` prints this table.
ENV = {
    "redis_url": Setting(
        "LAYA_REDIS_URL", contract.DEFAULT_REDIS_URL, "broker and results (redis://, rediss://, password)"
    ),
    "checkpoint": Setting("LAYA_CHECKPOINT", "", "checkpoint directory (the five artifacts); required"),
    "bundle": Setting("LAYA_CUDA_BUNDLE", "", "CUDA bundle directory (for the cuda executor)"),
    "executor": Setting(
        "LAYA_EXECUTOR",
        "auto",
        "auto (cuda with a Hopper GPU and a verified bundle), reference, cuda, or MODULE:FACTORY",
    ),
    "eager": Setting("LAYA_EAGER", False, "cuda executor: launch the kernels without CUDA graphs (1/0)"),
    "original_rope": Setting(
        "LAYA_ORIGINAL_ROPE",
        False,
        "cuda executor: RoPE from the bundle's tables, rounded as the bf16 path rounds (1/0)",
    ),
    "torch_readout": Setting(
        "LAYA_TORCH_READOUT",
        False,
        "cuda executor: the scorer and act head in torch ops (about 20 launches) instead of the bundle's two "
        "readout kernels (1/0)",
    ),
    "device": Setting("LAYA_DEVICE", "", "torch device of the reference executor (default: cuda if present, else cpu)"),
    "model": Setting(
        "LAYA_MODEL",
        "english",
        "model served: english, multilingual or typed-decisions (queues laya.<model>.sync, .jobs, .batches)",
    ),
    "heartbeat_ttl_s": Setting("LAYA_HEARTBEAT_TTL_S", 15, "readiness key TTL; refreshed every third of it"),
    "result_ttl_s": Setting("LAYA_RESULT_TTL_S", contract.DEFAULT_RESULT_TTL_S, "how long results stay fetchable"),
    "visibility_timeout_s": Setting(
        "LAYA_VISIBILITY_TIMEOUT_S",
        contract.DEFAULT_VISIBILITY_TIMEOUT_S,
        "an unacknowledged task is redelivered after this long; exceed the longest batch",
    ),
    "health_check_interval_s": Setting(
        "LAYA_REDIS_HEALTH_CHECK_S",
        contract.DEFAULT_HEALTH_CHECK_INTERVAL_S,
        "a broker connection idle this long is PINGed before its next command (kombu's health_check_interval)",
    ),
    "batch_chunk": Setting(
        "LAYA_BATCH_CHUNK",
        256,
        "most states scored between two progress updates of a batch (sorted by length together; the first chunks "
        "are shorter, from an eighth of this)",
    ),
    "batch_yield_ms": Setting(
        "LAYA_BATCH_YIELD_MS",
        100,
        "a running batch lets the sync requests and jobs waiting run first, between two of its forward passes, "
        "at most this often: how long it may hold an interactive caller",
    ),
    "linger_ms": Setting(
        "LAYA_LINGER_MS",
        50,
        "once no sync request or job waits, the worker waits this long for the next one itself before it goes back "
        "to Celery's consumer (0: not at all): one arriving meanwhile skips Celery's dispatch; a shutdown waits at "
        "most this long, a batch not at all",
    ),
    "spin_ms": Setting(
        "LAYA_SPIN_MS",
        5,
        "for this long into that wait the worker polls instead of sleeping (a core busy meanwhile): a process woken "
        "from sleep takes longer to wake and to launch the next pass (0: it sleeps at once)",
    ),
    "warm_buckets": Setting(
        "LAYA_WARM_BUCKETS",
        "all",
        "cuda executor: CUDA graphs captured at startup: all (every rows x tokens bucket: no request waits for a "
        "capture) or common (fewer, a faster start; another bucket is captured when first used, 10-30 ms)",
    ),
}


WARM_BUCKETS = ("all", "common")


@dataclass(frozen=True)
class WorkerSettings:
    redis_url: str
    checkpoint: str
    bundle: str
    executor: str
    eager: bool
    original_rope: bool
    torch_readout: bool
    device: str
    model: str
    heartbeat_ttl_s: int
    result_ttl_s: int
    visibility_timeout_s: int
    health_check_interval_s: int
    batch_chunk: int
    batch_yield_ms: int
    linger_ms: int
    spin_ms: int
    warm_buckets: str

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> WorkerSettings:
        """:raise SettingsError: naming the first variable with a bad value."""
        values = settings.read(ENV, environ)
        try:
            values["model"] = contract.canonical_model(values["model"], "LAYA_MODEL")
        except ValueError as e:
            raise SettingsError(str(e)) from None
        if values["warm_buckets"] not in WARM_BUCKETS:
            raise SettingsError(f"LAYA_WARM_BUCKETS={values['warm_buckets']!r}; use {' or '.join(WARM_BUCKETS)}")
        executor = values["executor"]
        if executor not in ("auto", "reference", "cuda") and ":" not in executor:
            raise SettingsError(f"LAYA_EXECUTOR={executor!r}; use auto, reference, cuda or MODULE:FACTORY")
        return cls(**values)

    def executor_options(self):
        from worker.engine.executors import ExecutorOptions

        return ExecutorOptions(
            device=self.device or None,
            bundle=Path(self.bundle) if self.bundle else None,
            eager=self.eager,
            original_rope=self.original_rope,
            torch_readout=self.torch_readout,
        )

    @property
    def queues(self) -> tuple[str, ...]:
        """The model's queues, in the order the worker takes from them."""
        return queues.queue_names(self.model)

    def check_files(self) -> None:
        """FileNotFoundError naming what is missing, before any process loads torch."""
        from laya_common.checkpoint import check_checkpoint

        if not self.checkpoint:
            raise FileNotFoundError(
                "LAYA_CHECKPOINT is not set; point it at a checkpoint directory "
                "(laya-bundle synthesize DIR --size tiny writes one)"
            )
        check_checkpoint(self.checkpoint)
        if self.executor == "cuda" and not (self.bundle and Path(self.bundle).is_dir()):
            raise FileNotFoundError(
                f"LAYA_EXECUTOR=cuda needs LAYA_CUDA_BUNDLE; {self.bundle or '(unset)'} is not a directory"
            )


def env_help() -> str:
    """The table of environment variables, for --help."""
    return settings.help_text(ENV)
