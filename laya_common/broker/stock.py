"""kombu's stock Redis transport, driven from outside the service: for the recipes that time it and the tests that
play a client the service does not control. Its channel's calls below are kombu's own (some of them internals:
`QoS.append`, `QoS._delivered`); tests/service/test_broker_transport.py checks each against the installed kombu.
"""

from __future__ import annotations

from kombu import Connection
from kombu.transport import redis as kombu_redis

from laya_common.broker import transport


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
        self._channel.client.delete(self._queue, *transport.RECORD_KEYS)
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
