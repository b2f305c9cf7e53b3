"""The queues between the API and the workers: classes of work, their order, the doorbell, and the Redis script
that puts a message on a queue.

Every model has one Celery queue (a Redis list) per class of work, and a worker takes from them in CLASSES
order: a sync request before any job, a job before any batch; first in, first out within a class. The API
puts a message on with ENQUEUE (refused past a depth bound it gives); a worker takes the next one with the TAKE
script of laya_common/broker/transport.py.

Redis has no blocking command that moves the first message of several lists, so each model also has a
doorbell, a one-item list that is non-empty while some queue of the model may hold a message: ENQUEUE rings
it, TAKE silences it when every queue is empty and rings it again when it leaves a message behind. An idle
worker blocks on the doorbell (BLPOP), then runs TAKE (laya_common.broker.transport).

"""

from __future__ import annotations

CLASSES = ("sync", "jobs", "batches")  # the order a worker takes work in
INTERACTIVE = CLASSES[:2]  # what a running batch lets pass between two of its windows


def queue_name(model: str, work_class: str) -> str:
    """The Celery queue of one class of work for `model`: every worker serving `model` consumes it."""
    if work_class not in CLASSES:
        raise ValueError(f"unknown class of work {work_class!r}; the classes are {', '.join(CLASSES)}")
    return f"laya.{model}.{work_class}"


def queue_names(model: str) -> tuple[str, ...]:
    """`model`'s queues in the order a worker takes from them."""
    return tuple(queue_name(model, c) for c in CLASSES)


def parse(queue: str) -> tuple[str, str] | None:
    """(model, class of work) of a queue named by `queue_name`; None for any other queue."""
    prefix, _, rest = queue.partition(".")
    model, _, work_class = rest.rpartition(".")
    return (model, work_class) if prefix == "laya" and model and work_class in CLASSES else None


def bell_key(model: str) -> str:
    return f"laya:bell:{model}"


# KEYS: the queue, the model's doorbell, the result key a refusal is written to ('' for none). ARGV: the message,
# the depth bound (-1: none), the result's TTL. Returns the depth found before the message (it is then at its
# tail), or -1 - that depth when the bound refused it; a refusal {"ok": false, "error": "overloaded", "depth"} at
# the result key wakes a sync call waiting there at once.
ENQUEUE = """
local depth = redis.call('LLEN', KEYS[1])
local bound = tonumber(ARGV[2])
if bound >= 0 and depth >= bound then
  if KEYS[3] ~= '' then
    redis.call('RPUSH', KEYS[3], '{"ok": false, "error": "overloaded", "depth": ' .. depth .. '}')
    redis.call('EXPIRE', KEYS[3], ARGV[3])
  end
  return -1 - depth
end
redis.call('LPUSH', KEYS[1], ARGV[1])
redis.call('LPUSH', KEYS[2], 1)
redis.call('LTRIM', KEYS[2], 0, 0)
return depth
"""
