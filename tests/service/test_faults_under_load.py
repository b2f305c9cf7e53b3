"""recipe/faults.py on a service of its own: Redis restart, the whole worker killed three times, API restart and
an executor failure, all under load; every accepted job answered once, with the right answer."""

from __future__ import annotations

import json

from recipe import faults


def test_faults_under_load_lose_nothing(checkpoint, tmp_path):
    code = faults.main(checkpoint=checkpoint, output=tmp_path)
    report = json.loads((tmp_path / "faults.json").read_text())
    jobs = report["jobs"]
    assert jobs["accepted"] > 0 and jobs["answered"] == jobs["accepted"] and jobs["lost"] == 0
    assert jobs["wrong"] == 0 and jobs["stored_twice"] == 0
    assert report["sync"]["wrong"] == 0 and set(report["sync"]["statuses"]) <= {"200", "500", "503", "504", "refused"}
    assert set(report["faults"]["redis-restart"]["health_while_down"]) == {"503"}  # JSON keys are strings
    kills = report["faults"]["worker-kill"]["kills"]
    assert [k["held"] for k in kills] == ["request", "batch", "request"]
    batch = report["faults"]["worker-kill"]["batch"]
    assert batch["done"] == batch["total"] == batch["results"] and batch["in_order_each_once"]
    api = report["faults"]["api-restart"]
    assert api["fetchable_after"] == api["jobs_before"] > 0
    failure = report["faults"]["executor-failure"]
    assert failure["failing_worker_status"] == 1
    assert code == 0
