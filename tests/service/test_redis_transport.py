"""The worker's kombu transport (worker/redis_transport.py): a message recorded as unacknowledged without
waiting for the reply, a task acknowledged in its answer's round trip, one Redis client per channel; checked
on the main stack's traffic and on a channel of its own."""

from __future__ import annotations

import json
import multiprocessing
import os
import socket
import threading

import pytest
import redis
from kombu import Connection

from app import task_message
from service.helpers import NOUL, request_body, wait_until
from worker import contract, redis_transport
from worker.redelivery import Redeliverer

END = "laya-test-monitor-end"


def make_celery(url: str):
    from celery import Celery

    app = Celery("laya-test")
    app.conf.update(contract.celery_config(url), broker_transport=redis_transport.NAME)
    return app


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
    # each taken onto the worker's own list (BLMOVE; the first may have been sent before MONITOR started), and off
    # it in the transaction that records it
    assert any(c.startswith("BLMOVE ") for c in commands) and not any(c.startswith("BRPOP ") for c in commands)
    assert sum(c.startswith("LPOP " + contract.TAKEN_PREFIX) for c in commands) == 2, commands


def test_a_channel_keeps_one_client_and_takes_a_fresh_one_after_its_pool_is_replaced(private_db):
    with Connection(private_db, transport=redis_transport.Transport) as conn:
        channel = conn.default_channel
        with channel.conn_or_acquire() as first, channel.conn_or_acquire() as again:
            assert first is again and first.ping()
        channel._disconnect_pools()  # what kombu does when the connection to Redis is lost
        with channel.conn_or_acquire() as fresh:
            assert fresh is not first and fresh.connection_pool is channel.pool and fresh.ping()


def taken_message(url: str, body: str):
    """A channel of `url` and a message it took off a queue of its own (recorded as unacknowledged)."""
    conn = Connection(url, transport=redis_transport.Transport)
    channel = conn.default_channel
    producer = conn.Producer(channel)
    producer.publish(body, routing_key="laya-test-q", declare=[conn.SimpleQueue("laya-test-q").queue])
    message = channel.basic_get("laya-test-q")
    assert message is not None
    return conn, channel, message


def test_a_taken_message_is_recorded_without_waiting_and_read_before_anything_else(private_db):
    conn, channel, message = taken_message(private_db, "hello")
    with conn:
        tag = message.delivery_tag
        assert channel._unread is not None  # sent, reply not read yet
        assert redis_transport.execute_after_record(redis.Redis.from_url(private_db).pipeline().ping()) == [b"PONG"]
        assert channel._unread is None
        db = redis.Redis.from_url(private_db)
        assert db.zscore("unacked_index", tag) is not None
        raw, exchange, routing_key = json.loads(db.hget("unacked", tag))
        assert raw == message._raw and routing_key == "laya-test-q"  # kombu's own record: redelivery reads it
        # kombu's acknowledgement reads the pending reply first, on its way to removing the record
        conn2, channel2, message2 = taken_message(private_db, "again")
        with conn2:
            assert channel2._unread is not None
            message2.ack()
            assert channel2._unread is None
            assert db.zscore("unacked_index", message2.delivery_tag) is None
        message.ack()
        assert db.zcard("unacked_index") == 0 and db.hlen("unacked") == 0


def test_a_record_redis_refused_is_raised_with_the_answer_and_the_channel_goes_on(private_db):
    db = redis.Redis.from_url(private_db)
    db.set("unacked", "not a hash")  # the HSET of the record fails inside the transaction
    conn, channel, _ = taken_message(private_db, "hello")
    with conn:
        with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
            redis_transport.execute_after_record(db.pipeline().ping())
        assert channel._unread is None
        db.delete("unacked")
        assert channel.basic_get("laya-test-q") is None  # the one message was taken; the channel still answers
        with channel.conn_or_acquire() as client:
            assert client.ping()


def test_a_message_taken_by_brpop_is_recorded_as_it_was_queued(private_db):
    db = redis.Redis.from_url(private_db)
    with Connection(private_db, transport=redis_transport.Transport) as conn:
        queue = conn.SimpleQueue("laya-test-q").queue
        conn.Producer(conn.default_channel).publish({"state": "x" * 1000}, routing_key="laya-test-q", declare=[queue])
        # queued in a form of its own (no spaces), which kombu's encoding of the parsed message would not give
        queued = json.dumps(json.loads(db.rpop("laya-test-q")), separators=(",", ":")).encode()
        db.lpush("laya-test-q", queued)
        taken = []
        with conn.Consumer(queue, callbacks=[lambda _body, message: taken.append(message)]):
            conn.drain_events(timeout=10)  # kombu's BRPOP, as a worker consumes
        (message,) = taken
        redis_transport.execute_after_record(db.pipeline().ping())
        record = db.hget("unacked", message.delivery_tag)
        assert record.startswith(b"[" + queued + b", ")  # not encoded again
        raw, exchange, routing_key = json.loads(record)
        assert raw == message._raw and routing_key == "laya-test-q"
        message.ack()
        assert db.hlen("unacked") == 0


WORKER_OPTIONS = {"priority_steps": [0]}  # as contract.celery_config sets them: one list per queue


def take_and_die_before_recording(url: str) -> None:
    """A worker's consumer that is killed between taking a message and recording it (a child process)."""
    redis_transport.QoS.append = lambda *_: os._exit(0)
    conn = Connection(url, transport=redis_transport.Transport, transport_options=WORKER_OPTIONS)
    with conn, conn.Consumer(conn.SimpleQueue("laya-test-q").queue, callbacks=[lambda *_: None]):
        conn.drain_events(timeout=10)
    os._exit(1)  # nothing was taken


def test_a_message_taken_leaves_the_workers_list_with_its_record(private_db):
    db = redis.Redis.from_url(private_db)
    with Connection(private_db, transport=redis_transport.Transport, transport_options=WORKER_OPTIONS) as conn:
        queue = conn.SimpleQueue("laya-test-q").queue
        conn.Producer(conn.default_channel).publish({"state": "x"}, routing_key="laya-test-q", declare=[queue])
        taken = []
        with conn.Consumer(queue, callbacks=[lambda _body, message: taken.append(message)]):
            conn.drain_events(timeout=10)
        redis_transport.execute_after_record(db.pipeline().ping())
        (message,) = taken
        assert db.llen("laya-test-q") == 0 and db.keys(contract.TAKEN_PREFIX + "*") == []
        assert db.hexists("unacked", message.delivery_tag)
        message.ack()


def test_a_message_taken_by_a_worker_killed_before_recording_it_goes_back_on_its_queue(private_db):
    db = redis.Redis.from_url(private_db)
    db.lpush(
        "laya-test-q", task_message.encode(make_celery(private_db), "t", {"n": 1}, task_id="a", queue="laya-test-q")
    )
    queued = db.lindex("laya-test-q", 0)
    child = multiprocessing.get_context("fork").Process(target=take_and_die_before_recording, args=(private_db,))
    child.start()
    child.join(30)
    assert child.exitcode == 0, "the child did not take the message"
    taken = contract.taken_key(f"{socket.gethostname()}:{child.pid}")
    assert db.lrange(taken, 0, -1) == [queued] and db.llen("laya-test-q") == 0  # with BRPOP: gone
    assert Redeliverer(make_celery(private_db), db, grace_s=60)() == []  # no unacknowledged record to restore
    assert db.lrange("laya-test-q", 0, -1) == [queued] and not db.exists(taken)
