"""Send the same requests through the HTTP API and through `laya-run`, and report every answer that differs.

None may: the API must answer exactly what the engine prints, byte for byte, errors included. Writes
http.jsonl, cli.jsonl and compare.json (the command line, versions, checkpoint hashes, every difference)
into --output, and exits 1 when any answer differs.

    python -m recipe.compare_with_backend --frontend http://127.0.0.1:8080 \\
        --checkpoint "$LAYA_CHECKPOINT" --output /tmp/compare-1
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

from recipe.provenance import versions

NOUL = {"type": "noul", "instructions": "Does the customer ask for a refund?"}
CHOICE = {
    "type": "choice",
    "instructions": "What is the topic?",
    "criteria": {"billing": "money, charges, refunds", "delivery": "parcels, shipping", "login": "accounts"},
}
SCORE = {"type": "score", "instructions": "How upset is the customer?", "criteria": ["calm", "annoyed", "furious"]}

# Every question type, state shapes (text, object, conversation), a state cut at max_len, question order,
# non-ASCII text, and requests the engine rejects (their error lines must match too).
DEFAULT_REQUESTS = [
    {"model": "english", "state": "Please refund the duplicate charge.", "questions": {"refund": NOUL}},
    {
        "model": "english",
        "state": "My parcel is two weeks late and nobody answers.",
        "questions": {"topic": CHOICE, "anger": SCORE, "refund": NOUL},
    },
    {
        "model": "english",
        "state": {"customer": "Zoë", "message": "Je veux être remboursée 🙂", "orders": [1, 2]},
        "questions": {"refund": NOUL, "topic": CHOICE},
    },
    {
        "model": "english",
        "state": ["hello", "I cannot log in since the update", "it says password error"],
        "questions": {"z": SCORE, "a": NOUL, "m": CHOICE},
    },
    {"model": "english", "state": "charge " * 900, "questions": {f"q{i}": NOUL for i in range(16)}},
    {"model": "english", "state": "x", "questions": {"labels": {**NOUL, "labels": ["no", "yes"]}}},
    {"model": "english", "state": "x", "questions": {"bad": {"type": "choice", "instructions": "?", "criteria": []}}},
    {"model": "english", "state": "x", "questions": {"bad": {"type": "score", "instructions": "?", "labels": [1]}}},
]


def main(
    *,
    frontend: str,
    checkpoint: Path,
    output: Path,
    bundle: Path | None = None,
    executor: str = "auto",
    requests_file: Path | None = None,
    api_key: str = "",
    timeout_s: float = 60.0,
) -> int:
    payloads = _read_requests(requests_file) if requests_file else DEFAULT_REQUESTS
    output.mkdir(parents=True, exist_ok=True)
    http = [post(frontend, payload, api_key=api_key, timeout_s=timeout_s) for payload in payloads]
    cli = laya_run(checkpoint, bundle, executor, payloads)
    differences = [
        {"index": i, "request": p, "http": h, "cli": c}
        for i, (p, h, c) in enumerate(zip(payloads, http, cli, strict=True))
        if h != c
    ]
    (output / "http.jsonl").write_text("".join(h + "\n" for h in http))
    (output / "cli.jsonl").write_text("".join(c + "\n" for c in cli))
    report = {
        "command": sys.argv,
        "frontend": frontend,
        "executor": executor,
        "requests": len(payloads),
        "differences": differences,
        "checkpoint_sha256": _hashes(checkpoint),
        "requests_sha256": hashlib.sha256(json.dumps(payloads).encode()).hexdigest(),
        "versions": versions(("laya-service", "torch", "celery", "flask", "gunicorn", "redis")),
    }
    (output / "compare.json").write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    print(f"compare_with_backend: {len(payloads)} requests, {len(differences)} differ; report in {output}")
    for d in differences:
        print(f"  request {d['index']}:\n    http: {d['http']}\n    cli:  {d['cli']}")
    return 1 if differences else 0


def post(frontend: str, payload: dict, *, api_key: str, timeout_s: float) -> str:
    """The body /v1/systemone answers (an error body too), as text."""
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    request = urllib.request.Request(
        frontend.rstrip("/") + "/v1/systemone", data=json.dumps(payload).encode(), headers=headers, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return response.read().decode().removesuffix("\n")
    except urllib.error.HTTPError as e:
        return e.read().decode().removesuffix("\n")


def laya_run(checkpoint: Path, bundle: Path | None, executor: str, payloads: list[dict]) -> list[str]:
    """What `laya-run` prints for each request, one line each."""
    cmd = [
        str(Path(sys.executable).parent / "laya-run"),
        str(checkpoint),
        *([str(bundle)] if bundle else []),
        "--executor",
        executor,
    ]
    lines = "".join(json.dumps(p) + "\n" for p in payloads)
    out = subprocess.run(cmd, input=lines, capture_output=True, text=True, check=False)
    answers = out.stdout.splitlines()
    if len(answers) != len(payloads):
        raise SystemExit(
            f"laya-run answered {len(answers)} of {len(payloads)} requests "
            f"(status {out.returncode}): {out.stderr.strip()[-2000:]}"
        )
    return answers


def _read_requests(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _hashes(checkpoint: Path) -> dict[str, str]:
    from laya_common.checkpoint import artifact_hashes

    return artifact_hashes(checkpoint)


def cli(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--frontend", default="http://127.0.0.1:8080", help="the API's base URL (default: %(default)s)")
    p.add_argument(
        "--checkpoint",
        type=Path,
        default=os.environ.get("LAYA_CHECKPOINT"),
        required=False,
        help="checkpoint laya-run loads: the one the workers serve (default: $LAYA_CHECKPOINT)",
    )
    p.add_argument(
        "--bundle",
        type=Path,
        default=os.environ.get("LAYA_CUDA_BUNDLE") or None,
        help="CUDA bundle for laya-run (default: $LAYA_CUDA_BUNDLE)",
    )
    p.add_argument(
        "--executor",
        default=os.environ.get("LAYA_EXECUTOR", "auto"),
        choices=("auto", "reference", "cuda"),
        help="laya-run's executor: the workers' (default: auto)",
    )
    p.add_argument("--requests", type=Path, help="JSON lines of requests (default: a built-in set)")
    p.add_argument(
        "--api-key", default=os.environ.get("LAYA_API_KEY", ""), help="bearer token (default: $LAYA_API_KEY)"
    )
    p.add_argument("--output", type=Path, required=True, help="directory for http.jsonl, cli.jsonl, compare.json")
    args = p.parse_args(argv)
    if args.checkpoint is None:
        p.error("--checkpoint (or LAYA_CHECKPOINT) is required")
    return main(
        frontend=args.frontend,
        checkpoint=args.checkpoint,
        output=args.output,
        bundle=args.bundle,
        executor=args.executor,
        requests_file=args.requests,
        api_key=args.api_key,
    )


if __name__ == "__main__":
    sys.exit(cli())
