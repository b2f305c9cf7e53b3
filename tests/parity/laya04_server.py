"""laya-serve 0.4.15 on one checkpoint, answering HTTP requests given as JSON lines: protocol 0.4's oracle.

Run with laya 0.4.15 (and FastAPI, httpx) first on the path, in a process of its own (this test session imports
laya 0.3.20): `python tests/parity/laya04_server.py CHECKPOINT`. Each stdin line {"route", "body"} (the body as
JSON text) gets a stdout line {"status", "body"}: what laya-serve answered, the body as text. fp32 on the CPU.
A line {"client": BASE_URL, "api_key", "predict": {...}} instead has laya 0.4.15's own HTTP client
(`laya.mcp.remote.RemoteRouter`) call `predict(**predict)` on the server at BASE_URL: {"status": 200, "body": the
result as JSON text}, or {"status": "refused", "body": the client's error code and message}.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import warnings


def main() -> int:
    from fastapi.testclient import TestClient
    from laya.agent import Agent
    from laya.router import Router
    from laya.serve import create_app

    checkpoint = tempfile.mkdtemp(prefix="laya04-")
    shutil.copytree(sys.argv[1], checkpoint, dirs_exist_ok=True)  # laya may rewrite its tokenizer config
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the synthesized checkpoint's temperatures are out of range on purpose
        router = Router(device="cpu")
        router.attach("english", Agent(checkpoint, device="cpu"))
    client = TestClient(create_app(router=router), raise_server_exceptions=False)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        if "client" in request:
            print(json.dumps(remote_predict(request)), flush=True)
            continue
        response = client.post(
            request["route"], content=request["body"].encode(), headers={"content-type": "application/json"}
        )
        print(json.dumps({"status": response.status_code, "body": response.text}), flush=True)
    return 0


def remote_predict(request: dict) -> dict:
    from laya.mcp.remote import RemoteError, RemoteRouter

    remote = RemoteRouter(request["client"], api_key=request.get("api_key"))
    try:
        return {"status": 200, "body": json.dumps(remote.predict(**request["predict"]))}
    except RemoteError as e:
        return {"status": "refused", "body": f"{e.code}: {e.message}"}


if __name__ == "__main__":
    raise SystemExit(main())
