"""`laya-run CHECKPOINT` end to end as a subprocess: JSON lines in, JSON lines out, equal to laya 0.3.20."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import pytest
import torch

LAYA_RUN = Path(sys.executable).with_name("laya-run")  # the console script installed with the project
# Plain `laya-run CHECKPOINT`, as issue 2 states it; where a GPU is present, pin the fp32 CPU reference executor
# so the answers stay comparable with laya's CPU fp32 ones.
ARGS = ["--executor", "reference", "--device", "cpu"] if torch.cuda.is_available() else []
LINE_TIMEOUT_S = 120  # one answer on the tiny model takes well under a second; startup loads torch

NOUL = {"type": "noul", "instructions": "Does the customer ask for a refund?"}
REQUESTS = [
    {"model": "english", "state": "Please refund the duplicate charge on my card.", "questions": {"q": NOUL}},
    {
        "state": [{"role": "user", "content": "café 日本語 🙂 [MASK] the app crashes"}],
        "questions": {
            "b": {
                "type": "choice",
                "instructions": "Topic?",
                "criteria": {"billing": None, "bug": "a crash", "日本": 0},
            },
            "a": {"type": "score", "instructions": "Anger?", "criteria": ["calm", {"level": "annoyed"}, "angry"]},
            "10": {"type": "noul", "instructions": "Urgent?", "labels": {"false": "B", "true": "A"}},
        },
    },
    {"state": {"ticket": "late package " * 300}, "questions": {f"q{i}": NOUL for i in range(16)}},
    {"state": "x", "questions": {}},
]


@pytest.fixture(scope="module")
def oracle(tiny_checkpoint):
    import laya

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="laya: this checkpoint ships invalid temperatures")
        return laya.Agent(str(tiny_checkpoint), device="cpu")


def run_lines(checkpoint, lines: list[str | bytes], *more: str) -> tuple[list[dict], subprocess.CompletedProcess]:
    """Feed `lines` to `laya-run CHECKPOINT` and parse every line it prints (which must be UTF-8 JSON)."""
    assert LAYA_RUN.is_file(), f"{LAYA_RUN} is not installed (pip install -e .)"
    data = b"".join((line if isinstance(line, bytes) else line.encode()) + b"\n" for line in lines)
    command = [str(LAYA_RUN), str(checkpoint), *ARGS, *more]
    proc = subprocess.run(command, input=data, capture_output=True, timeout=300)
    out = proc.stdout.decode("utf-8")  # strict: a response that is not UTF-8 is not JSON text
    return [json.loads(line) for line in out.splitlines()], proc


def test_answers_equal_the_reference(tiny_checkpoint, oracle):
    responses, proc = run_lines(tiny_checkpoint, [json.dumps(r) for r in REQUESTS])
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-3000:]
    assert len(responses) == len(REQUESTS)
    for request, response in zip(REQUESTS, responses, strict=True):
        want = oracle.predict(request["state"], request["questions"])
        assert json.dumps(response) == json.dumps(want)


def test_protocol_0_4_answers_in_its_shape_and_0_3_20_ignores_its_fields(tiny_checkpoint):
    request = {**REQUESTS[1], "model": "english", "min_confidence": 0.5, "max_len": 64}
    (v04,), proc = run_lines(tiny_checkpoint, [json.dumps(request)], "--protocol", "0.4")
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-3000:]
    assert v04["usage"]["truncated"] and {a["abstention_threshold"] for a in v04["answers"].values()} == {0.5}
    (v03, plain), _ = run_lines(tiny_checkpoint, [json.dumps(request), json.dumps(REQUESTS[1])])
    assert v03 == plain and "abstention" not in json.dumps(v03)


def test_errors_are_answered_and_the_process_goes_on(tiny_checkpoint, oracle):
    lines = [
        json.dumps({"state": "x", "questions": {"ok": NOUL, "bad": {"type": "bool", "instructions": "x"}}}),
        "this is not JSON {",
        json.dumps({"state": "x", "questions": {f"q{i}": NOUL for i in range(17)}}),
        json.dumps([1, 2]),
        json.dumps({"model": "multilingual", "state": "x", "questions": {"q": NOUL}}),
        json.dumps({"state": "x", "questions": {"q": {"type": "choice", "instructions": "x", "criteria": []}}}),
        json.dumps(REQUESTS[0]),
    ]
    responses, proc = run_lines(tiny_checkpoint, lines)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-3000:]
    assert len(responses) == len(lines), proc.stdout.decode(errors="replace")
    statuses = [r.get("status") for r in responses]
    assert statuses == [422, 400, 422, 422, 422, 422, None]
    assert responses[1]["error"] == "bad_request"
    for r in responses[:1] + responses[2:6]:
        assert r["error"] == "validation" and isinstance(r["detail"], str) and r["detail"]
    assert "bad" in responses[0].get("field", ""), "a 422 names the offending question"
    want = oracle.predict(REQUESTS[0]["state"], REQUESTS[0]["questions"])
    assert json.dumps(responses[-1]) == json.dumps(want)


# Lines Python's json module cannot turn into a request, or whose texts the tokenizer refuses. Each must get one
# error line (400: not JSON text; 422: not a request laya answers) and the next line must still be answered.
BAD_LINES = {
    "a lone surrogate in the state": (json.dumps({"state": "a \ud800 b", "questions": {"q": NOUL}}).encode(), 422),
    "bytes that are not UTF-8": (
        b'{"state": "\xff\xfe", "questions": {"q": {"type": "noul", "instructions": "x"}}}',
        400,
    ),
    "nesting past the JSON parser's recursion limit": (b"[" * 100_000 + b"]" * 100_000, 400),
    "an integer past Python's digit limit": (b'{"state": ' + b"1" * 5000 + b', "questions": {}}', 400),
    "a NaN literal, which JSON does not have": (b'{"state": NaN, "questions": {}}', 400),
}


@pytest.mark.parametrize("name", list(BAD_LINES))
def test_a_line_that_breaks_parsing_or_tokenizing_gets_an_error_line(tiny_checkpoint, oracle, name):
    line, status = BAD_LINES[name]
    responses, proc = run_lines(tiny_checkpoint, [line, json.dumps(REQUESTS[0])])
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-3000:]
    assert len(responses) == 2
    assert responses[0].get("status") == status and responses[0]["detail"], responses[0]
    want = oracle.predict(REQUESTS[0]["state"], REQUESTS[0]["questions"])
    assert json.dumps(responses[1]) == json.dumps(want)


def test_a_lone_surrogate_question_id_is_printed_as_json(tiny_checkpoint, oracle):
    """The reference answers it (ids are not tokenized); the line printed must still be UTF-8 JSON."""
    request = {"state": "x", "questions": {"\ud800": NOUL}}
    responses, proc = run_lines(tiny_checkpoint, [json.dumps(request)])
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-3000:]
    assert [json.dumps(r) for r in responses] == [json.dumps(oracle.predict(request["state"], request["questions"]))]


def test_each_answer_is_flushed_before_the_next_line_is_read(tiny_checkpoint):
    assert LAYA_RUN.is_file()
    proc = subprocess.Popen(
        [str(LAYA_RUN), str(tiny_checkpoint), *ARGS],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        bufsize=1,
    )
    out: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=lambda: [out.put(line) for line in proc.stdout], daemon=True)
    reader.start()
    answers = []
    try:
        for line in [json.dumps(REQUESTS[0]), "not json", json.dumps(REQUESTS[1])]:
            proc.stdin.write(line + "\n")
            proc.stdin.flush()  # stdin stays open: the answer must come without EOF
            answers.append(json.loads(out.get(timeout=LINE_TIMEOUT_S)))
        proc.stdin.close()
        assert proc.wait(timeout=LINE_TIMEOUT_S) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert [list(a.get("answers", a)) for a in answers] == [["q"], ["status", "error", "detail"], ["b", "a", "10"]]


def test_help():
    proc = subprocess.run([str(LAYA_RUN), "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    assert "usage" in proc.stdout.lower() and "checkpoint" in proc.stdout.lower()


def test_a_missing_checkpoint_fails_at_startup(tmp_path):
    proc = subprocess.run(
        [str(LAYA_RUN), str(tmp_path / "nowhere")], input="", capture_output=True, text=True, timeout=120
    )
    assert proc.returncode != 0
    assert "nowhere" in proc.stderr
