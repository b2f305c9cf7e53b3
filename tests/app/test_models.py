"""Model resolution as laya-serve 0.3.20 does it: one table for the API and `laya-run`, the default model, 422s."""

from __future__ import annotations

import json

import pytest

from app import create_app
from laya_common import contract

ALL = ("english", "multilingual", "typed-decisions")
GOOD = {"state": "refund please", "questions": {"q": {"type": "noul", "instructions": "Refund?"}}}

NAMED = [
    *[(name, name) for name in ALL],
    ("en", "english"),
    ("laya", "english"),
    ("default", "english"),
    ("multi", "multilingual"),
    ("ml", "multilingual"),
    ("laya-multilingual", "multilingual"),
    ("typed", "typed-decisions"),
    ("typed_decisions", "typed-decisions"),
    ("laya-typed-decisions", "typed-decisions"),
    ("decisions", "typed-decisions"),
    ("convaiinnovations/laya-multilingual", "multilingual"),
    ("convaiinnovations/laya-typed-decisions", "typed-decisions"),
    ("  English ", "english"),
    ("TYPED-Decisions", "typed-decisions"),
    ("\tMulti\n", "multilingual"),
    ("ConvAIInnovations/Laya-Typed-Decisions ", "typed-decisions"),
]
# laya-serve reads these as "choose for me": the service's default model answers
UNNAMED = [None, "", "   ", "jev-1", "gpt-4o", "convaiinnovations/laya", "english-2", "typed decisions", 5, ["english"]]


@pytest.mark.parametrize(("model_id", "model"), NAMED)
def test_every_name_alias_and_published_id_resolves_to_its_model(model_id, model):
    assert contract.laya_model(model_id) == model
    assert contract.resolve_model(model_id, ALL) == model


@pytest.mark.parametrize("model_id", UNNAMED)
def test_an_id_naming_no_laya_model_goes_to_the_default_the_first_served(model_id):
    assert contract.laya_model(model_id) is None
    assert contract.resolve_model(model_id, ("typed-decisions", "english")) == "typed-decisions"
    assert contract.resolve_model(model_id, ("english",)) == "english"


def test_a_laya_model_not_served_is_422_naming_it_and_what_is_served():
    with pytest.raises(contract.RequestError) as e:
        contract.resolve_model("ML", ("english", "typed-decisions"))
    assert e.value.kind == "validation" and e.value.field == "model"
    assert "'multilingual'" in e.value.detail and "english, typed-decisions" in e.value.detail


def test_laya_models_lists_canonical_names_and_refuses_others():
    assert contract.parse_models(" english, typed ,decisions", "LAYA_MODELS") == ("english", "typed-decisions")
    for bad in ("", " , ", "english,jev-1"):
        with pytest.raises(ValueError, match="LAYA_MODELS"):
            contract.parse_models(bad, "LAYA_MODELS")
    with pytest.raises(ValueError, match="LAYA_MODELS"):
        create_app({"MODELS": "klingon"})


@pytest.fixture
def two_models(app):
    app.config["SERVED_MODELS"] = ("english", "typed-decisions")
    return app


@pytest.mark.parametrize(
    ("model_id", "model"),
    [
        ("jev-1", "english"),
        (None, "english"),
        (5, "english"),
        ("typed", "typed-decisions"),
        ("convaiinnovations/laya-typed-decisions", "typed-decisions"),
    ],
)
def test_the_api_enqueues_on_the_resolved_model_and_names_it_in_a_header(
    two_models, client, dispatcher, model_id, model
):
    response = client.post("/v1/systemone", json={**GOOD, "model": model_id})
    assert response.status_code == 200 and response.headers["x-laya-model"] == model
    assert dispatcher.submitted[-1]["model"] == model
    assert response.get_json()["model"] == "laya-rl-agent"  # the body stays as the worker wrote it
    response = client.post("/v1/jobs", json={**GOOD, "model": model_id})
    assert response.status_code == 202 and response.headers["x-laya-model"] == model


def test_the_api_answers_422_for_a_laya_model_it_does_not_serve(two_models, client, dispatcher):
    body = client.post("/v1/systemone", json={**GOOD, "model": "multi"}).get_json()
    assert body["status"] == 422 and body["field"] == "model" and "english, typed-decisions" in body["detail"]
    assert dispatcher.submitted == []


def test_a_json_lines_batch_resolves_every_line_to_one_model(two_models, client, dispatcher):
    lines = [{**GOOD, "model": "jev-1"}, {**GOOD, "model": "EN"}, GOOD]
    body = "\n".join(json.dumps(line) for line in lines)
    response = client.post("/v1/batches", data=body, content_type="application/x-ndjson")
    assert response.status_code == 202 and response.headers["x-laya-model"] == "english"
    argument, requests = dispatcher.submitted[-1]
    assert argument == {"model": "english", "total": 3} and [r["model"] for r in requests] == ["english"] * 3
    mixed = body + "\n" + json.dumps({**GOOD, "model": "typed"})
    rejected = client.post("/v1/batches", data=mixed, content_type="application/x-ndjson").get_json()
    assert rejected["status"] == 422 and rejected["field"] == "lines.4.model"


def test_health_is_503_naming_each_served_model_without_a_warm_worker(two_models, client, dispatcher):
    body = client.get("/health").get_json()  # the stand-in has one ready english worker
    assert body["status"] == 503 and body["models"] == {"english": 1, "typed-decisions": 0}
    assert "'typed-decisions'" in body["detail"] and "'english'" not in body["detail"]
    dispatcher.workers = lambda: [{"model": m, "node": m, "state": "ready"} for m in ("english", "typed-decisions")]
    assert client.get("/health").get_json() == {"status": "ok", "models": {"english": 1, "typed-decisions": 1}}


def test_openapi_documents_the_resolution_table(two_models, client):
    doc = client.get("/openapi.json").get_json()
    described = doc["components"]["schemas"]["Request"]["properties"]["model"]["description"]
    for alias in contract.MODEL_ALIASES:
        assert alias in described
    assert "jev-1" in described and "default" in described
    assert "english, typed-decisions (default: english)" in doc["info"]["description"]
    assert "x-laya-model" in doc["paths"]["/v1/systemone"]["post"]["responses"]["200"]["headers"]
