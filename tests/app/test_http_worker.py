"""app/http_worker.py under gunicorn: a kept-alive connection's next request is read by the thread that
answered the last one, only while connections do not outnumber threads; every request is answered."""

from __future__ import annotations

import http.client
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from recipe.stack import free_port, wait_until

HERE = Path(__file__).parent


@pytest.fixture
def serve():
    started = []

    def start(threads: int) -> int:
        port = free_port()
        popen = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "--worker-class", "counting_http_worker.CountingWorker",
             "--threads", str(threads), "--bind", f"127.0.0.1:{port}", "counting_http_worker:app"],
            cwd=HERE, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
        )  # fmt: skip
        started.append(popen)
        wait_until(lambda: _answers(port), 30, "gunicorn to listen")
        return port

    yield start
    for popen in started:
        popen.terminate()
        popen.wait(30)


def _answers(port: int) -> bool:
    try:
        send(http.client.HTTPConnection("127.0.0.1", port, timeout=5), b"ping")
        return True
    except OSError:
        return False


def send(conn: http.client.HTTPConnection, body: bytes) -> int:
    """POST `body`, check it comes back; the server's count of requests dispatched from its main thread."""
    conn.request("POST", "/", body)
    r = conn.getresponse()
    assert r.status == 200 and r.read() == body
    return int(r.headers["X-Dispatched"])


def test_requests_sent_back_to_back_stay_with_their_thread(serve):
    conn = http.client.HTTPConnection("127.0.0.1", serve(threads=4), timeout=10)
    counts = [send(conn, f"request {i}".encode()) for i in range(40)]
    # the first comes in on a new connection; a loaded machine may pause the client past the linger now and then
    assert counts[-1] - counts[0] <= 10, counts


def test_a_request_after_the_linger_comes_through_the_poller(serve):
    conn = http.client.HTTPConnection("127.0.0.1", serve(threads=4), timeout=10)
    counts = []
    for i in range(5):
        counts.append(send(conn, f"request {i}".encode()))
        time.sleep(0.05)
    assert counts == list(range(counts[0], counts[0] + 5))


def test_more_connections_than_threads_are_all_served_through_the_poller(serve):
    port = serve(threads=2)
    conns = [http.client.HTTPConnection("127.0.0.1", port, timeout=10) for _ in range(5)]
    for c in conns:
        send(c, b"open")  # five kept-alive connections for two threads: none may linger
    before = send(conns[0], b"x")
    errors: list[BaseException] = []

    def client(c: http.client.HTTPConnection, k: int) -> None:
        try:
            for i in range(20):
                send(c, f"client {k} request {i}".encode())
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=client, args=(c, k)) for k, c in enumerate(conns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert send(conns[0], b"y") - before == 5 * 20 + 1  # each request came back through the main thread
