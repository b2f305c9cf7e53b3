"""recipe/hostile.py in full against the main stack: the hand corpus and 2,000 requests generated from /openapi.json."""

from __future__ import annotations

import json

from recipe import hostile
from service.helpers import API_KEY


def test_hostile_input_gets_4xx_json_changes_nothing_and_health_stays_200(stack, tmp_path):
    code = hostile.main(
        frontend=stack.base_url,
        redis_url=stack.redis_url,
        api_key=API_KEY,
        output=tmp_path,
        generated=hostile.GENERATED,
    )
    report = json.loads((tmp_path / "hostile.json").read_text())
    assert report["violations"] == [] and report["healthy_throughout"] and code == 0
    assert report["requests"] >= 2000 + len(hostile.hand_corpus(1 << 20))
    assert report["phases"]["hand corpus"]["redis_before"] == report["phases"]["hand corpus"]["redis_after"]
    assert not any(status.startswith("5") for status in report["statuses"])
