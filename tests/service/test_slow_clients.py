"""Idle and trickling connections hold nothing another request needs (with gunicorn's threads, 32 clients that
never finished their headers took the API down)."""

from __future__ import annotations

import contextlib
import signal
import socket
import threading
import time
from urllib.parse import urlparse

import requests

from app.serve import raise_open_files_limit
from laya_common.broker import queues
from service.helpers import API_KEY, NOUL, Service, request_body, wait_until

AUTH = {"headers": {"Authorization": f"Bearer {API_KEY}"}, "timeout": 60}
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


def test_sync_calls_waiting_for_a_paused_worker_leave_health_answered(launcher, private_db):
    service = Service(private_db)
    worker = launcher.worker(service, LAYA_HEARTBEAT_TTL_S="30")  # paused below, still counted warm
    launcher.api(service)
    service.wait_healthy()
    waiting = 64  # with 32 threads, 32 waiting sync calls took /health down
    answers: list[int] = []

    def sync_call() -> None:
        answers.append(requests.post(service.url("/v1/systemone"), json=request_body("hi", q=NOUL), **AUTH).status_code)

    worker.popen.send_signal(signal.SIGSTOP)
    callers = [threading.Thread(target=sync_call) for _ in range(waiting)]
    try:
        for caller in callers:
            caller.start()
        queued = queues.queue_name("english", "sync")
        wait_until(lambda: service.redis().llen(queued) >= waiting - 1, 30, "the calls to queue")  # one may be taken
        for _ in range(10):
            t0 = time.monotonic()
            assert requests.get(service.url("/health"), timeout=5).status_code == 200
            assert time.monotonic() - t0 < 1.0
    finally:
        worker.popen.send_signal(signal.SIGCONT)
        for caller in callers:
            caller.join(60)
    assert answers == [200] * waiting
