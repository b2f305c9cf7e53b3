"""Which message a task came in, as the worker's task code needs it (from Celery's request, or from the message
itself when a batch lets a request pass: worker.service.let_pass)."""

from __future__ import annotations

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
