"""recipe/scale_out.py in short: one then two reference workers on one queue for a few seconds each, one killed."""

from __future__ import annotations

import json

from recipe import scale_out


def test_scale_out_short_form(checkpoint, tmp_path):
    output = tmp_path / "scale-out"
    code = scale_out.main(output=output, checkpoint=checkpoint, workers=(1, 2), clients=4, seconds=3.0, n_states=8)
    report = json.loads((output / "scale_out.json").read_text())
    assert [level["workers"] for level in report["levels"]] == [1, 2]
    for level in report["levels"]:
        assert level["answered"] > 0 and level["n_failed"] == 0 and level["not_byte_equal"] == 0
        assert level["batch"]["states_answered"] > 0 and level["batch"]["n_failed"] == 0
        assert set(level["most_at_once"].values()) == {1}  # the reference executor holds one pass
    served = report["levels"][-1]["served"]
    assert sorted(s["device"] for s in served) == [0, 1] and all(s["requests"] > 0 for s in served)
    kill = report["kill"]
    # each worker holds its pass's message and one taken ahead: more than the survivor's two are the killed one's
    assert 2 < len(kill["unacknowledged_at_kill"]) <= 4
    jobs = kill["jobs"]
    assert jobs["accepted"] > 0 and jobs["answered"] == jobs["accepted"] and jobs["lost"] == 0
    assert jobs["wrong"] == 0 and jobs["stored_twice"] == 0
    assert code == 0
