"""Which message a task came in, as the worker's task code needs it: from Celery's request, or from the message
itself when a batch lets a request pass (worker.service.let_pass), with the task's argument (`decode`); and a
header replaced on its way to the task (`replace_header`)."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass

from laya_common.broker import queues


@dataclass(frozen=True)
class Delivery:
    """Which message a task came in: its id, kombu's delivery tag, whether it is a redelivery, and its class of
    work (from the queue it came from; None from a queue of no class)."""

    id: str
    tag: str | None
    redelivered: bool
    work_class: str | None

    @classmethod
    def of(cls, request) -> Delivery:
        """From Celery's task request."""
        info = request.delivery_info or {}
        parsed = queues.parse(info.get("routing_key") or "")
        return cls(
            request.id,
            (request.properties or {}).get("delivery_tag"),
            bool(info.get("redelivered")),
            parsed[1] if parsed else None,
        )

    @classmethod
    def of_message(cls, queue: str, message: dict) -> Delivery:
        """From a message as kombu's Redis transport queues it (protocol 2), taken from `queue`."""
        headers, properties = message["headers"], message["properties"]
        info = properties.get("delivery_info") or {}
        parsed = queues.parse(queue)
        return cls(
            headers["id"],
            properties.get("delivery_tag"),
            bool(info.get("redelivered") or headers.get("redelivered")),
            parsed[1] if parsed else None,
        )


def task_argument(message: dict, task: str) -> dict:
    """The one argument of a Celery task message (protocol 2, JSON) running `task`. ValueError for another task or
    a body that is not JSON: the worker's Celery accepts JSON only (contract.celery_config), and so does this."""
    if message["headers"].get("task") != task:
        raise ValueError(f"task {message['headers'].get('task')!r}; only {task} is run between batch windows")
    if message.get("content-type") != "application/json":
        raise ValueError(f"content type {message.get('content-type')!r}; only application/json is accepted")
    body = message["body"]
    if message["properties"].get("body_encoding") == "base64":
        body = base64.b64decode(body)
    args, _kwargs, _embed = json.loads(body)
    return args[0]


def replace_header(request, name: str, value: object) -> bool:
    """Replace header `name` of the message Celery's worker is about to run, from its `task_received` signal: the
    task then reads `value` as `self.request.<name>`. Celery builds the task's request from the worker Request's
    `request_dict` (tests/service/test_broker_transport.py checks that it still does). False when the message has
    no such header."""
    if not request.request_dict.get(name):
        return False
    request.request_dict[name] = value
    return True
