"""Redelivery of the task a worker held when it died whole (SIGKILL, the OOM killer, a lost host).

kombu's Redis transport keeps a record of every taken, unacknowledged message (laya_common.broker.transport's
Records reads and restores them), and hands it out again only after the visibility timeout, which must outlast
the longest batch (hours).
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
from laya_common.broker.transport import Records

log = logging.getLogger("laya.worker")


class Redeliverer:
    def __init__(self, celery, redis, *, grace_s: float) -> None:
        self.redis, self.grace_s, self.records = redis, grace_s, Records(celery, redis)

    def __call__(self) -> list[str]:
        """Put back on their queues the tasks taken over `grace_s` ago that no live worker holds; their tags."""
        old = self.records.taken_before(time.time() - self.grace_s)
        if not old:
            return []
        # read after the old tags, so a live worker holding one of them has named it by now
        held = {tag for w in contract.read_workers(self.redis) if w["state"] == "ready" for _, tag in w["tasks"]}
        orphans = [tag for tag in old if tag not in held]
        for tag in orphans:
            self.records.restore(tag)
        if orphans:
            pipe = self.redis.pipeline()
            for model in contract.MODELS:
                pipe.lpush(queues.bell_key(model), 1).ltrim(queues.bell_key(model), 0, 0)
            pipe.execute()
            log.warning("laya worker: redelivered %d task(s) held by a worker that is gone", len(orphans))
        return orphans
