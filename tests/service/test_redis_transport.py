"""The worker's kombu transport (worker/redis_transport.py): a task acknowledged in its answer's round trip,
one Redis client per channel; checked on the main stack's traffic and on a channel of its own."""

from __future__ import annotations

import threading

from kombu import Connection

from service.helpers import NOUL, request_body, wait_until
from worker import redis_transport

END = "laya-test-monitor-end"


def commands_during(service, action) -> list[tuple[str, str]]:
    """(command, client address) of every command the service's Redis database ran while `action()` ran
    (MONITOR), in order."""
    db = int(service.redis_url.rsplit("/", 1)[1])
    seen: list[tuple[str, str]] = []
    started = threading.Event()

    def listen() -> None:
        with service.redis().monitor() as m:
            started.set()
            for cmd in m.listen():
                if cmd["command"] == f"ECHO {END}":
                    return
                if cmd.get("db") == db:
                    seen.append((cmd["command"], f"{cmd['client_address']}:{cmd['client_port']}"))

    listener = threading.Thread(target=listen)
    listener.start()
    assert started.wait(10)
    try:
        action()
    finally:
        wait_until(lambda: service.redis().echo(END) and not listener.is_alive(), 10, "MONITOR to stop")
    return seen


def test_each_task_is_acknowledged_once_in_the_round_trip_that_writes_its_answer(stack):
    body = request_body("Please refund the duplicate charge.", refund=NOUL)
    job_ids = []

    def two_requests() -> None:
        # the worker takes the second message only once it has acknowledged the first (prefetch 1)
        for _ in range(2):
            r = stack.post("/v1/systemone", json=body)
            assert r.status_code == 200, r.text
            job_ids.append(r.headers["x-job-id"])

    seen = commands_during(stack, two_requests)
    commands = [c for c, _ in seen]
    taken = [c.split()[-1] for c in commands if c.startswith("ZADD unacked_index")]
    acks = [c.split()[-1] for c in commands if c.startswith("ZREM unacked_index")]
    assert len(taken) == 2 and acks == taken, commands  # one removal per message: Celery's own ack sent nothing
    for job_id, tag in zip(job_ids, taken, strict=True):
        answer = next(i for i, c in enumerate(commands) if c.startswith(f"RPUSH laya:result:{job_id}"))
        ack = next(i for i, c in enumerate(commands) if c.startswith(f"ZREM unacked_index {tag}"))
        assert answer < ack, "acknowledged before its answer was written"
        # one script writes the answer and then removes the message: nothing else runs in between
        assert commands[answer - 1].startswith("EVAL") and {who for _, who in seen[answer : ack + 2]} == {"lua:"}
        assert commands[ack + 1] == f"HDEL unacked {tag}"
    assert stack.redis().zcard("unacked_index") == 0


def test_a_channel_keeps_one_client_and_takes_a_fresh_one_after_its_pool_is_replaced(private_db):
    with Connection(private_db, transport=redis_transport.Transport) as conn:
        channel = conn.default_channel
        with channel.conn_or_acquire() as first, channel.conn_or_acquire() as again:
            assert first is again and first.ping()
        channel._disconnect_pools()  # what kombu does when the connection to Redis is lost
        with channel.conn_or_acquire() as fresh:
            assert fresh is not first and fresh.connection_pool is channel.pool and fresh.ping()
