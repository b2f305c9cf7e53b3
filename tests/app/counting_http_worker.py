"""A WSGI app served by a LingeringThreadWorker that counts the requests its main thread handed to the pool:
each response says how many so far (tests/app/test_http_worker.py runs it under gunicorn)."""

from __future__ import annotations

from app.http_worker import LingeringThreadWorker

dispatched = 0  # requests the main thread handed to a pool thread (a new connection, or one back from the poller)


class CountingWorker(LingeringThreadWorker):
    def enqueue_req(self, conn):
        global dispatched
        dispatched += 1
        super().enqueue_req(conn)


def app(environ, start_response):
    body = environ["wsgi.input"].read()
    start_response("200 OK", [("Content-Type", "text/plain"), ("X-Dispatched", str(dispatched))])
    return [body]
