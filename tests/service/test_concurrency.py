"""Many clients at once: every answer is the one a lone client gets, and the worker never runs two at once."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import requests

from laya_common import contract
from service.helpers import API_KEY, CHOICE, NOUL, request_body, wait_until

CLIENTS, PER_CLIENT = 8, 4


def test_concurrent_clients_get_their_own_answers_one_task_at_a_time(stack):
    payloads = [
        request_body(f"Client {i}: order {i * 7} is late, refund?", refund=NOUL, topic=CHOICE)
        for i in range(CLIENTS * PER_CLIENT)
    ]
    expected = [stack.post("/v1/systemone", json=p).json() for p in payloads]

    def client(k: int) -> list[tuple[int, dict, str]]:
        with requests.Session() as http:
            http.headers.update({"Authorization": f"Bearer {API_KEY}", contract.TRACE_HEADER: "1"})
            out = []
            for i in range(k, len(payloads), CLIENTS):
                r = http.post(stack.url("/v1/systemone"), json=payloads[i], timeout=120)
                assert r.status_code == 200, r.text
                out.append((i, r.json(), r.headers["x-job-id"]))
            return out

    with ThreadPoolExecutor(CLIENTS) as pool:
        answers = [a for chunk in pool.map(client, range(CLIENTS)) for a in chunk]
    assert len(answers) == len(payloads)
    for i, answer, _ in answers:
        assert answer == expected[i]

    # the worker's own record of when it took each task and when it sent the answer: no two overlap
    redis = stack.redis()

    def worker_traces() -> list[dict] | None:  # each written just after its answer
        traces = [redis.hgetall(contract.trace_key(job_id)) for _, _, job_id in answers]
        return traces if all(b"worker" in t for t in traces) else None

    traces = wait_until(worker_traces, 10, "the worker's trace of every task")
    assert {t[b"worker"] for t in traces} == {stack.workers()[0]["node"].encode()}
    spans = sorted((float(t[b"worker_received"]), float(t[b"result_sent"])) for t in traces)
    for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
        assert start >= end
