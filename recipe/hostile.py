"""Hostile input against a running service: a hand corpus, then requests generated from its /openapi.json.

Every route and method of the document (and methods it does not list) gets bodies, ids and query
strings drawn by Hypothesis strategies derived from the document's schemas, half of them then broken
(a field's value swapped for another JSON type, a required field dropped, text that is not JSON).
Passes when no answer is a 5xx, no request hangs (each has --timeout), /health stays 200, every
rejection is a JSON error body {"status", "error", "detail", ...} naming what was wrong, no body
carries a stack trace or a file path, and the rejected requests changed nothing in Redis (queue depth
and job, result and batch keys are the same before and after them). Writes hostile.json into --output.

    python -m recipe.hostile --frontend http://127.0.0.1:8080 --redis-url redis://127.0.0.1:6379/0 \\
        --output /tmp/hostile-1 [--generated 2000]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlparse

from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from laya_common import contract
from laya_common.broker import queues
from recipe.client import Client, add_service_arguments
from recipe.provenance import versions

GENERATED, TIMEOUT_S, SEED = 2000, 30.0, 0
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
ERROR_KEYS = {"status", "error", "detail", "field", "id", "workers"}
LEAKS = ("Traceback", 'File "', ".py", "/work/", "/usr/", "site-packages")
KEY_PATTERNS = ("laya:job:*", "laya:result:*", "laya:batch:*")
GOOD = {
    "model": "english",
    "state": "Please refund the duplicate charge.",
    "questions": {"refund": {"type": "noul", "instructions": "Does the customer ask for a refund?"}},
}
JSON_VALUES = (None, True, 0, -1.5, "", "x", [], {}, [1, "a"], {"k": "v"})


# --- the hand corpus: (name, method, path, headers, body); every one must be rejected with a 4xx ---


def hand_corpus(max_body: int) -> list[tuple[str, str, str, dict, bytes]]:
    post = "/v1/systemone"
    j = {"Content-Type": "application/json"}
    cases = [
        ("truncated JSON", "POST", post, j, json.dumps(GOOD).encode()[:-7]),
        ("malformed JSON", "POST", post, j, b'{"state": "x", "questions": {,}}'),
        ("empty body", "POST", post, j, b""),
        ("invalid UTF-8", "POST", post, j, b'{"state": "\xff\xfe", "questions": {}}'),
        ("UTF-16 bytes", "POST", post, j, json.dumps(GOOD).encode("utf-16")),
        ("lone surrogate in the state", "POST", post, j, json.dumps({**GOOD, "state": "a \ud800 b"}).encode()),
        ("NaN", "POST", post, j, b'{"state": NaN, "questions": {}}'),
        (
            "Infinity",
            "POST",
            post,
            j,
            b'{"state": "x", "questions": {"q": {"type": "noul", "instructions": Infinity}}}',
        ),
        ("deep nesting, arrays", "POST", post, j, b'{"state": ' + b"[" * 5000 + b"]" * 5000 + b', "questions": {}}'),
        ("deep nesting, objects", "POST", post, j, b'{"state": ' + b'{"a": ' * 3000 + b"1" + b"}" * 3000 + b"}"),
        (
            "17 questions",
            "POST",
            post,
            j,
            json.dumps({**GOOD, "questions": {f"q{i}": GOOD["questions"]["refund"] for i in range(17)}}).encode(),
        ),
        (
            "2049 markers",
            "POST",
            post,
            j,
            json.dumps(
                {
                    **GOOD,
                    "questions": {
                        f"q{i}": {"type": "choice", "instructions": "?", "criteria": [f"o{k}" for k in range(205)]}
                        for i in range(10)
                    },
                }
            ).encode(),
        ),
        ("1 MB string over the cap", "POST", post, j, json.dumps({**GOOD, "state": "x" * max_body}).encode()),
        (
            "empty strings",
            "POST",
            post,
            j,
            json.dumps({"model": "", "state": "", "questions": {"": {"type": "", "instructions": ""}}}).encode(),
        ),
        ("a Laya model not served", "POST", post, j, json.dumps({**GOOD, "model": "multilingual"}).encode()),
        ("no content type", "POST", post, {}, json.dumps(GOOD).encode()),
        ("text/plain", "POST", post, {"Content-Type": "text/plain"}, json.dumps(GOOD).encode()),
        ("form data", "POST", "/v1/jobs", {"Content-Type": "application/x-www-form-urlencoded"}, b"state=x"),
        ("JSON lines to systemone", "POST", post, {"Content-Type": "application/x-ndjson"}, json.dumps(GOOD).encode()),
        (
            "a batch of no states",
            "POST",
            "/v1/batches",
            j,
            json.dumps({"states": [], "questions": GOOD["questions"]}).encode(),
        ),
        (
            "a batch over the state cap",
            "POST",
            "/v1/batches",
            j,
            json.dumps({"states": ["s"] * 10001, "questions": GOOD["questions"]}).encode(),
        ),
        (
            "a JSON-lines batch with a bad line",
            "POST",
            "/v1/batches",
            {"Content-Type": "application/x-ndjson"},
            json.dumps(GOOD).encode() + b"\n{not json}\n",
        ),
        ("a page past the cap", "GET", "/v1/batches/x?limit=100000", {}, None),
        ("a negative offset", "GET", "/v1/batches/x?offset=-1", {}, None),
        ("unknown job id", "GET", "/v1/jobs/" + "0" * 32, {}, None),
        ("path traversal in a job id", "GET", "/v1/jobs/..%2F..%2Fhealth", {}, None),
        ("path traversal in a batch id", "GET", "/v1/batches/../../openapi.json", {}, None),
        ("a Redis glob as a job id", "GET", "/v1/jobs/*", {}, None),
        ("a 4 KB job id", "GET", "/v1/jobs/" + "a" * 4096, {}, None),
        ("a method the route lacks", "DELETE", post, {}, None),
        ("an unknown route", "POST", "/v1/systemtwo", j, json.dumps(GOOD).encode()),
    ]
    # a wrong type at every top-level field but the model, which takes any JSON value as laya-serve does (what
    # names no Laya model goes to the default); the state takes a string, an object or a list
    for field in ("state", "questions"):
        for value in JSON_VALUES:
            if field == "state" and isinstance(value, str | list | dict) or field == "questions" and value == {}:
                continue  # any string, list or object is a state; no questions get no answers
            cases.append((f"{field} = {value!r}", "POST", post, j, json.dumps({**GOOD, field: value}).encode()))
    for field in ("type", "instructions", "criteria", "labels"):
        for value in JSON_VALUES:  # ... and at every field of a question, where the reference rejects it
            question = {**GOOD["questions"]["refund"], field: value}
            if field == "instructions" or (field == "criteria" and value in (None, {}, [])):
                continue  # any instructions, and empty criteria, are answered
            cases.append(
                (
                    f"question {field} = {value!r}",
                    "POST",
                    post,
                    j,
                    json.dumps({**GOOD, "questions": {"q": question}}).encode(),
                )
            )
    return cases


# --- requests drawn from the OpenAPI document ---


def json_values() -> st.SearchStrategy:
    scalars = (
        st.none()
        | st.booleans()
        | st.integers(-(2**70), 2**70)
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(max_size=40)
    )
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
        max_leaves=12,
    )


def from_schema(schema: dict, components: dict) -> st.SearchStrategy:
    """Values a JSON Schema (the subset /openapi.json uses) describes."""
    if "$ref" in schema:
        return from_schema(components[schema["$ref"].rsplit("/", 1)[1]], components)
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema.get("type")
    if kind == "object":
        if "additionalProperties" in schema:
            return st.dictionaries(
                st.text(max_size=12),
                from_schema(schema["additionalProperties"], components),
                max_size=schema.get("maxProperties", 4) + 1,
            )
        properties = {k: from_schema(v, components) for k, v in schema.get("properties", {}).items()}
        required = set(schema.get("required", ()))
        return st.fixed_dictionaries(
            {k: s for k, s in properties.items() if k in required},
            optional={k: s for k, s in properties.items() if k not in required},
        )
    if kind == "array":
        return st.lists(
            from_schema(schema.get("items", {}), components), min_size=schema.get("minItems", 0), max_size=5
        )
    if kind == "string":
        return st.just(schema["default"]) | st.text(max_size=20) if "default" in schema else st.text(max_size=40)
    if kind == "integer":
        return st.integers(min_value=schema.get("minimum"))
    return json_values()  # no type: any JSON value


@st.composite
def broken(draw, value: object) -> object:
    """`value` with one part swapped for a value of another JSON type, or one key dropped."""
    if isinstance(value, dict) and value:
        key = draw(st.sampled_from(sorted(value, key=str)))
        if draw(st.booleans()):
            return {k: v for k, v in value.items() if k != key}
        return {**value, key: draw(broken(value[key]))}
    if isinstance(value, list) and value:
        i = draw(st.integers(0, len(value) - 1))
        return value[:i] + [draw(broken(value[i]))] + value[i + 1 :]
    return draw(json_values().filter(lambda v: type(v) is not type(value)))


@st.composite
def requests(draw, document: dict) -> tuple[str, str, str, bytes | None]:
    """(method, path, content type, body) for some route of the document."""
    components = document["components"]["schemas"]
    route = draw(st.sampled_from(sorted(document["paths"])))
    operations = document["paths"][route]
    documented = sorted(m.upper() for m in operations)
    method = draw(st.one_of(st.sampled_from(documented), st.sampled_from(documented), st.sampled_from(METHODS)))
    operation = operations.get(method.lower(), {})
    ident = draw(
        st.text(min_size=1, max_size=40).filter(lambda s: "/" not in s)
        | st.sampled_from(["..", "%2e%2e%2f", "*", "0" * 32, "\x00"])
    )
    path = route.replace("{id}", quote(ident))
    if any(p["in"] == "query" for p in operation.get("parameters", ())):
        offset, limit = draw(st.integers(-5, 10**6) | st.text(max_size=5)), draw(st.integers(-5, 10**6))
        path += f"?offset={quote(str(offset))}&limit={limit}"
    content = operation.get("requestBody", {}).get("content", {"application/json": {"schema": {}}})
    content_type = draw(st.sampled_from(sorted(content)))
    value = draw(from_schema(content[content_type]["schema"], components))
    how = draw(st.sampled_from(("as is", "broken", "not JSON")))
    if how == "broken":
        value = draw(broken(value))
    body = json.dumps(value, ensure_ascii=draw(st.booleans())).encode("utf-8", "surrogatepass")
    if how == "not JSON":
        body = body[: draw(st.integers(0, max(0, len(body) - 1)))] + draw(st.binary(max_size=8))
    return method, path, content_type, body if method in ("POST", "PUT", "PATCH") else None


def quote(text: str) -> str:
    from urllib.parse import quote as url_quote

    return url_quote(text.encode("utf-8", "surrogatepass"), safe="")


# --- checking the answers ---


class Checker:
    def __init__(self, frontend: str, redis_url: str, api_key: str, timeout_s: float) -> None:
        from redis import Redis

        self.client = Client(frontend, api_key, timeout_s=timeout_s, trace=False)
        self.health = Client(frontend, timeout_s=timeout_s, trace=False)
        self.redis, self.timeout_s = Redis.from_url(redis_url), timeout_s
        self.statuses: Counter = Counter()
        self.violations: list[dict] = []
        self.sent = 0

    def send(self, name: str, method: str, path: str, headers: dict, body: bytes | None, *, rejected: bool) -> int:
        self.sent += 1
        t0 = time.monotonic()
        try:
            self.client.headers = {**self.client.headers, **headers}
            status, _, answer = self.client.request(method, path, body, content_type=headers.get("Content-Type", ""))
        except OSError as e:  # a timeout is a hang
            self.violation(name, method, path, f"no answer within {self.timeout_s:g} s ({type(e).__name__})")
            return 0
        finally:
            self.client.headers = {k: v for k, v in self.client.headers.items() if k not in headers}
        self.statuses[status] += 1
        self.check(name, method, path, status, answer, rejected, time.monotonic() - t0)
        return status

    def check(
        self, name: str, method: str, path: str, status: int, answer: bytes, rejected: bool, seconds: float
    ) -> None:
        text = answer.decode("utf-8", "replace")
        if status >= 500:
            self.violation(name, method, path, f"{status}: {text[:300]}")
        if rejected and not 400 <= status < 500:
            self.violation(name, method, path, f"{status} where a rejection was due")
        if any(leak in text for leak in LEAKS) and path != "/openapi.json":
            self.violation(name, method, path, f"a trace or a path in the body: {text[:300]}")
        if status >= 400:
            try:
                body = json.loads(answer)
                ok = set(body) <= ERROR_KEYS and body["status"] == status and body["error"] and body["detail"]
            except (ValueError, KeyError, TypeError):
                ok = False
            if not ok:
                self.violation(name, method, path, f"{status} without a JSON error body: {text[:300]}")

    def violation(self, name: str, method: str, path: str, what: str) -> None:
        self.violations.append({"case": name, "method": method, "path": path[:200], "what": what})

    def healthy(self) -> bool:
        try:
            return self.health.request("GET", "/health")[0] == 200
        except OSError:
            return False

    def quiesce(self, timeout_s: float = 120) -> None:
        """Until no task waits in the queue or runs, so that only the requests sent next can change Redis."""

        def idle() -> bool:
            workers = contract.read_workers(self.redis)
            return self.queue_depth() == 0 and not any(w.get("tasks") for w in workers)

        deadline = time.monotonic() + timeout_s
        while not idle():
            if time.monotonic() > deadline:
                raise TimeoutError("the service did not go idle")
            time.sleep(0.1)

    def queue_depth(self) -> int:
        return sum(self.redis.llen(queue) for queue in queues.queue_names("english"))

    def redis_state(self) -> dict:
        state = {"queue_depth": self.queue_depth()}
        for pattern in KEY_PATTERNS:
            state[pattern] = sum(1 for _ in self.redis.scan_iter(match=pattern, count=1000))
        return state


def raw_request(frontend: str, api_key: str, head: bytes, chunks: list[bytes], pause_s: float) -> int:
    """Send a request by hand (chunked or slow bodies); the status, or 0 if the server closed without one."""
    url = urlparse(frontend)
    with socket.create_connection((url.hostname, url.port), timeout=TIMEOUT_S) as s:
        s.sendall(head + f"Authorization: Bearer {api_key}\r\n\r\n".encode() if api_key else head + b"\r\n")
        try:
            for chunk in chunks:
                s.sendall(chunk)
                time.sleep(pause_s)
        except (BrokenPipeError, ConnectionResetError):
            pass  # answered (413) before the whole body went
        reply = s.recv(65536)
    return int(reply.split(b" ", 2)[1]) if reply.startswith(b"HTTP/") else 0


def streamed_cases(checker: Checker, frontend: str, api_key: str, max_body: int) -> None:
    """A chunked body over the cap (413 counted while it arrives), and a slow but small body (answered)."""
    head = b"POST /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    chunk = b" " * 65536
    status = raw_request(
        frontend,
        api_key,
        head + b"Transfer-Encoding: chunked\r\n",
        [b"%x\r\n%s\r\n" % (len(chunk), chunk)] * (max_body // len(chunk) + 4) + [b"0\r\n\r\n"],
        0,
    )
    checker.statuses[status] += 1
    checker.sent += 1
    if status != 413:
        checker.violation("chunked body over the cap", "POST", "/v1/systemone", f"answered {status}, not 413")
    body = json.dumps(GOOD).encode()
    status = raw_request(
        frontend,
        api_key,
        head + f"Content-Length: {len(body)}\r\n".encode(),
        [body[i : i + 8] for i in range(0, len(body), 8)],
        0.05,
    )
    checker.statuses[status] += 1
    checker.sent += 1
    if status != 200:
        checker.violation("slow body", "POST", "/v1/systemone", f"answered {status}, not 200")


def main(
    *,
    frontend: str,
    redis_url: str,
    output: Path,
    api_key: str = "",
    generated: int = GENERATED,
    timeout_s: float = TIMEOUT_S,
    rng_seed: int = SEED,
) -> int:
    checker = Checker(frontend, redis_url, api_key, timeout_s)
    document = json.loads(checker.client.request("GET", "/openapi.json")[2])
    max_body = int(document["info"]["description"].split("'max_body_bytes': ")[1].split(",")[0])
    report: dict = {"command": sys.argv, "frontend": frontend, "seed": rng_seed, "phases": {}}
    healthy_throughout = checker.healthy()

    # 1. the hand corpus: every request rejected, nothing changed in Redis
    checker.quiesce()
    before = checker.redis_state()
    for name, method, path, headers, body in hand_corpus(max_body):
        checker.send(name, method, path, headers, body, rejected=True)
    streamed_cases(checker, frontend, api_key, max_body)
    hand = checker.sent
    after = checker.redis_state()
    if after != before:
        checker.violation("hand corpus", "*", "*", f"Redis changed under rejected requests: {before} -> {after}")
    report["phases"]["hand corpus"] = {"requests": hand, "redis_before": before, "redis_after": after}
    healthy_throughout &= checker.healthy()

    # 2. generated from /openapi.json, every route and method, half of them broken
    @seed(rng_seed)
    @settings(
        max_examples=generated, database=None, deadline=None, derandomize=False, suppress_health_check=list(HealthCheck)
    )
    @given(requests(document))
    def generated_requests(request: tuple[str, str, str, bytes | None]) -> None:
        method, path, content_type, body = request
        checker.send(
            "generated", method, path, {"Content-Type": content_type} if body is not None else {}, body, rejected=False
        )

    generated_requests()
    report["phases"]["generated"] = {"requests": checker.sent - hand}
    healthy_throughout &= checker.healthy()

    report.update(
        {
            "requests": checker.sent,
            "statuses": {str(k): v for k, v in sorted(checker.statuses.items())},
            "healthy_throughout": healthy_throughout,
            "violations": checker.violations,
            "versions": versions(("laya-service", "hypothesis", "flask", "gunicorn", "marshmallow")),
        }
    )
    output.mkdir(parents=True, exist_ok=True)
    (output / "hostile.json").write_text(json.dumps(report, indent=2) + "\n")
    passed = healthy_throughout and not checker.violations
    print(
        f"hostile: {checker.sent} requests ({hand} hand-written), statuses {report['statuses']}, "
        f"{len(checker.violations)} violations, health {'200 throughout' if healthy_throughout else 'NOT 200'}; "
        f"{'passed' if passed else 'FAILED'}; in {output / 'hostile.json'}"
    )
    return 0 if passed else 1


def cli(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_service_arguments(p)
    p.add_argument(
        "--redis-url",
        default=os.environ.get("LAYA_REDIS_URL", contract.DEFAULT_REDIS_URL),
        help="the service's Redis, to check that rejections change nothing (default: $LAYA_REDIS_URL)",
    )
    p.add_argument("--generated", type=int, default=GENERATED, help="generated requests (default: %(default)s)")
    p.add_argument("--seed", type=int, default=SEED, help="Hypothesis seed (default: %(default)s)")
    p.add_argument("--output", type=Path, required=True, help="directory for hostile.json")
    args = p.parse_args(argv)
    return main(
        frontend=args.frontend,
        redis_url=args.redis_url,
        output=args.output,
        api_key=args.api_key,
        generated=args.generated,
        rng_seed=args.seed,
    )


if __name__ == "__main__":
    sys.exit(cli())
