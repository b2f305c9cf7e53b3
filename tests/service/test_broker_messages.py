"""The API builds its task messages itself (laya_common/broker/messages.py); they must be what Celery's `send_task` puts
on the queue, up to the parts that differ on every send, and a real worker must run them (every sync call of
the other service tests goes this way)."""

from __future__ import annotations

import json

import redis
from celery import Celery

from laya_common import contract
from laya_common.broker import messages

PAYLOAD = {"model": "english", "state": "s", "questions": {"q": {"type": "noul", "instructions": "i?"}}}
PER_SEND = {("properties", "delivery_tag"), ("properties", "reply_to"), ("headers", "ignore_result")}


def queued(url: str, send) -> dict:
    client = redis.Redis.from_url(url)
    send()
    (raw,) = client.lrange("laya:test-queue", 0, -1)
    client.delete("laya:test-queue")
    message = json.loads(raw)
    message["body"] = json.loads(message["body"])  # contract.TASK_BODY_ENCODING: the JSON as it is
    for part, key in PER_SEND:
        message[part].pop(key, None)
    message["properties"].pop("argsrepr", None)  # send_task copies its options into the properties too
    return message


def test_a_built_message_is_what_send_task_queues(private_db):
    celery = Celery("test")
    celery.conf.update(contract.celery_config(private_db))
    headers = {contract.TRACE_MESSAGE_HEADER: True}
    want = queued(
        private_db,
        lambda: celery.send_task(
            contract.TASK_DECIDE,
            args=[PAYLOAD],
            task_id="job-1",
            queue="laya:test-queue",
            headers=headers,
            argsrepr="(payload)",
        ),
    )
    # a message for another job first: what every message of the task shares is kept from it
    messages.encode(celery, contract.TASK_DECIDE, {"other": 1}, task_id="job-0", queue="laya:test-queue")
    built = messages.encode(
        celery, contract.TASK_DECIDE, PAYLOAD, task_id="job-1", queue="laya:test-queue", headers=headers
    )
    got = queued(private_db, lambda: redis.Redis.from_url(private_db).lpush("laya:test-queue", built))
    assert got == want


def test_every_message_has_its_own_delivery_tag():
    celery = Celery("test")
    tags = {
        json.loads(messages.encode(celery, contract.TASK_DECIDE, PAYLOAD, task_id="j", queue="q"))["properties"][
            "delivery_tag"
        ]
        for _ in range(3)
    }
    assert len(tags) == 3
