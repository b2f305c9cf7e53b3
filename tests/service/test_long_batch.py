"""A batch that runs longer than the broker connection's health-check interval reaches `done`.

It did not: the worker's last write went out on a broker connection with replies still unread, whose
health-check PING then read one of them ("Bad response from PING health check"), so the batch's results
were all stored but its status stayed `running` until its records expired.
"""

from __future__ import annotations

import json

from laya_common import contract
from service.helpers import NOUL, Service, wait_until

HEALTH_CHECK_S = 1  # kombu's default is 25 s; a batch of a few seconds then outlasts it


def test_a_batch_longer_than_the_health_check_interval_reaches_done(launcher, private_db):
    service = Service(private_db)
    launcher.worker(service, LAYA_REDIS_HEALTH_CHECK_S=str(HEALTH_CHECK_S))
    launcher.api(service)
    service.wait_healthy()
    states = [f"Order {i}: " + "the parcel has not arrived yet " * 8 for i in range(1200)]
    r = service.post("/v1/batches", json={"states": states, "questions": {"late": NOUL}})
    assert r.status_code == 202, r.text
    batch_id = r.json()["id"]

    def progress(done_when):
        body = service.get(f"/v1/batches/{batch_id}?limit=1").json()
        return body if done_when(body) else None

    wait_until(lambda: progress(lambda b: b["done"] == len(states)), 240, "every state scored", interval_s=0.2)
    body = wait_until(lambda: progress(lambda b: b["status"] == "done"), 30, "the batch to say done", interval_s=0.2)
    assert (body["status"], body["done"], body["total"]) == ("done", len(states), len(states)), body
    envelope = json.loads(service.redis().lindex(contract.result_key(batch_id), 0))
    # what makes this test mean something: the batch outlasted the interval, more than twice
    assert envelope["timings"]["inference_ms"] > 2 * HEALTH_CHECK_S * 1000, envelope
