"""A task message as kombu's Redis transport stores it on a queue, built without a kombu producer.

Celery's protocol code (`Celery.amqp.create_task_message`) makes the headers and the body; this module
only wraps them the way kombu's Redis channel does before its LPUSH (JSON body in base64, the routing
and a delivery tag in the properties). The API can then send the LPUSH in the same pipeline as the
BLPOP that waits for the answer: one Redis round trip per sync call, and none of kombu's per-publish
work (a producer and a connection from its pool, exchange lookup, a new client object per command).
The worker still consumes it with Celery; tests/service/test_task_message.py compares it with what
`send_task` writes.
"""

from __future__ import annotations

import base64
import json
import uuid

from celery import Celery

# kombu's Redis channel keeps messages of priority 0 (what Celery sends by default) on the list named after
# the queue itself; any other priority would go to "<queue>\x06\x16<priority>".
DEFAULT_PRIORITY = 0


def encode(
    celery: Celery, task: str, argument: dict, *, task_id: str, queue: str, headers: dict | None = None
) -> bytes:
    """The bytes to LPUSH onto `queue` so that a worker runs `task(argument)` as `task_id`."""
    # argsrepr: Celery would otherwise render the payload into the message, and the worker's log lines
    message = celery.amqp.create_task_message(task_id, task, [argument], {}, argsrepr="(payload)")
    body = base64.b64encode(json.dumps(message.body).encode()).decode()
    return json.dumps(
        {
            "body": body,
            "content-encoding": "utf-8",
            "content-type": "application/json",
            "headers": {**message.headers, **(headers or {})},
            "properties": {
                **message.properties,
                "delivery_mode": 2,
                "delivery_info": {"exchange": "", "routing_key": queue},
                "priority": DEFAULT_PRIORITY,
                "body_encoding": "base64",
                "delivery_tag": str(uuid.uuid4()),
            },
        }
    ).encode()
