"""The Flask API: `create_app()` builds it from DEFAULTS, LAYA_* environment variables and a test mapping.

It validates requests and hands them to the workers through Celery and Redis; of the project it imports only
`laya_common/` (standard library only), never `worker/`, so it never loads torch.
"""

from __future__ import annotations

from celery import Celery
from flask import Flask
from flask.json.provider import DefaultJSONProvider

from laya_common import contract


def create_app(test_config: dict | None = None) -> Flask:
    from app import auth, config, dispatch, errors, metrics, protocol, tracing
    from app.batches import bp as batches_bp
    from app.health import bp as health_bp
    from app.info import bp as info_bp
    from app.jobs import bp as jobs_bp
    from app.models import served_models
    from app.openapi import bp as openapi_bp
    from app.systemone import bp as systemone_bp

    app = Flask(__name__)
    app.json = WireJSON(app)
    app.config.from_mapping(config.DEFAULTS)
    app.config.from_mapping(config.from_env())
    if test_config is not None:
        app.config.from_mapping(test_config)
    app.config["SERVED_MODELS"] = served_models(app.config)

    errors.init_app(app)
    protocol.init_app(app)
    dispatch.init_app(app, celery_init_app(app))
    tracing.init_app(app)  # first before_request hook: its stamp is the earliest
    metrics.init_app(app, app.extensions["laya"])  # its clock starts before auth, so 401s are timed too
    auth.init_app(app)
    for bp in (systemone_bp, jobs_bp, batches_bp, health_bp, info_bp, openapi_bp):
        app.register_blueprint(bp)
    return app


class WireJSON(DefaultJSONProvider):
    """Every body written as `laya-run` writes a line (json.dumps defaults, non-ASCII kept, keys in order),
    so an HTTP answer and a CLI answer compare byte for byte, error bodies included."""

    ensure_ascii = False
    sort_keys = False  # answers keep the order of the questions

    def dumps(self, obj: object, **kwargs: object) -> str:
        return contract.wire_json(obj)

    def response(self, *args: object, **kwargs: object):
        body = self.dumps(self._prepare_response_obj(args, kwargs))
        return self._app.response_class(body + "\n", mimetype=self.mimetype)


def celery_init_app(app: Flask) -> Celery:
    """A Celery client (it only sends tasks) configured like the workers."""
    celery = Celery(app.name)
    celery.conf.update(contract.celery_config(app.config["REDIS_URL"]))
    app.extensions["celery"] = celery
    return celery
