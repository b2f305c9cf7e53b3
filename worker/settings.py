"""A worker's settings, read from LAYA_* environment variables: one table holds every name, default and meaning."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path

from worker import contract

# field -> (environment variable, default, what it means); `laya-worker --help` prints this table.
ENV = {
    "redis_url": ("LAYA_REDIS_URL", contract.DEFAULT_REDIS_URL, "broker and results (redis://, rediss://, password)"),
    "checkpoint": ("LAYA_CHECKPOINT", "", "checkpoint directory (the five artifacts); required"),
    "bundle": ("LAYA_CUDA_BUNDLE", "", "CUDA bundle directory (for the cuda executor)"),
    "executor": ("LAYA_EXECUTOR", "auto", "auto (cuda with a Hopper GPU and a verified bundle), reference or cuda"),
    "eager": ("LAYA_EAGER", False, "cuda executor: launch the kernels without CUDA graphs (1/0)"),
    "original_rope": ("LAYA_ORIGINAL_ROPE", False,
                      "cuda executor: RoPE from the bundle's tables, rounded like the reference's bf16 path (1/0)"),
    "device": ("LAYA_DEVICE", "", "torch device of the reference executor (default: cuda if present, else cpu)"),
    "model": ("LAYA_MODEL", "english", "model served: english, multilingual or typed-decisions (queue laya.<model>)"),
    "heartbeat_ttl_s": ("LAYA_HEARTBEAT_TTL_S", 15, "readiness key TTL; refreshed every third of it"),
    "result_ttl_s": ("LAYA_RESULT_TTL_S", contract.DEFAULT_RESULT_TTL_S, "how long results stay fetchable"),
    "visibility_timeout_s": ("LAYA_VISIBILITY_TIMEOUT_S", contract.DEFAULT_VISIBILITY_TIMEOUT_S,
                             "an unacknowledged task is redelivered after this long; exceed the longest batch"),
    "batch_chunk": ("LAYA_BATCH_CHUNK", 64, "states scored between two progress updates of a batch"),
    "fail_after": ("LAYA_TEST_FAIL_AFTER", -1,
                   "tests only: the executor fails on every forward after this many post-warmup ones (-1: never)"),
    "fault": ("LAYA_TEST_FAULT", "raise",
              "tests only: how it fails: raise (a Python exception) or cuda (a device-side assert: a real CUDA error)"),
}


@dataclass(frozen=True)
class WorkerSettings:
    redis_url: str
    checkpoint: str
    bundle: str
    executor: str
    eager: bool
    original_rope: bool
    device: str
    model: str
    heartbeat_ttl_s: int
    result_ttl_s: int
    visibility_timeout_s: int
    batch_chunk: int
    fail_after: int
    fault: str

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> WorkerSettings:
        values = {}
        for f in fields(cls):
            name, default, _ = ENV[f.name]
            raw = environ.get(name, "")
            try:
                values[f.name] = _parse(raw, type(default)) if raw != "" else default
            except ValueError:
                raise ValueError(f"{name}={raw!r} is not a valid {type(default).__name__}") from None
        values["model"] = contract.canonical_model(values["model"], "LAYA_MODEL")
        if values["fault"] not in ("raise", "cuda"):
            raise ValueError(f"LAYA_TEST_FAULT={values['fault']!r}; use raise or cuda")
        if values["executor"] not in ("auto", "reference", "cuda"):
            raise ValueError(f"LAYA_EXECUTOR={values['executor']!r}; use auto, reference or cuda")
        return cls(**values)

    def executor_options(self):
        from worker.executors import ExecutorOptions

        return ExecutorOptions(device=self.device or None, bundle=Path(self.bundle) if self.bundle else None,
                               eager=self.eager, original_rope=self.original_rope)

    @property
    def queue(self) -> str:
        return contract.queue_name(self.model)

    def check_files(self) -> None:
        """FileNotFoundError naming what is missing, before any process loads torch."""
        from laya_common.checkpoint import check_checkpoint

        if not self.checkpoint:
            raise FileNotFoundError("LAYA_CHECKPOINT is not set; point it at a checkpoint directory "
                                    "(laya-bundle synthesize DIR --size tiny writes one)")
        check_checkpoint(self.checkpoint)
        if self.executor == "cuda" and not (self.bundle and Path(self.bundle).is_dir()):
            raise FileNotFoundError(f"LAYA_EXECUTOR=cuda needs LAYA_CUDA_BUNDLE; {self.bundle or '(unset)'} "
                                    "is not a directory")


def _parse(raw: str, kind: type):
    if kind is bool:
        flags = {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False}
        if raw.strip().lower() not in flags:
            raise ValueError(raw)
        return flags[raw.strip().lower()]
    return kind(raw)


def env_help() -> str:
    """The table of environment variables, for --help."""
    return "environment:\n" + "\n".join(f"  {name:32} {desc} (default: {default!r})"
                                        for name, default, desc in ENV.values())
