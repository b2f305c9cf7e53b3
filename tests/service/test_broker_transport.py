"""Taking work in class order (laya_common.broker.queues, laya_common/broker/transport.py): the scripts on a Redis of
their own, kombu's consumer with our transport, the real worker's commands (MONITOR), and the kombu internals
the transport replaces, checked against the installed kombu so that an upgrade that moves one fails here."""

from __future__ import annotations

import inspect
import json
import multiprocessing
import os
import threading
from importlib import metadata

import pytest
import redis
from kombu import Connection
from kombu.transport import redis as kombu_redis
from kombu.transport.virtual import base as virtual_base
from packaging.requirements import Requirement

from laya_common import contract
from laya_common.broker import messages, queues, transport
from service.helpers import NOUL, request_body, wait_until
from worker.service.redelivery import Redeliverer

END = "laya-test-monitor-end"
MODEL = "english"


def make_celery(url: str):
    from celery import Celery

    app = Celery("laya-test")
    app.conf.update(contract.celery_config(url), broker_transport=transport.NAME)
    return app


def enqueue(db, celery, work_class: str, task_id: str, *, bound: int = -1, result: str = "") -> int:
    queue = queues.queue_name(MODEL, work_class)
    message = messages.encode(celery, contract.TASK_DECIDE, {"n": task_id}, task_id=task_id, queue=queue)
    return db.eval(queues.ENQUEUE, 3, queue, queues.bell_key(MODEL), result, message, bound, 60)


def take(db, classes: int = len(queues.CLASSES)):
    keys = transport.take_keys(MODEL)
    return db.eval(transport.TAKE, len(keys), *keys, classes)


def test_take_goes_in_class_order_first_in_first_out_and_records_each_as_kombu_does(private_db):
    db, celery = redis.Redis.from_url(private_db), make_celery(private_db)
    for work_class, task_id in [("batches", "b1"), ("jobs", "j1"), ("sync", "s1"), ("jobs", "j2"), ("sync", "s2")]:
        enqueue(db, celery, work_class, task_id)
    assert db.lrange(queues.bell_key(MODEL), 0, -1) == [b"1"]  # rung, once however many messages
    order = []
    while (taken := take(db)) is not None:
        queue, raw = taken[0].decode(), taken[1]
        message = json.loads(raw)
        order.append(message["headers"]["id"])
        tag = message["properties"]["delivery_tag"]
        assert json.loads(db.hget(transport.UNACKED_KEY, tag)) == [message, "", queue]  # kombu's record
        assert db.zscore(transport.UNACKED_INDEX_KEY, tag) is not None
        # the doorbell rings while a message waits, and is silent once none does
        assert db.exists(queues.bell_key(MODEL)) == (len(order) < 5)
    assert order == ["s1", "s2", "j1", "j2", "b1"]
    assert not db.exists(queues.bell_key(MODEL))


def test_a_batch_lets_pass_only_sync_requests_and_jobs(private_db):
    db, celery = redis.Redis.from_url(private_db), make_celery(private_db)
    enqueue(db, celery, "batches", "b1")
    assert take(db, classes=len(queues.INTERACTIVE)) is None
    assert db.exists(queues.bell_key(MODEL))  # the batch still waits: the doorbell stays rung for the consumer
    enqueue(db, celery, "jobs", "j1")
    assert json.loads(take(db, classes=len(queues.INTERACTIVE))[1])["headers"]["id"] == "j1"


def test_enqueue_refuses_past_its_bound_and_wakes_a_sync_waiter_at_once(private_db):
    db, celery = redis.Redis.from_url(private_db), make_celery(private_db)
    assert [enqueue(db, celery, "sync", f"s{i}", bound=2) for i in range(2)] == [0, 1]
    assert enqueue(db, celery, "sync", "s2", bound=2, result="laya:result:s2") == -3  # refused at depth 2
    assert db.llen(queues.queue_name(MODEL, "sync")) == 2
    refusal = db.blpop(["laya:result:s2"], timeout=1)
    assert json.loads(refusal[1]) == {"ok": False, "error": "overloaded", "depth": 2}


def test_a_take_that_redis_refuses_for_memory_changes_nothing(bounded_redis):
    """Past maxmemory Redis refuses a script's ZADD and HSET, not its RPOP; TAKE writes first and pops last, so
    the message is neither lost (popped, not recorded) nor recorded twice: it waits for room."""
    url, db, fill = bounded_redis
    celery = make_celery(url)
    enqueue(db, celery, "jobs", "j1")
    enqueue(db, celery, "jobs", "j2")
    fill()
    before = {key: db.dump(key) for key in (queues.queue_name(MODEL, "jobs"), queues.bell_key(MODEL))}
    with pytest.raises(redis.exceptions.OutOfMemoryError):
        take(db)
    assert {key: db.dump(key) for key in before} == before
    assert db.hlen(transport.UNACKED_KEY) == 0 and db.zcard(transport.UNACKED_INDEX_KEY) == 0
    db.flushdb()  # room again (the messages too are gone; queue one)
    enqueue(db, celery, "jobs", "j3")
    assert json.loads(take(db)[1])["headers"]["id"] == "j3"


def test_an_acknowledgement_goes_through_a_full_redis(bounded_redis):
    """kombu's own QoS.ack sends MULTI, which a Redis past maxmemory refuses whole, and that error stops Celery's
    consumer; this transport's goes through."""
    url, db, fill = bounded_redis
    with Connection(url, transport=transport.Transport) as conn:
        channel = conn.default_channel
        for tag in ("ours", "kombus"):
            db.zadd(transport.UNACKED_INDEX_KEY, {tag: 1.0})
            db.hset(transport.UNACKED_KEY, tag, json.dumps([{}, "", "q"]))
            transport.held(channel, tag)
        fill()
        with pytest.raises(redis.exceptions.OutOfMemoryError):
            transport.stock_ack(channel, "kombus")
        channel.qos.ack("ours")
        transport.forget_held(channel)
    assert db.hkeys(transport.UNACKED_KEY) == [b"kombus"] and db.zrange(transport.UNACKED_INDEX_KEY, 0, -1) == [
        b"kombus"
    ]


def test_kombu_consumer_with_this_transport_takes_in_class_order_messages_kombu_published(private_db):
    """kombu's own publish rings no doorbell: the consumer still takes within its wait's timeout, in class order."""
    db = redis.Redis.from_url(private_db)
    names = queues.queue_names(MODEL)
    with Connection(private_db, transport=transport.Transport) as conn:
        declared = [conn.SimpleQueue(name).queue for name in names]
        producer = conn.Producer(conn.default_channel)
        for name in reversed(names):  # batches first, sync last
            producer.publish({"from": name}, routing_key=name, declare=declared)
        taken = []
        with conn.Consumer(declared, callbacks=[lambda body, message: taken.append((body["from"], message))]):
            while len(taken) < 3:
                conn.drain_events(timeout=10)
        assert [name for name, _ in taken] == list(names)
        for _, message in taken:
            assert db.hexists(transport.UNACKED_KEY, message.delivery_tag)  # recorded by TAKE, not again by kombu
            message.ack()
        assert db.hlen(transport.UNACKED_KEY) == 0 and db.zcard(transport.UNACKED_INDEX_KEY) == 0


def take_and_die(url: str) -> None:
    """A worker's consumer killed right after it took a message (a child process)."""
    transport.QoS.append = lambda *_: os._exit(0)
    with Connection(url, transport=transport.Transport) as conn:
        declared = [conn.SimpleQueue(name).queue for name in queues.queue_names(MODEL)]
        with conn.Consumer(declared, callbacks=[lambda *_: None]):
            conn.drain_events(timeout=10)
    os._exit(1)  # nothing was taken


def test_a_message_taken_by_a_worker_killed_at_once_is_recorded_and_redelivered(private_db):
    db, celery = redis.Redis.from_url(private_db), make_celery(private_db)
    enqueue(db, celery, "jobs", "j1")
    queued = db.lindex(queues.queue_name(MODEL, "jobs"), 0)
    child = multiprocessing.get_context("fork").Process(target=take_and_die, args=(private_db,))
    child.start()
    child.join(30)
    assert child.exitcode == 0, "the child did not take the message"
    assert db.llen(queues.queue_name(MODEL, "jobs")) == 0 and db.hlen(transport.UNACKED_KEY) == 1
    assert len(Redeliverer(celery, db, grace_s=0)()) == 1  # no live worker names it
    (back,) = db.lrange(queues.queue_name(MODEL, "jobs"), 0, -1)
    redelivered = json.loads(back)
    assert redelivered["headers"]["redelivered"] and redelivered["body"] == json.loads(queued)["body"]
    assert db.exists(queues.bell_key(MODEL))  # rung, so an idle worker takes it now
    assert json.loads(take(db)[1])["headers"]["id"] == "j1"


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


def test_each_task_is_taken_and_recorded_in_one_script_and_its_record_removed_with_its_answer(stack):
    body = request_body("Please refund the duplicate charge.", refund=NOUL)
    job_ids = []

    def two_requests() -> None:
        for _ in range(2):
            r = stack.post("/v1/systemone", json=body)
            assert r.status_code == 200, r.text
            job_ids.append(r.headers["x-job-id"])

    seen = commands_during(stack, two_requests)
    commands = [c for c, _ in seen]
    recorded = [i for i, c in enumerate(commands) if c.startswith("ZADD unacked_index")]
    assert len(recorded) == 2, commands  # once each, by TAKE: kombu's QoS.append sent nothing
    for job_id, record in zip(job_ids, recorded, strict=True):
        tag = commands[record].split()[-1]
        # TAKE recorded it and took it off its queue in one script (the pop last): nothing else ran in between
        assert commands[record + 1].startswith(f"HSET unacked {tag}") and commands[record + 2].startswith(
            "RPOP laya.english.sync"
        )
        assert all(client == "lua:" for _, client in seen[record - 1 : record + 3]), commands
        # the answer's script removes the record: no moment at which it is answered and still recorded
        answer = next(i for i, c in enumerate(commands) if c.startswith(f"RPUSH laya:result:{job_id}"))
        removed = next(i for i, c in enumerate(commands) if i > answer and c == f"ZREM unacked_index {tag}")
        assert record < answer and all(client == "lua:" for _, client in seen[answer : removed + 2]), commands
        assert commands[removed + 1] == f"HDEL unacked {tag}"
    assert stack.redis().zcard("unacked_index") == 0
    assert not any(c.startswith(("BRPOP ", "BLMOVE ")) for c in commands)


UPGRADE = "after a kombu or celery upgrade, read laya_common/broker/__init__.py before anything else"


def test_the_installed_celery_and_kombu_are_in_the_range_the_broker_supports():
    stated = {r.name: r for r in map(Requirement, metadata.requires("laya-service")) if not r.marker}
    for name in ("celery", "kombu"):
        installed = metadata.version(name)
        assert stated[name].specifier.contains(installed), f"{name} {installed} is outside {stated[name]}: {UPGRADE}"


def test_the_kombu_internals_the_transport_replaces_are_where_it_expects_them():
    channel = kombu_redis.Channel
    for name in ("_brpop_start", "_brpop_read", "_flush_brpop_reauth"):
        assert callable(getattr(channel, name, None)), f"kombu's Redis Channel has no {name}: {UPGRADE}"
    assert list(inspect.signature(channel._brpop_start).parameters) == ["self", "timeout"], UPGRADE
    # what kombu's BRPOP check reads
    assert "_in_poll" in vars(channel) and "_brpop_sent_at" in vars(channel), f"Channel's poll state moved: {UPGRADE}"
    assert (channel.unacked_key, channel.unacked_index_key) == (transport.UNACKED_KEY, transport.UNACKED_INDEX_KEY), (
        f"kombu renamed its unacknowledged keys: {UPGRADE}"
    )
    assert callable(getattr(kombu_redis.Transport, "_deliver", None)), f"kombu's Transport has no _deliver: {UPGRADE}"
    assert callable(getattr(channel, "conn_or_acquire", None)), (
        f"kombu's Redis Channel has no conn_or_acquire: {UPGRADE}"
    )
    source = inspect.getsource(kombu_redis.QoS.restore_by_tag)  # worker.service.redelivery's restore
    assert "unacked_key" in source and "_do_restore_message" in source, f"QoS.restore_by_tag changed: {UPGRADE}"
    # transport.QoS overrides these two; transport.StockRecords drives kombu's own (broker_round_trips, the tests)
    assert "_delivered" in inspect.getsource(virtual_base.QoS.__init__), f"kombu's QoS keeps no _delivered: {UPGRADE}"
    for name in ("basic_get", "basic_publish", "prepare_message", "queue_purge"):  # transport's stock client calls
        assert callable(getattr(channel, name, None)), f"kombu's Redis Channel has no {name}: {UPGRADE}"
    assert list(inspect.signature(kombu_redis.QoS.append).parameters) == ["self", "message", "delivery_tag"], UPGRADE
    assert list(inspect.signature(kombu_redis.QoS.ack).parameters) == ["self", "delivery_tag"], UPGRADE


def test_a_header_replaced_on_task_received_is_what_the_task_reads():
    """delivery.replace_header writes Celery's worker Request.request_dict, which the task's request is built from."""
    from celery.worker import request

    assert isinstance(vars(request.Request).get("request_dict"), property), f"Request.request_dict moved: {UPGRADE}"
    assert "self.request_dict" in inspect.getsource(request.create_request_cls), (
        f"Celery no longer builds the task's request from request_dict: {UPGRADE}"
    )
