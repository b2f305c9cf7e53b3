"""An API process that polls instead of sleeping while a lone sync call waits for its answer.

A process woken from sleep by its answer takes longer to run again than one that polls (on a GPU host, 71 against
25-30 us a wake-up: docs/performance.md). While exactly one sync call of this process waits, and for
LAYA_API_SPIN_MS after the last one ends (a lone caller's next request comes soon after), the gevent hub runs an
idle watcher, so that its loop polls its sockets instead of blocking: a core is busy meanwhile. With two calls or
more waiting it sleeps as usual: the process has work enough then, and a core for each would be taken from the
worker.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import gevent


class HotWait:
    """The polling of the current thread's gevent hub, around each sync call's wait (`call`)."""

    def __init__(self, linger_s: float) -> None:
        self.linger_s = linger_s
        self.waiting = 0
        self._idle = None  # the hub's idle watcher while it polls
        self._cool = None  # the timer that ends the polling linger_s after the last call

    @contextmanager
    def call(self) -> Iterator[None]:
        if self.linger_s <= 0:
            yield
            return
        self.waiting += 1
        self._poll(self.waiting == 1)
        try:
            yield
        finally:
            self.waiting -= 1
            if self.waiting == 1:
                self._poll(True)
            elif self.waiting == 0 and self._idle is not None:
                self._cool = gevent.get_hub().loop.timer(self.linger_s, ref=False)
                self._cool.start(self._poll, False)

    def _poll(self, on: bool) -> None:
        if self._cool is not None:
            self._cool.stop()
            self._cool = None
        if on and self._idle is None:
            self._idle = gevent.get_hub().loop.idle(ref=False)  # never what keeps a stopping process's loop alive
            self._idle.start(_nothing)
        elif not on and self._idle is not None:
            self._idle.stop()
            self._idle = None


def _nothing() -> None:
    pass
