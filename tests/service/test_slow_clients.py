"""Idle and trickling connections hold nothing another request needs (with gunicorn's threads, 32 clients that
never finished their headers took the API down)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from urllib.parse import urlparse

from app.serve import raise_open_files_limit
from service.helpers import NOUL, Service, request_body

IDLE = 1000
TRICKLING = 100
TRICKLE_EVERY_S = 0.25


def test_idle_and_trickling_connections_leave_sync_requests_answered_at_once(stack, launcher):
    service = Service(stack.redis_url)  # an API of its own on the main stack's worker
    launcher.api(service)
    service.wait_healthy()
    raise_open_files_limit(4 * (IDLE + TRICKLING))
    url = urlparse(service.base_url)
    address = (url.hostname, url.port)
    idle = [socket.create_connection(address, timeout=10) for _ in range(IDLE)]
    trickling = [socket.create_connection(address, timeout=10) for _ in range(TRICKLING)]
    head = b"POST /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    stop = threading.Event()

    def trickle() -> None:  # one byte of a request head on each connection, every TRICKLE_EVERY_S
        sent = 0
        while not stop.wait(TRICKLE_EVERY_S) and sent < len(head):
            for sock in trickling:
                # a connection the server closed once its head took too long: as it should
                with contextlib.suppress(OSError):
                    sock.send(head[sent : sent + 1])
            sent += 1

    trickler = threading.Thread(target=trickle)
    trickler.start()
    walls = []
    try:
        time.sleep(1)  # every connection open and trickling before the probes
        for _ in range(20):
            t0 = time.monotonic()
            r = service.post("/v1/systemone", json=request_body("Please refund me.", refund=NOUL))
            walls.append(time.monotonic() - t0)
            assert r.status_code == 200, r.text
            assert service.get("/health").status_code == 200
    finally:
        stop.set()
        trickler.join()
        for sock in idle + trickling:
            sock.close()
    assert max(walls) < 1.0, walls
