"""kombu's Redis transport, taking a worker's next message in class order with the TAKE script (why, and what
else departs from stock kombu: laya_common/broker/__init__.py).

A channel consuming exactly one model's queues (laya_common.broker.queues) waits on the model's doorbell and
runs TAKE pipelined behind the wait, on the same connection; any other set of queues is consumed by kombu's
BRPOP, unchanged. Celery's consumer, its task messages and kombu's own records stay as they are.

The one module that reaches into kombu: at its end, kombu's stock transport driven from outside, for the recipes
that time it and the tests that play a client the service does not control (`StockRecords`, `held`, `stock_ack`,
`publish`, `purge`). tests/service/test_broker_transport.py checks every internal used here against the installed
kombu.
"""

from __future__ import annotations

import logging
import time
from queue import Empty

from kombu import Connection
from kombu.transport import redis as kombu_redis
from kombu.transport import virtual
from kombu.utils.encoding import bytes_to_str
from kombu.utils.json import loads
from redis.exceptions import OutOfMemoryError

from laya_common.broker import queues

# kombu's keys for unacknowledged messages (the default names of its Redis Channel, which the worker keeps);
# tests/service/test_broker_transport.py fails if kombu renames them
UNACKED_KEY = "unacked"
UNACKED_INDEX_KEY = "unacked_index"
FULL_PAUSE_S = 0.5  # how long a worker waits before taking again from a Redis past its maxmemory
log = logging.getLogger("laya.worker")

# The worker's take. KEYS: a model's queues in class order, then the unacknowledged index and hash, then the
# doorbell. ARGV: how many of the queues (the first ones) to take from. Returns {queue, message} or nil. A message
# is taken from the right end (the API pushes on the left) and recorded as kombu records it: index score = now,
# hash field = delivery tag, value = [message as queued, exchange, routing key]. Its delivery tag is the last
# `"delivery_tag": "..."` of the message text; a request's own text sits in the body, a JSON string, where every
# quote is escaped, so it cannot make one. Every write a Redis past its maxmemory refuses (LPUSH, ZADD, HSET)
# comes before the pop: a script stopped by such a refusal has changed nothing, and the message stays queued.
TAKE = """
local n = #KEYS - 3
local index, unacked, bell = KEYS[n + 1], KEYS[n + 2], KEYS[n + 3]
local lengths, left = {}, 0
for j = 1, n do
  lengths[j] = redis.call('LLEN', KEYS[j])
  left = left + lengths[j]
end
for i = 1, tonumber(ARGV[1]) do
  if lengths[i] > 0 then
    local message = redis.call('LINDEX', KEYS[i], -1)
    if left > 1 then
      redis.call('LPUSH', bell, 1)
      redis.call('LTRIM', bell, 0, 0)
    end
    local tag
    for found in string.gmatch(message, '"delivery_tag": "([^"]+)"') do tag = found end
    if tag then
      local now = redis.call('TIME')
      redis.call('ZADD', index, tonumber(now[1]) + tonumber(now[2]) / 1000000, tag)
      redis.call('HSET', unacked, tag, '[' .. message .. ', "", "' .. KEYS[i] .. '"]')
    end
    redis.call('RPOP', KEYS[i])
    if left == 1 then redis.call('DEL', bell) end
    return {KEYS[i], message}
  end
end
if left > 0 then
  redis.call('LPUSH', bell, 1)
  redis.call('LTRIM', bell, 0, 0)
else
  redis.call('DEL', bell)
end
return nil
"""


def take_keys(model: str) -> list[str]:
    """TAKE's keys for `model`."""
    return [*queues.queue_names(model), UNACKED_INDEX_KEY, UNACKED_KEY, queues.bell_key(model)]


RECORD_KEYS = (UNACKED_INDEX_KEY, UNACKED_KEY)  # the keys `settle_lua` takes, in this order


def settle_lua(keys_at: int, tag_at: int) -> str:
    """Script lines that remove a message's unacknowledged record, for a task's answer to send in its own script:
    RECORD_KEYS at KEYS[keys_at], KEYS[keys_at + 1], the delivery tag at ARGV[tag_at] ('' for none)."""
    return f"""
if ARGV[{tag_at}] ~= '' then
  redis.call('ZREM', KEYS[{keys_at}], ARGV[{tag_at}])
  redis.call('HDEL', KEYS[{keys_at + 1}], ARGV[{tag_at}])
end
"""


def settle(pipe, tag: str) -> None:
    """Add the removal of `tag`'s unacknowledged record to `pipe` (a plain pipeline: a full Redis allows it)."""
    pipe.zrem(UNACKED_INDEX_KEY, tag).hdel(UNACKED_KEY, tag)


def held_task_ids(redis) -> dict[bytes, str]:
    """The messages taken and not acknowledged, from kombu's records: delivery tag -> task id."""
    return {tag: loads(raw)[0]["headers"]["id"] for tag, raw in redis.hgetall(UNACKED_KEY).items()}


class Records:
    """kombu's records of unacknowledged messages, read and put back through kombu's own QoS, for redelivery
    (worker.service.redelivery): its restore puts a message back at the head of its queue, marked redelivered,
    atomically, so two workers restoring at once deliver it once."""

    def __init__(self, celery, redis) -> None:
        self.celery, self.redis, self._connection = celery, redis, None

    def taken_before(self, when: float) -> list[str]:
        """The delivery tags of the messages taken before `when` (a Unix time) and not acknowledged."""
        return [tag.decode() for tag in self.redis.zrange(UNACKED_INDEX_KEY, "-inf", when, byscore=True)]

    def restore(self, tag: str) -> None:
        if self._connection is None:
            self._connection = self.celery.connection_for_write()
        self._connection.default_channel.qos.restore_by_tag(tag)


class QoS(kombu_redis.QoS):
    def ack(self, delivery_tag):
        """kombu removes the record in a MULTI, which a Redis past its maxmemory refuses whole, and that error stops
        Celery's consumer (the worker exits); the same ZREM and HDEL in a plain pipeline are allowed there."""
        with self.channel.conn_or_acquire() as client:
            pipe = client.pipeline(transaction=False)
            settle(pipe, delivery_tag)
            pipe.execute()
        virtual.QoS.ack(self, delivery_tag)

    def append(self, message, delivery_tag):
        """A message TAKE recorded already is not recorded again (kombu would send its ZADD and HSET)."""
        if self.channel.recorded is not None and self.channel.recorded == delivery_tag:
            self.channel.recorded = None
            virtual.QoS.append(self, message, delivery_tag)  # kombu's bookkeeping in this process only
        else:
            super().append(message, delivery_tag)

    def restore_visible(self, *args, **kwargs):
        """kombu's restore of old unacknowledged messages takes a lock with SET, which a Redis past its maxmemory
        refuses, and that error stops Celery's consumer; the restore waits for its next turn instead."""
        try:
            return super().restore_visible(*args, **kwargs)
        except OutOfMemoryError:
            log.warning("laya worker: Redis is past its maxmemory; kombu's restore of unacknowledged messages waits")
            return None


class Channel(kombu_redis.Channel):
    QoS = QoS
    recorded = None  # the delivery tag of the message TAKE just recorded, until QoS.append sees it
    _taking = None  # the model whose queues the wait in flight takes from (None: kombu's BRPOP)

    def _brpop_start(self, timeout=None):
        model = self._model_consumed()
        if model is None:
            self._taking = None
            return super()._brpop_start(timeout)
        self._taking = model
        self._in_poll = self.client.connection
        self._brpop_sent_at = time.monotonic()
        timeout = self.brpop_timeout if timeout is None else timeout
        keys = take_keys(model)
        # the wait ends on a ring or after `timeout`; TAKE runs either way, so a message queued without a ring
        # (a message kombu put back) is taken within `timeout`
        self.client.connection.send_packed_command(
            self.client.connection.pack_commands(
                [
                    ("BLPOP", queues.bell_key(model), timeout or 0),
                    ("EVAL", TAKE, len(keys), *keys, len(queues.CLASSES)),
                ]
            )
        )

    def _brpop_read(self, **options):
        if self._taking is None:
            return super()._brpop_read(**options)
        try:
            try:
                self.client.parse_response(self.client.connection, "BLPOP", **options)
                taken = self.client.parse_response(self.client.connection, "EVAL", **options)
            except self.connection_errors:
                self.client.connection.disconnect()  # the next wait reconnects; TAKE ran whole or not at all
                raise
            except OutOfMemoryError:  # refused before its pop: the message waits in its queue for room
                log.warning("laya worker: Redis is past its maxmemory; nothing is taken for %.1f s", FULL_PAUSE_S)
                time.sleep(FULL_PAUSE_S)  # the doorbell stays rung: without a pause this would spin
                raise Empty() from None
            if not taken:
                raise Empty()
            queue, raw = bytes_to_str(taken[0]), taken[1]
            message = loads(bytes_to_str(raw))
            self.recorded = message["properties"].get("delivery_tag")
            self.connection._deliver(message, queue)
            return True
        finally:
            self._in_poll = None
            self._flush_brpop_reauth()

    def _model_consumed(self) -> str | None:
        """The model whose queues (all of them, nothing else) this channel consumes, if so."""
        active = set(self.active_queues)
        parsed = {queues.parse(queue) for queue in active}
        models = {p[0] for p in parsed if p is not None}
        if None in parsed or len(models) != 1:
            return None
        (model,) = models
        return model if active == set(queues.queue_names(model)) else None


class Transport(kombu_redis.Transport):
    Channel = Channel


NAME = f"{__name__}:Transport"  # Celery's broker_transport setting


# --- kombu's stock transport, driven from outside (recipes and tests) ---


class StockRecords:
    """kombu's stock record of a delivered message (`QoS.append`) and its removal (`QoS.ack`), on one message
    queued and taken once, as recipe/broker_round_trips.py times them against the transport's own."""

    def __init__(self, redis_url: str, queue: str, raw: bytes) -> None:
        self._conn = Connection(redis_url)
        self._channel, self._queue = self._conn.channel(), queue
        self._channel.client.lpush(queue, raw)
        self._message = self._channel.basic_get(queue, no_ack=True)

    def append(self, tag: str) -> None:
        self._channel.qos.append(self._message, tag)

    def ack(self, tag: str) -> None:
        self._channel.qos.ack(tag)

    def close(self) -> None:
        self._channel.client.delete(self._queue, *RECORD_KEYS)
        self._conn.close()


def held(channel, tag: str) -> None:
    """Count `tag` as delivered and unacknowledged on `channel`, as kombu's consumer does on delivery."""
    channel.qos._delivered[tag] = None


def forget_held(channel) -> None:
    """Nothing held: kombu then puts nothing back when the channel closes."""
    channel.qos._delivered.clear()


def stock_ack(channel, tag: str) -> None:
    """kombu's own acknowledgement (a MULTI), beside the one transport.QoS replaces it with."""
    kombu_redis.QoS.ack(channel.qos, tag)


def publish(redis_url: str, queue: str, body: bytes, *, content_type: str, content_encoding: str, headers: dict):
    """A message on `queue` as any kombu client publishes one, whatever its content (a test of what is refused)."""
    with Connection(redis_url) as conn:
        channel = conn.default_channel
        message = channel.prepare_message(
            body, content_type=content_type, content_encoding=content_encoding, headers=headers
        )
        channel.basic_publish(message, exchange="", routing_key=queue)


def purge(connection, queue: str) -> None:
    """Empty `queue` on a kombu connection (Celery's `connection_for_write()`)."""
    connection.default_channel.queue_purge(queue)
