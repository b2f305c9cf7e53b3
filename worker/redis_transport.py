"""kombu's Redis transport with two round trips' worth of Python taken out of every task the worker runs.

- One Redis client per channel for the commands kombu sends outside its BRPOP (recording a message as
  unacknowledged, acknowledging it). kombu builds a fresh `redis.Redis` for each, and building one
  fills its table of response callbacks: about a fifth of the consumer's profiled time per task.
- A task can acknowledge its message in the round trip that writes its answer (the keys below, then
  `acked`): the commands kombu's acknowledgement would send run after the answer is written, and the
  acknowledgement Celery makes when the task returns then has nothing left to send.

Acks late still holds: a message leaves the unacknowledged set only after (or with) its answer,
so a worker that dies before that round trip leaves it there for redelivery.
"""

from __future__ import annotations

from contextlib import contextmanager

from kombu.transport import redis as kombu_redis
from kombu.transport import virtual

# Delivery tags whose unacked entries a task's own answer pipeline removed (one worker, one task at a time).
_settled: set[str] = set()


class QoS(kombu_redis.QoS):
    def ack(self, delivery_tag):
        if delivery_tag in _settled:
            _settled.discard(delivery_tag)
            virtual.QoS.ack(self, delivery_tag)  # forget it here; Redis is done already
        else:
            super().ack(delivery_tag)


class Channel(kombu_redis.Channel):
    QoS = QoS
    _sync_client = None

    @contextmanager
    def conn_or_acquire(self, client=None):
        if client is not None:
            yield client
            return
        pool = self.pool  # a fresh pool after a reconnect: a fresh client on it
        if self._sync_client is None or self._sync_client.connection_pool is not pool:
            self._sync_client = self._create_client()
        yield self._sync_client


class Transport(kombu_redis.Transport):
    Channel = Channel


NAME = f"{__name__}:Transport"  # Celery's broker_transport setting


# kombu's keys for unacknowledged messages (the worker's Celery configuration leaves its defaults): a task
# acknowledges its message by removing its delivery tag from both, as kombu's QoS.ack does
UNACKED_INDEX_KEY = kombu_redis.Channel.unacked_index_key
UNACKED_KEY = kombu_redis.Channel.unacked_key


def acked(delivery_tag: str) -> None:
    """The task removed `delivery_tag` itself: Celery's acknowledgement of this message sends nothing."""
    _settled.add(delivery_tag)
