"""Redelivery of the task a worker held when it died whole (SIGKILL, the OOM killer, a lost host).

kombu's Redis transport keeps every taken, unacknowledged message in the hash `unacked` (delivery tag
-> [message, exchange, routing key]) and the time it was taken in the sorted set `unacked_index`, and
hands it out again only after the visibility timeout, which must outlast the longest batch (hours).
A worker that dies whole would leave its task there that long. So after every heartbeat, each ready
worker restores the messages taken more than `grace_s` (the heartbeat TTL) ago that no live worker
names as the task it is running; every live worker names its task at each beat, three times per TTL.
kombu's own restore puts them back at the head of their queue, marked redelivered, atomically, so
two workers restoring at once deliver a message once. A worker that starts after all others died
does this at its first beat: the task waits for a fresh worker to be warm, not for the timeout.
A message a worker took but died before recording (it is still in that worker's taken list, see
worker.redis_transport) goes back on its queue as soon as the worker has no record left.
"""

from __future__ import annotations

import json
import logging
import time

from worker import contract

log = logging.getLogger("laya.worker")


class Redeliverer:
    def __init__(self, celery, redis, *, grace_s: float) -> None:
        self.celery, self.redis, self.grace_s = celery, redis, grace_s
        self._connection = None

    def __call__(self) -> list[str]:
        """Put back on their queues the tasks taken over `grace_s` ago that no live worker holds (their tags are
        returned), and the messages taken by workers that are gone but never recorded."""
        self._untake()
        qos = self._qos()
        old = self.redis.zrange(qos.unacked_index_key, "-inf", time.time() - self.grace_s, byscore=True)
        if not old:
            return []
        # read after the old tags, so a live worker holding one of them has named it by now
        held = {w.get("delivery_tag") for w in contract.read_workers(self.redis) if w["state"] == "ready"}
        orphans = [tag.decode() for tag in old if tag.decode() not in held]
        for tag in orphans:
            qos.restore_by_tag(tag)
        if orphans:
            log.warning("laya worker: redelivered %d task(s) held by a worker that is gone", len(orphans))
        return orphans

    def _untake(self) -> None:
        """Every message in the taken list of a worker without a record, back on its queue, where it is next."""
        present = {contract.taken_key(w["node"]) for w in contract.read_workers(self.redis)}
        for key in self.redis.scan_iter(match=contract.TAKEN_PREFIX + "*"):
            if key.decode() in present:
                continue
            # one worker consumes one queue, so every message of one list goes back to the same queue
            while (oldest := self.redis.lindex(key, -1)) is not None:
                queue = json.loads(oldest)["properties"]["delivery_info"]["routing_key"]
                if self.redis.lmove(key, queue, "RIGHT", "RIGHT") is None:
                    break
                log.warning("laya worker: put back on %s a message taken by a worker that is gone", queue)

    def _qos(self):
        if self._connection is None:
            self._connection = self.celery.connection_for_write()
        return self._connection.default_channel.qos
