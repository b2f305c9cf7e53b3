"""The factory, its configuration, and what the API process imports."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from app import config, create_app
from app.schemas import RequestSchema
from laya_common import contract


def test_importing_and_building_the_app_leaves_torch_and_the_worker_out():
    code = (
        "import sys; from app import create_app; create_app().test_client().get('/openapi.json'); "
        "print([m for m in sys.modules if m == 'torch' or m == 'worker' or m.startswith('worker.')])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_settings_come_from_laya_environment_variables_with_their_types(monkeypatch):
    env = {"LAYA_PORT": "9000", "LAYA_API_KEY": "1234", "LAYA_SYNC_TIMEOUT_S": "2.5", "OTHER": "x"}
    assert config.from_env(env) == {"PORT": 9000, "API_KEY": "1234", "SYNC_TIMEOUT_S": 2.5}
    with pytest.raises(ValueError, match="LAYA_PORT"):
        config.from_env({"LAYA_PORT": "eighty"})
    monkeypatch.setenv("LAYA_PORT", "9000")
    assert create_app({"PORT": 1}).config["PORT"] == 1  # the test mapping wins over the environment


def test_env_overrides_defaults_in_the_factory(monkeypatch):
    monkeypatch.setenv("LAYA_MAX_BATCH_STATES", "7")
    assert create_app().config["MAX_BATCH_STATES"] == 7


def test_celery_speaks_json_only_and_acknowledges_late():
    conf = contract.celery_config("redis://:pw@host:6379/2")
    assert conf["accept_content"] == ["json"] and conf["task_serializer"] == "json"
    assert conf["task_acks_late"] and conf["worker_prefetch_multiplier"] == 1
    assert conf["task_ignore_result"] and "result_backend" not in conf  # tasks write their own result keys
    assert "pickle" not in json.dumps(conf, default=str)
    tls = contract.celery_config("rediss://:pw@host:6380/0")
    assert tls["broker_use_ssl"]
    assert "broker_use_ssl" not in contract.celery_config("rediss://host:6380/0?ssl_cert_reqs=required")


def test_request_schema_keeps_question_order_and_unknown_question_keys():
    questions = {k: {"type": "noul", "instructions": "?", "extra": 1} for k in ("z", "a", "m")}
    payload = RequestSchema().load({"state": "x", "questions": questions, "ignored": True})
    assert list(payload["questions"]) == ["z", "a", "m"] and payload["questions"]["z"]["extra"] == 1
    assert payload["model"] is None and "ignored" not in payload  # resolved to a served model after loading
