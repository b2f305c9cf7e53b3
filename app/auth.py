"""Optional bearer auth: with LAYA_API_KEY set, every route but /health and /openapi.json needs it."""

from __future__ import annotations

import hmac

from flask import Flask, current_app, request

from app.errors import ApiError

OPEN_ENDPOINTS = {"health.health", "openapi.openapi"}


def init_app(app: Flask) -> None:
    app.before_request(require_key)


def require_key() -> None:
    """:raise 401: a key is configured and the request does not carry it as `Authorization: Bearer <key>`."""
    key = current_app.config["API_KEY"]
    if not key or request.endpoint in OPEN_ENDPOINTS:
        return
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), key.encode()):
        raise ApiError("unauthorized", "missing or wrong bearer token (Authorization: Bearer <LAYA_API_KEY>)")
