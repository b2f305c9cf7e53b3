"""Admission: whether new work of each class can be taken, and when to come back if not.

The workers publish how fast they drain each class of work (worker.service.heartbeat: seconds a sync request, a job
and a batch took, as moving averages). From those and the depth of a queue, the API tells a caller at once
what it would otherwise learn after waiting:

- a sync request is refused when the sync requests queued ahead of it (they go first, laya_common.broker.queues)
  cannot be answered within its timeout: its answer would be a 504 after the whole wait;
- a job or a batch is refused past a configured depth of its queue (LAYA_MAX_QUEUED_JOBS,
  LAYA_MAX_QUEUED_BATCHES), so a flood cannot queue more than the workers can drain;
- anything is refused while Redis is within MEMORY_HEADROOM of its memory bound, keeping room for the
  answers of the work already accepted (Redis refuses writes past `maxmemory` with policy noeviction).

A refusal is a 503 with Retry-After: the seconds until the queue ahead should have drained to where the
request would be accepted, from the same rates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

NO_BOUND = -1  # ENQUEUE's bound for "take it whatever the depth"
MEMORY_HEADROOM = 0.1  # the share of Redis's maxmemory kept for the answers of accepted work
UNKNOWN_RETRY_S = 5  # Retry-After when no worker has measured a rate yet


@dataclass(frozen=True)
class Fleet:
    """What the API knows of one model's workers: how many are warm, and their mean seconds per task of each
    class of work (absent until measured)."""

    ready: int
    seconds: dict[str, float] = field(default_factory=dict)

    @classmethod
    def of(cls, model: str, workers: list[dict]) -> Fleet:
        """From the workers' records (contract.read_workers)."""
        warm = [w for w in workers if w["state"] == "ready" and w["model"] == model]
        seconds: dict[str, list[float]] = {}
        for worker in warm:
            for work_class, s in (worker.get("drain") or {}).items():
                seconds.setdefault(work_class, []).append(s)
        return cls(len(warm), {c: sum(v) / len(v) for c, v in seconds.items()})

    def per_task(self, work_class: str) -> float | None:
        return self.seconds.get(work_class)


def sync_bound(fleet: Fleet, timeout_s: float) -> int:
    """The depth of the sync queue at which a new sync request is refused (NO_BOUND before any rate is known).

    The request would wait for each one ahead and itself, spread over the warm workers, after whatever is
    running when it arrives (a job, or one window of a batch, about a request's time): it is taken while
    that fits in `timeout_s`, and always when nothing is queued.
    """
    per_request = fleet.per_task("sync")
    if per_request is None or fleet.ready == 0:
        return NO_BOUND
    running = max(per_request, fleet.per_task("jobs") or 0.0)
    return max(1, math.floor((timeout_s - running) * fleet.ready / per_request))


def sync_retry_after(fleet: Fleet, depth: int, timeout_s: float) -> int:
    """Seconds until a sync request refused at `depth` would be taken."""
    per_request = fleet.per_task("sync")
    if per_request is None or fleet.ready == 0:
        return UNKNOWN_RETRY_S
    running = max(per_request, fleet.per_task("jobs") or 0.0)
    return max(1, math.ceil((depth + 1) * per_request / fleet.ready + running - timeout_s))


def queued_retry_after(fleet: Fleet, work_class: str, depth: int, bound: int) -> int:
    """Seconds until a queue of jobs or batches refused at `depth` (its bound `bound`) has room again."""
    per_task = fleet.per_task(work_class)
    if per_task is None or fleet.ready == 0:
        return UNKNOWN_RETRY_S
    return max(1, math.ceil((depth - bound + 1) * per_task / fleet.ready))


def memory_full(info: dict) -> bool:
    """Redis's INFO memory says less than MEMORY_HEADROOM of its bound is left (never without a bound)."""
    bound = int(info.get("maxmemory", 0))
    return bound > 0 and int(info.get("used_memory", 0)) >= (1 - MEMORY_HEADROOM) * bound
