"""A batch's requests, as the engine reads them: fetched from Redis a block at a time.

The API stores a batch's input once, in the list `contract.batch_input_key(id)`: one JSON text per state (the
questions shared by all of them travel in the task's message) or per request (a JSON-lines batch). The task's
message stays small however large the batch, a worker holds a few blocks of it at a time, and one that takes
over a batch reads only what is left.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from laya_common import contract
from laya_common.contract import RequestError

BLOCK = 256  # states read from Redis at once


class BatchInput(Sequence):
    """Payloads start, start + 1, ... of a batch ({"model", "total", "questions"?}), as `Engine.decide_in_windows`
    reads them: in order, a block at a time."""

    def __init__(self, redis, batch_id: str, batch: dict, *, start: int = 0) -> None:
        self.redis, self.key, self.start = redis, contract.batch_input_key(batch_id), start
        self.total, self.model, self.questions = batch["total"], batch["model"], batch.get("questions")
        self.controls = batch.get("controls", {})  # protocol 0.4's, for every state
        self._block: tuple[int, list[bytes]] = (-1, [])

    def __len__(self) -> int:
        return self.total - self.start

    def __getitem__(self, i: int) -> dict:
        if not 0 <= i < len(self):
            raise IndexError(i)
        number, offset = divmod(i, BLOCK)
        if self._block[0] != number:
            first = self.start + number * BLOCK
            self._block = (number, self.redis.lrange(self.key, first, first + BLOCK - 1))
        items = self._block[1]
        if offset >= len(items):
            raise RequestError(
                f"state {self.start + i} of this batch is gone from Redis (expired?)", kind="bad_request"
            )
        item = json.loads(items[offset])
        if self.questions is None:
            return item
        return {"model": self.model, "state": item, "questions": self.questions, **self.controls}
