"""The back-to-back loop's order (worker/service/back_to_back.py) against a runtime that records what it is asked:
passes begun in the order taken, never more in flight than the executor holds, the message taken ahead begun right
after the oldest pass is answered, and, when an error ends the loop, the passes in flight abandoned and the message
taken ahead put back on its queue. The real worker runs it in tests/service/test_back_to_back.py; an error at this
point of the loop is what a running service cannot be made to raise on cue."""

from __future__ import annotations

from collections import deque
from types import SimpleNamespace

import pytest

from worker.service import back_to_back
from worker.service.back_to_back import Message


class RecordingRuntime:
    def __init__(
        self, n_messages: int, *, depth: int = 2, failing_end: int | None = None, arriving: tuple[int, ...] = ()
    ) -> None:
        self.waiting = deque(Message(SimpleNamespace(id=k), {}, None) for k in range(1, n_messages + 1))
        # what arrives during each wait on the doorbell, one message a wait, then nothing
        self.arriving = deque(Message(SimpleNamespace(id=k), {}, None) for k in arriving)
        self.engine = SimpleNamespace(executor=SimpleNamespace(passes_in_flight=depth))
        self.taking, self.failing_end = True, failing_end
        self.events: list[tuple[str, int]] = []

    def take_interactive(self) -> Message | None:
        return self.waiting.popleft() if self.waiting else None

    def wait_interactive(self, seconds: float) -> Message | None:
        self.events.append(("wait", seconds))
        return self.take_interactive() or (self.arriving.popleft() if self.arriving else None)

    def begin(self, message: Message) -> Message:
        self.events.append(("begin", message.delivery.id))
        return message

    def end(self, running: Message, *, take_next: bool = False):
        if running.delivery.id == self.failing_end:
            raise ConnectionError("Redis went away")
        self.events.append(("end", running.delivery.id))
        taken = self.take_interactive() if take_next else None
        return SimpleNamespace(taken=lambda: taken)

    def abandon(self, running: Message) -> None:
        self.events.append(("abandon", running.delivery.id))

    def put_back(self, delivery) -> None:
        self.events.append(("put back", delivery.id))


@pytest.fixture(autouse=True)
def messages_as_taken(monkeypatch):
    monkeypatch.setattr(back_to_back, "read", lambda runtime, taken: taken)  # the recording runtime hands Messages


def test_passes_begin_in_order_two_in_flight_and_the_one_taken_ahead_right_after_the_oldest_ends():
    runtime = RecordingRuntime(5)
    back_to_back.answer_back_to_back(runtime)
    assert runtime.events == [
        ("begin", 1), ("begin", 2),
        ("end", 1), ("begin", 3),
        ("end", 2), ("begin", 4),
        ("end", 3), ("begin", 5),
        ("end", 4), ("end", 5),
    ]  # fmt: skip
    assert not runtime.waiting


def test_an_error_abandons_the_passes_in_flight_and_puts_the_message_taken_ahead_back():
    runtime = RecordingRuntime(6, failing_end=2)
    with pytest.raises(ConnectionError):
        back_to_back.answer_back_to_back(runtime)
    # 3 was in flight behind 2, and 4 taken ahead; 5 and 6 were never taken
    assert runtime.events[-2:] == [("abandon", 3), ("put back", 4)]
    assert [m.delivery.id for m in runtime.waiting] == [5, 6]


def test_a_shutdown_takes_nothing_more_and_answers_what_it_holds():
    runtime = RecordingRuntime(6)
    begin = runtime.begin

    def begin_then_stop(message):
        if message.delivery.id == 3:
            runtime.taking = False  # a warm shutdown began
        return begin(message)

    runtime.begin = begin_then_stop
    back_to_back.answer_back_to_back(runtime)
    begun = [k for event, k in runtime.events if event == "begin"]
    ended = [k for event, k in runtime.events if event == "end"]
    assert begun == ended == [1, 2, 3, 4]  # 4 was taken ahead before the shutdown began: it is answered too
    assert [m.delivery.id for m in runtime.waiting] == [5, 6]


def test_a_request_arriving_within_the_linger_is_answered_by_the_same_loop():
    runtime = RecordingRuntime(2, arriving=(3, 4))
    back_to_back.answer_back_to_back(runtime, linger_s=0.05)
    assert runtime.events == [
        ("begin", 1), ("begin", 2),
        ("end", 1), ("end", 2),
        ("wait", 0.05), ("begin", 3), ("end", 3),
        ("wait", 0.05), ("begin", 4), ("end", 4),
        ("wait", 0.05),
    ]  # fmt: skip


def test_no_wait_without_a_linger_or_once_a_shutdown_began():
    runtime = RecordingRuntime(2, arriving=(3,))
    back_to_back.answer_back_to_back(runtime)  # a batch letting requests pass: linger_s 0
    assert ("wait", 0.05) not in runtime.events and [m.delivery.id for m in runtime.arriving] == [3]

    runtime = RecordingRuntime(2, arriving=(3,))
    end = runtime.end

    def end_then_stop(running, **kw):
        runtime.taking = False  # a warm shutdown began
        return end(running, **kw)

    runtime.end = end_then_stop
    back_to_back.answer_back_to_back(runtime, linger_s=0.05)
    assert not any(event == "wait" for event, _ in runtime.events)
    assert [m.delivery.id for m in runtime.arriving] == [3]
