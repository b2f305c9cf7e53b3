"""The request files in examples/, as the README sends them: each answered, each question type typed as asked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize("name", ["noul", "choice", "score"])
def test_each_example_request_is_answered_with_its_question_type(stack, name):
    body = json.loads((EXAMPLES / f"{name}.json").read_text())
    r = stack.post("/v1/systemone", json=body)
    assert r.status_code == 200, r.text
    (question,) = body["questions"].values()
    (answer,) = r.json()["answers"].values()
    assert answer["type"] == question["type"] == name and name in answer


def test_the_example_batches_are_scored(stack):
    batch = stack.post(
        "/v1/batches", data=(EXAMPLES / "batch.json").read_bytes(), headers={"Content-Type": "application/json"}
    )
    lines = stack.post(
        "/v1/batches", data=(EXAMPLES / "requests.jsonl").read_bytes(), headers={"Content-Type": "application/x-ndjson"}
    )
    for r, total in ((batch, 3), (lines, 3)):
        assert r.status_code == 202, r.text
        done = stack.wait_job(r.headers["Location"])
        assert done["status"] == "done" and done["total"] == total == len(done["results"])
        assert all("answers" in result for result in done["results"])
