"""An HTTP client for recipes: one kept-alive connection, standard library only (the GPU host has no requests)."""

from __future__ import annotations

import argparse
import http.client
import os
from urllib.parse import urlparse

from laya_common import contract


def add_service_arguments(p: argparse.ArgumentParser) -> None:
    """--frontend and --api-key, as every recipe that talks to a running service reads them."""
    p.add_argument(
        "--frontend",
        default=os.environ.get("LAYA_FRONTEND", "http://127.0.0.1:8080"),
        help="the API's base URL (default: $LAYA_FRONTEND or %(default)s)",
    )
    p.add_argument(
        "--api-key", default=os.environ.get("LAYA_API_KEY", ""), help="bearer token (default: $LAYA_API_KEY)"
    )


class Client:
    def __init__(self, frontend: str, api_key: str = "", *, timeout_s: float = 120, trace: bool = True) -> None:
        url = urlparse(frontend)
        self.host, self.port, self.timeout_s = url.hostname, url.port or 80, timeout_s
        self.headers = {
            **({"Authorization": f"Bearer {api_key}"} if api_key else {}),
            **({contract.TRACE_HEADER: "1"} if trace else {}),
        }
        self.conn = self._connect()

    def _connect(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection(self.host, self.port, timeout=self.timeout_s)

    def request(
        self, method: str, path: str, body: bytes | None = None, content_type: str = "application/json"
    ) -> tuple[int, dict[str, str], bytes]:
        """(status, headers, body); a connection the server closed is opened again once."""
        headers = {**self.headers, **({"Content-Type": content_type} if body is not None else {})}
        for attempt in (1, 2):
            try:
                self.conn.request(method, path, body=body, headers=headers)
                response = self.conn.getresponse()
                return response.status, {k.lower(): v for k, v in response.headers.items()}, response.read()
            except (ConnectionError, http.client.RemoteDisconnected, http.client.CannotSendRequest):
                self.conn.close()
                self.conn = self._connect()
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def close(self) -> None:
        self.conn.close()
