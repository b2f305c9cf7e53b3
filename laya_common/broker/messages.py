"""A task message as kombu's Redis transport stores it on a queue, built without a kombu producer.

Celery's protocol code (`Celery.amqp.create_task_message`) makes the headers and the body; this module
only wraps them the way kombu's Redis channel does before its LPUSH (the JSON body as it is, as
`contract.TASK_BODY_ENCODING` has kombu write it; the routing and a delivery tag in the properties). The
API can then send the LPUSH in the same pipeline as the BLPOP that waits for the answer: one Redis round
trip per sync call, and none of kombu's per-publish work (a producer and a connection from its pool,
exchange lookup, a new client object per command).
The worker still consumes it with Celery; tests/service/test_broker_messages.py compares it with what
`send_task` writes.
"""

from __future__ import annotations

import functools
import json
import os
import uuid

from celery import Celery

# kombu's Redis channel keeps messages of priority 0 (what Celery sends by default) on the list named after
# the queue itself; any other priority would go to "<queue>\x06\x16<priority>".
DEFAULT_PRIORITY = 0


def encode(
    celery: Celery, task: str, argument: dict, *, task_id: str, queue: str, headers: dict | None = None
) -> bytes:
    """The bytes to LPUSH onto `queue` so that a worker runs `task(argument)` as `task_id`."""
    common_headers, common_properties, body_tail = _template(celery, task, os.getpid())
    body = "[[" + json.dumps(argument) + body_tail
    return json.dumps(
        {
            "body": body,
            "content-encoding": "utf-8",
            "content-type": "application/json",
            "headers": {**common_headers, "id": task_id, "root_id": task_id, **(headers or {})},
            "properties": {
                **common_properties,
                "correlation_id": task_id,
                "delivery_mode": 2,
                "delivery_info": {"exchange": "", "routing_key": queue},
                "priority": DEFAULT_PRIORITY,
                "body_encoding": None,  # contract.TASK_BODY_ENCODING
                "delivery_tag": str(uuid.uuid4()),
            },
        }
    ).encode()


@functools.cache
def _template(celery: Celery, task: str, pid: int) -> tuple[dict, dict, str]:
    """(headers, properties, the body's JSON after the argument) that Celery gives every message of `task` sent
    from process `pid` (its `origin` header names the process); only the task id differs between two, in the
    headers `id` and `root_id` and the property `correlation_id`. Building them took 20-60 us a request."""
    # argsrepr: Celery would otherwise render the payload into the message, and the worker's log lines
    message = celery.amqp.create_task_message("", task, [], {}, argsrepr="(payload)")
    _, kwargs, embed = message.body
    return message.headers, message.properties, "], " + json.dumps(kwargs) + ", " + json.dumps(embed) + "]"
