"""Several models at once: one worker per model on one Redis, requests routed by the resolved model."""

from __future__ import annotations

import json

import requests

from service.helpers import CHOICE, NOUL, Service, laya_run, laya_stack

LONG_STATE = "Please refund the duplicate charge on my card, the second one. " * 120  # past 1024 tokens
QUESTIONS = {"refund": NOUL, "topic": CHOICE}


def test_a_model_without_a_warm_worker_is_503_while_the_others_keep_serving(stack, launcher):
    """An API listing typed-decisions beside english, on the main stack's Redis where only english has a worker."""
    service = Service(stack.redis_url)
    launcher.api(service, LAYA_MODELS="english,typed-decisions")
    health = service.get("/health")
    assert health.status_code == 503 and health.json()["models"] == {"english": 1, "typed-decisions": 0}
    assert "'typed-decisions'" in health.json()["detail"] and "'english'" not in health.json()["detail"]

    typed = service.post("/v1/systemone", json={"model": "typed", "state": "x", "questions": {"q": NOUL}})
    assert typed.status_code == 503 and "'typed-decisions'" in typed.json()["detail"]
    english = service.post("/v1/systemone", json={"model": "en", "state": "x", "questions": {"q": NOUL}})
    assert english.status_code == 200 and english.headers["x-laya-model"] == "english"
    multilingual = service.post("/v1/systemone", json={"model": "ml", "state": "x", "questions": {"q": NOUL}})
    assert multilingual.status_code == 422 and multilingual.json()["field"] == "model"
    assert "english, typed-decisions" in multilingual.json()["detail"]


def test_laya_stack_serves_two_models_each_from_its_own_checkpoint(tmp_path, checkpoint):
    """english from the session's tiny checkpoint, typed-decisions from a synthesized one of other dimensions whose
    config sets a 1024-token budget: every answer equals `laya-run` on its own model's checkpoint."""
    typed_checkpoint = tmp_path / "cache" / "laya" / "tiny-typed-seed0"
    args = ("--models", "english,typed-decisions", "--checkpoint", f"english={checkpoint}")
    with laya_stack(tmp_path, *args) as (base, _):
        health = requests.get(base + "/health", timeout=10).json()
        assert health["models"] == {"english": 1, "typed-decisions": 1}

        def ask(model_id: str | None) -> requests.Response:
            body = {"state": LONG_STATE, "questions": QUESTIONS, **({"model": model_id} if model_id else {})}
            r = requests.post(base + "/v1/systemone", json=body, timeout=60)
            assert r.status_code == 200, r.text
            return r

        english, typed = ask("english"), ask("convaiinnovations/laya-typed-decisions")
        for model_id in ("jev-1", None, "  EN "):
            other = ask(model_id)
            assert other.content == english.content and other.headers["x-laya-model"] == "english"
        assert ask("typed").content == typed.content
        assert typed.headers["x-laya-model"] == "typed-decisions"

    payload = {"state": LONG_STATE, "questions": QUESTIONS}
    assert json.dumps(english.json()) == json.dumps(laya_run(checkpoint, [payload])[0])
    assert json.dumps(typed.json()) == json.dumps(laya_run(typed_checkpoint, [payload], model="typed-decisions")[0])
    assert json.loads(english.content)["answers"] != json.loads(typed.content)["answers"]
    # each model cut the long state to its own budget: 512 tokens a row for english, 1024 for typed-decisions
    assert english.json()["usage"]["input_tokens"] == 512 * len(QUESTIONS)
    assert typed.json()["usage"]["input_tokens"] == 1024 * len(QUESTIONS)
