"""Many clients at once: every answer is the one a lone client gets, and the worker never runs two at once."""

from __future__ import annotations

from laya_common import contract
from service.helpers import CHOICE, NOUL, post_concurrently, request_body, wait_until

CLIENTS, PER_CLIENT = 8, 4


def test_concurrent_clients_get_their_own_answers_one_task_at_a_time(stack):
    payloads = [
        request_body(f"Client {i}: order {i * 7} is late, refund?", refund=NOUL, topic=CHOICE)
        for i in range(CLIENTS * PER_CLIENT)
    ]
    expected = [stack.post("/v1/systemone", json=p).json() for p in payloads]

    answers = post_concurrently(stack, payloads, CLIENTS)
    for i, answer, _ in answers:
        assert answer == expected[i]

    # the worker's own record of when it started each task's engine work and when it finished it: no two overlap
    # (a task is taken ahead while the one before runs: worker.service.back_to_back)
    redis = stack.redis()

    def worker_traces() -> list[dict] | None:  # each written just after its answer
        traces = [redis.hgetall(contract.trace_key(job_id)) for _, _, job_id in answers]
        return traces if all(b"worker" in t for t in traces) else None

    traces = wait_until(worker_traces, 10, "the worker's trace of every task")
    assert {t[b"worker"] for t in traces} == {stack.workers()[0]["node"].encode()}
    spans = sorted((float(t[b"engine_started"]), float(t[b"engine_finished"])) for t in traces)
    for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
        assert start >= end
