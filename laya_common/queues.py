"""The queues between the API and the workers: classes of work, their order, and the two Redis scripts that move
a message onto a queue and off it.

Every model has one Celery queue (a Redis list) per class of work, and a worker takes from them in CLASSES
order: a sync request before any job, a job before any batch; first in, first out within a class. The API
puts a message on with ENQUEUE (refused past a depth bound it gives), a worker takes the next one with TAKE.

Redis has no blocking command that moves the first message of several lists, so each model also has a
doorbell, a one-item list that is non-empty while some queue of the model may hold a message: ENQUEUE rings
it, TAKE silences it when every queue is empty and rings it again when it leaves a message behind. An idle
worker blocks on the doorbell (BLPOP), then runs TAKE (worker.service.redis_transport).

TAKE also records the message as unacknowledged, as kombu's Redis transport does after its BRPOP (its
`unacked` hash and `unacked_index` sorted set, which kombu's restore and worker.service.redelivery read), in the same
script: no moment exists at which a message is neither queued nor recorded, so a worker that dies at any
point leaves nothing to lose.
"""

from __future__ import annotations

CLASSES = ("sync", "jobs", "batches")  # the order a worker takes work in
INTERACTIVE = CLASSES[:2]  # what a running batch lets pass between two of its windows

# kombu's keys for unacknowledged messages (the default names of kombu.transport.redis.Channel, which the
# worker keeps); tests/service/test_redis_transport.py fails if kombu renames them
UNACKED_KEY = "unacked"
UNACKED_INDEX_KEY = "unacked_index"


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

# KEYS: a model's queues in class order, then the unacknowledged index and hash, then the doorbell. ARGV: how
# many of the queues (the first ones) to take from. Returns {queue, message} or nil. A message is taken from the
# right end (the API pushes on the left) and recorded as kombu records it: index score = now, hash field =
# delivery tag, value = [message as queued, exchange, routing key]. Its delivery tag is the last
# `"delivery_tag": "..."` of the message text; a request's own text sits in the body, a JSON string, where every
# quote is escaped, so it cannot make one.
TAKE = """
local function ring(n, bell)
  for j = 1, n do
    if redis.call('LLEN', KEYS[j]) > 0 then
      redis.call('LPUSH', bell, 1)
      redis.call('LTRIM', bell, 0, 0)
      return
    end
  end
  redis.call('DEL', bell)
end
local n = #KEYS - 3
local index, unacked, bell = KEYS[n + 1], KEYS[n + 2], KEYS[n + 3]
for i = 1, tonumber(ARGV[1]) do
  local message = redis.call('RPOP', KEYS[i])
  if message then
    local tag
    for found in string.gmatch(message, '"delivery_tag": "([^"]+)"') do tag = found end
    if tag then
      local now = redis.call('TIME')
      redis.call('ZADD', index, tonumber(now[1]) + tonumber(now[2]) / 1000000, tag)
      redis.call('HSET', unacked, tag, '[' .. message .. ', "", "' .. KEYS[i] .. '"]')
    end
    ring(n, bell)
    return {KEYS[i], message}
  end
end
ring(n, bell)
return nil
"""


def take_keys(model: str) -> list[str]:
    """TAKE's keys for `model`."""
    return [*queue_names(model), UNACKED_INDEX_KEY, UNACKED_KEY, bell_key(model)]
