"""Which laya release's /v1/systemone a request speaks: the x-laya-protocol header, else LAYA_PROTOCOL (0.3.20).

Under 0.3.20 the body is read as laya-serve 0.3.20 reads it (fields it does not know are dropped). Under 0.4.15
the request rules of laya_common.protocol04 come first, with laya-serve 0.4.15's statuses, and its controls
travel to the worker, whose engine answers in 0.4.15's shape. Every answer of a /v1 route that takes a request
names its protocol in the same header.
"""

from __future__ import annotations

from flask import Flask, Response, current_app, g, request

from app.errors import ApiError
from laya_common import contract


def default_protocol(settings: dict) -> str:
    """LAYA_PROTOCOL as a version. :raise ValueError: naming the variable."""
    try:
        return contract.parse_protocol(str(settings["PROTOCOL"]), "LAYA_PROTOCOL")
    except contract.RequestError as e:
        raise ValueError(e.detail) from None


def request_protocol() -> str:
    """This request's protocol, which its answer will name. :raise 400: a header naming no protocol served."""
    header = request.headers.get(contract.PROTOCOL_HEADER)
    try:
        g.protocol = contract.parse_protocol(header) if header is not None else current_app.config["PROTOCOL"]
    except contract.RequestError as e:
        raise ApiError(e.kind, e.detail, field=contract.PROTOCOL_HEADER) from None
    return g.protocol


def init_app(app: Flask) -> None:
    app.config["PROTOCOL"] = default_protocol(app.config)

    @app.after_request
    def _name_the_protocol(response: Response) -> Response:
        if "protocol" in g:
            response.headers[contract.PROTOCOL_HEADER] = g.protocol
        return response
