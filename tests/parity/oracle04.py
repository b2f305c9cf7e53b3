"""What a correct answer is under protocol 0.4.15: laya-serve 0.4.15 itself, in a process of its own.

`Laya04` starts tests/parity/laya04_server.py with laya 0.4.15 first on the path (scripts/setup.sh installs it,
with FastAPI and httpx, into .venv/laya-0.4.15) and asks it what it answers. `assert_parity04` holds our engine
to it: the same status, and for a 200 the same JSON text once laya's `routing` (how its router chose a
checkpoint, which a named model makes moot) is left out.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from laya_common.contract import V04, RequestError

from .oracle import describe, wire

ROOT = Path(__file__).resolve().parents[2]
LAYA04 = ROOT / ".venv" / "laya-0.4.15"


class Laya04:
    """laya-serve 0.4.15 on `checkpoint`, answering one request at a time."""

    def __init__(self, checkpoint: Path) -> None:
        if not (LAYA04 / "laya").is_dir():
            raise RuntimeError(f"laya 0.4.15 is not installed in {LAYA04}: run scripts/setup.sh")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(LAYA04), os.environ.get("PYTHONPATH", "")])}
        self.process = subprocess.Popen(
            [sys.executable, "-W", "ignore", str(Path(__file__).with_name("laya04_server.py")), str(checkpoint)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        ready = self.process.stdout.readline()
        if json.loads(ready or "{}").get("ready") is not True:
            raise RuntimeError(f"laya-serve 0.4.15 did not start (exit {self.process.poll()})")

    def post(self, route: str, payload: object) -> tuple[int, object]:
        """(status, parsed body) of laya-serve's answer to `payload` at `route`."""
        self.process.stdin.write(json.dumps({"route": route, "body": json.dumps(payload)}) + "\n")
        self.process.stdin.flush()
        answer = json.loads(self.process.stdout.readline())
        self.last_body = answer["body"]
        return answer["status"], json.loads(answer["body"])

    def client_predict(self, base_url: str, api_key: str | None, **predict: object) -> tuple[object, object]:
        """(200, result) of laya 0.4.15's own HTTP client asking the server at `base_url`, or ("refused", why)."""
        line = {"client": base_url, "api_key": api_key, "predict": predict}
        self.process.stdin.write(json.dumps(line) + "\n")
        self.process.stdin.flush()
        answer = json.loads(self.process.stdout.readline())
        return answer["status"], json.loads(answer["body"]) if answer["status"] == 200 else answer["body"]

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(30)


def without_routing(result: dict) -> dict:
    return {k: v for k, v in result.items() if k != "routing"}


def ours04(engine, payload: object) -> tuple[int, object]:
    """(status, response or error body) of our engine under protocol 0.4.15."""
    try:
        return 200, engine.decide(wire(payload), V04)
    except RequestError as e:
        return e.to_dict()["status"], e.to_dict()


def assert_parity04(laya: Laya04, engine, payload: object) -> int:
    """Our engine answers `payload` as laya-serve 0.4.15 does: its status, and for a 200 its JSON text. Returns it."""
    status, body = laya.post("/v1/systemone", payload)
    got_status, got = ours04(engine, payload)
    assert got_status == status, f"status {got_status}, laya-serve {status} for\n{describe(payload)}\n{body}\n{got}"
    if status == 200:
        # as key-value pairs, every key kept: labels "true" and true are two options whose keys both read "true"
        want = [kv for kv in json_pairs(laya.last_body) if kv[0] != "routing"]
        assert json_pairs(json.dumps(got)) == want, (
            f"answers differ for\n{describe(payload)}\nexpected {want}\nactual   {got}"
        )
    return status


def json_pairs(text: str) -> list:
    """JSON text with each object as its list of (key, value) pairs, in order, a repeated key kept."""
    return json.loads(text, object_pairs_hook=list)
