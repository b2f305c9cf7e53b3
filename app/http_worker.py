"""gunicorn's threaded worker, with the thread that answered a kept-alive request staying on the connection a
moment for its next one.

In gunicorn's gthread worker a kept-alive connection goes back to the main thread's poller after each
response; the next request wakes the main thread, which hands the connection to a pool thread, which
wakes in turn. A caller sending requests back to back (a sync client in a loop, a batch of sync
calls) pays those two wake-ups on every request: about 0.1 ms of a bare Flask round trip on the 2-core
CI machine (`docs/performance.md`). Here the answering thread waits up to LINGER_S on the socket and
reads the next request itself.

It lingers only while the process has no more connections than threads, so no connection can be
waiting for a thread meanwhile; one that arrives during a linger waits LINGER_S at most. Over TLS or
HTTP/2 it behaves as gthread does.
"""

from __future__ import annotations

import select

from gunicorn.workers.gthread import ThreadWorker

LINGER_S = 0.002


class LingeringThreadWorker(ThreadWorker):
    def handle(self, conn):
        keepalive = super().handle(conn)
        while keepalive is True and self._may_linger(conn) and _next_request_within(conn, LINGER_S):
            keepalive = super().handle(conn)
        return keepalive

    def _may_linger(self, conn) -> bool:
        return self.alive and not self.cfg.is_ssl and not conn.is_http2 and self.nr_conns <= self.cfg.threads


def _next_request_within(conn, timeout_s: float) -> bool:
    """Bytes of the next request are buffered already, or reach the socket within `timeout_s`."""
    if conn.parser.unreader.buf.getvalue():
        return True
    poller = select.poll()
    poller.register(conn.sock, select.POLLIN)
    return bool(poller.poll(timeout_s * 1000))
