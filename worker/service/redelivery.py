"""Redelivery of the task a worker held when it died whole (SIGKILL, the OOM killer, a lost host).

kombu's Redis transport keeps every taken, unacknowledged message in the hash `unacked` (delivery tag
-> [message, exchange, routing key]) and the time it was taken in the sorted set `unacked_index`, and
hands it out again only after the visibility timeout, which must outlast the longest batch (hours).
A worker that dies whole would leave its task there that long. So after every heartbeat, each ready
worker restores the messages taken more than `grace_s` (the heartbeat TTL) ago that no live worker
names as the task it is running; every live worker names its task at each beat, three times per TTL.
kombu's own restore puts them back at the head of their queue, marked redelivered, atomically, so
two workers restoring at once deliver a message once; then it rings every model's doorbell, so that an idle
worker takes it now. A worker that starts after all others died does this at its first beat: the task waits
for a fresh worker to be warm, not for the timeout. Since a worker takes a message and records it in one
step (laya_common.broker.transport's TAKE), there is no message a dead worker can leave anywhere else.
"""

from __future__ import annotations

import logging
import time

from laya_common import contract
from laya_common.broker import queues

log = logging.getLogger("laya.worker")


class Redeliverer:
    def __init__(self, celery, redis, *, grace_s: float) -> None:
        self.celery, self.redis, self.grace_s = celery, redis, grace_s
        self._connection = None

    def __call__(self) -> list[str]:
        """Put back on their queues the tasks taken over `grace_s` ago that no live worker holds; their tags."""
        qos = self._qos()
        old = self.redis.zrange(qos.unacked_index_key, "-inf", time.time() - self.grace_s, byscore=True)
        if not old:
            return []
        # read after the old tags, so a live worker holding one of them has named it by now
        held = {tag for w in contract.read_workers(self.redis) if w["state"] == "ready" for _, tag in w["tasks"]}
        orphans = [tag.decode() for tag in old if tag.decode() not in held]
        for tag in orphans:
            qos.restore_by_tag(tag)
        if orphans:
            pipe = self.redis.pipeline()
            for model in contract.MODELS:
                pipe.lpush(queues.bell_key(model), 1).ltrim(queues.bell_key(model), 0, 0)
            pipe.execute()
            log.warning("laya worker: redelivered %d task(s) held by a worker that is gone", len(orphans))
        return orphans

    def _qos(self):
        if self._connection is None:
            self._connection = self.celery.connection_for_write()
        return self._connection.default_channel.qos
