"""The decision engine: a request in, typed answers out. Tokenize once, build rows, run, decode."""

from __future__ import annotations

import contextlib
import itertools
import json
from collections import deque
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import NamedTuple, Protocol

from laya_common import protocol04
from laya_common.checkpoint import check_checkpoint
from laya_common.contract import LIMITS, V03, V04, ExecutorError, RequestError
from laya_common.model import ModelConfig
from laya_common.version import version_info
from worker.engine.batch import Batch, Executor, Outputs, Pending
from worker.engine.checkpoint import load_weights
from worker.engine.decode import decode_answers
from worker.engine.executors import ExecutorOptions, choose_executor, make_executor
from worker.engine.sequences import (
    Question,
    Row,
    build_row,
    encode_state,
    encode_texts,
    encode_whole_state,
    held_ids,
    is_conversation,
    parse_payload,
    parse_questions,
    row_texts,
)
from worker.engine.tokenizer import Tokenizer

RESPONSE_MODEL = "laya-rl-agent"  # the reference's `model` field in every response
WARMUP_STATE = "Warm-up: please refund the duplicate charge on my card."
# how much longer a batch's window may be than the one before it, whose passes hide its preparation
# (a simulated GPU at the H200's ratio of GPU to host time per state: docs/performance.md)
WINDOW_GROWTH = 1.25


class Engine:
    def __init__(
        self,
        checkpoint: Path | str,
        *,
        executor: str | Executor = "reference",
        model_name: str = "english",
        options: ExecutorOptions | None = None,
    ) -> None:
        """`executor`: a name for `make_executor` ("auto" chooses), or an executor already built on this checkpoint."""
        checkpoint = check_checkpoint(checkpoint)
        options = options or ExecutorOptions()
        # before anything parses the checkpoint: a bundle's recorded hashes name a changed file
        choice = choose_executor(executor, checkpoint, options) if isinstance(executor, str) else None
        self.model_name = model_name
        self.config = ModelConfig.from_checkpoint(checkpoint)
        self.tokenizer = Tokenizer(checkpoint)
        if choice is not None:
            self.executor, self.executor_choice = make_executor(
                choice, self.config, load_weights(checkpoint), checkpoint=checkpoint, options=options
            )
        else:
            self.executor, self.executor_choice = executor, "given"
        admits = self.executor.admits
        if admits.max_rows < LIMITS["max_questions"] or admits.max_tokens < self.config.max_len:
            raise ValueError(
                f"the {self.executor.name} executor admits {admits.max_rows} rows of "
                f"{admits.max_tokens} tokens; a request may need {LIMITS['max_questions']} rows "
                f"of {self.config.max_len}"
            )

    def startup_line(self) -> str:
        """Which executor runs and why, and what it holds (for the cuda executor: bundle, routes, device memory)."""
        described = {k: v for k, v in self.executor.describe().items() if k != "executor"}
        return f"{self.executor.name} executor ({self.executor_choice}); {json.dumps(described)}"

    def info(self) -> dict:
        """What this engine is, for the worker's heartbeat record and GET /info."""
        from importlib import metadata

        described = self.executor.describe()
        mapping = self.executor.mapping()
        loaded: dict[str, set] = {}
        for entries in mapping.values():
            for entry, impl in entries.items():
                loaded.setdefault(entry, set()).add(impl)
        admits = self.executor.admits
        return {
            "model": self.model_name,
            "executor": described,
            "chosen": self.executor_choice,
            "kernel_mapping": {entry: sorted(impls) for entry, impls in loaded.items()},
            "limits": {
                **LIMITS,
                "max_len": self.config.max_len,
                "rows_per_pass": admits.max_rows,
                "token_step": admits.token_step,
                "passes_in_flight": self.executor.passes_in_flight,
            },
            "versions": {**version_info(), "torch": metadata.version("torch")},
        }

    def decide(self, payload: dict, protocol: str = V03) -> dict:
        """The /v1/systemone response for `payload` in `protocol`; RequestError for what cannot be answered."""
        return self.finish(self.start(payload, protocol)).response

    def start(self, payload: dict, protocol: str = V03) -> Started:
        """The host's part of `decide` before the executor's: validate and prepare `payload` and launch its pass.
        An executor that launches asynchronously (cuda) runs it while the caller does other work until `finish`.
        RequestError for what cannot be answered."""
        prepared = self.prepare(payload, protocol)
        return Started(prepared, self._launch(prepared.rows))

    def finish(self, started: Started) -> Answered:
        """The response to a request `start` launched (the same as `decide`'s), once its pass is read, and how long
        the executor took over that pass."""
        if started.pending is None:
            return Answered(_response({}, 0), None)
        outputs = self._outputs(started.pending)
        return Answered(self._answer(started.prepared, outputs.logits, outputs.act_probs), outputs.executor_ms)

    def decide_states(self, body: dict, protocol: str = V04) -> dict:
        """POST /v1/systemone/batch: the body's questions (and controls) asked of each of its states, rows sharing
        passes; {"results": each state's response, "total_usage"}. RequestError for the first state that cannot
        be answered: the call answers that, as laya-serve 0.4.15 does."""
        common = {k: v for k, v in body.items() if k != "states"}
        results = self.decide_many([{**common, "state": state} for state in body["states"]], protocol)
        for result in results:
            if "answers" not in result:
                raise RequestError(result["detail"], kind=result["error"], field=result.get("field"))
        total = {key: sum(r["usage"][key] for r in results) for key in ("input_tokens", "output_tokens")}
        return {"results": results, "total_usage": total}

    def decide_many(self, payloads: list[dict], protocol: str = V03) -> list[dict]:
        """Each payload's response or error body, in order; rows of several payloads share forward passes."""
        windows = self._decide_windows(payloads, [(0, len(payloads))], protocol=protocol)
        return [result for _, results in windows for result in results]

    def decide_in_windows(
        self, payloads: Sequence[dict], window: int, *, let_pass: LetPass | None = None, protocol: str = V03
    ) -> Iterator[tuple[int, list[dict]]]:
        """(start, the responses or error bodies of the window's payloads) for each window in turn: at most
        `window` payloads, the first windows shorter (`_window_bounds`).

        Rows of a window's payloads share forward passes. An executor that pads rows to token buckets gets
        them sorted by length, so that a pass pads little; one that keeps exact widths (the reference) gets
        whole payloads in input order. An executor that launches asynchronously (cuda) is kept
        holding as many passes as it can (`passes_in_flight`): a pass is read only when the next one needs
        its place, and the next window's payloads are prepared between the launches, so the GPU runs while
        the host decodes, prepares what follows, and the caller stores a window's results.

        Before each pass, `let_pass.wanted()` may ask for the executor: the passes in flight are then read, and
        `let_pass.run()` runs other requests (each its own passes) before this one goes on.
        """
        return self._decide_windows(payloads, _window_bounds(len(payloads), max(1, window)), let_pass, protocol)

    def _decide_windows(
        self,
        payloads: Sequence[dict],
        bounds: list[tuple[int, int]],
        let_pass: LetPass | None = None,
        protocol: str = V03,
    ) -> Iterator[tuple[int, list[dict]]]:
        # As many passes as the executor holds stay launched while the host works: the oldest is read only when
        # the next pass needs its place, so the GPU still has a pass queued while the host decodes, prepares
        # and (between windows) the caller stores a window's results. A window is yielded once its last pass
        # is read. Passes still in flight when the caller stops (or an error ends the loop) are waited for,
        # so that the executor is free for the next request.
        if not bounds or bounds[0][0] == bounds[0][1]:
            return
        depth = max(1, self.executor.passes_in_flight)
        upcoming = self._prepare_window(payloads, range(*bounds[0]), protocol)
        in_flight: deque[tuple[list[RowRef], Pending, _Window]] = deque()
        unread: deque[_Window] = deque()  # windows with passes not yet read, in input order
        try:
            for k, (start, end) in enumerate(bounds):
                current, upcoming = upcoming, _Window()
                current.bounds = (start, end)
                passes = self._row_passes(current)
                current.unread = len(passes)
                unread.append(current)
                following = range(*bounds[k + 1]) if k + 1 < len(bounds) else range(0)
                for g, piece in enumerate(_split(following, [_tokens(refs) for refs in passes] or [1])):
                    if g < len(passes):
                        if let_pass is not None and let_pass.wanted():
                            while in_flight:
                                self._finish(*in_flight.popleft())
                            let_pass.run()
                        if len(in_flight) == depth:
                            self._finish(*in_flight.popleft())
                        in_flight.append((passes[g], self._launch([p.rows[j] for _, p, j in passes[g]]), current))
                    while unread and unread[0].unread == 0:
                        yield unread.popleft().answers()
                    self._prepare_window(payloads, piece, protocol, into=upcoming)
            while in_flight:
                self._finish(*in_flight.popleft())
            while unread:
                yield unread.popleft().answers()
        finally:
            for _, pending, _ in in_flight:
                _drain(pending)

    def _prepare_window(
        self, payloads: Sequence[dict], indices: range, protocol: str, into: _Window | None = None
    ) -> _Window:
        into = _Window() if into is None else into
        for i in indices:
            try:
                into.prepared.append((i, self.prepare(payloads[i], protocol)))
            except RequestError as e:
                into.results[i] = e.to_dict()
        return into

    def _row_passes(self, window: _Window) -> list[list[RowRef]]:
        """The window's rows cut into forward passes. An executor that pads rows to token buckets gets them
        sorted by length, so that a pass pads little (a payload's rows may then run in several passes); one
        that keeps exact widths (the reference) gets whole payloads in input order, as many as fit a pass.
        A payload without rows (no questions) is answered here."""
        max_rows = self.executor.admits.max_rows
        for i, p in window.prepared:
            if not p.rows:
                window.results[i] = _response({}, 0)
        if self.executor.admits.token_step > 1:
            refs = sorted(
                ((i, p, j) for i, p in window.prepared for j in range(len(p.rows))),
                key=lambda ref: len(ref[1].rows[ref[2]].ids),
            )
            return [refs[k : k + max_rows] for k in range(0, len(refs), max_rows)]
        passes: list[list[RowRef]] = [[]]
        for i, p in window.prepared:
            if len(passes[-1]) + len(p.rows) > max_rows:
                passes.append([])
            passes[-1].extend((i, p, j) for j in range(len(p.rows)))
        return [refs for refs in passes if refs]

    def _finish(self, refs: list[RowRef], pending: Pending, window: _Window) -> None:
        """Read a pass; each payload all of whose rows are read gets its answer."""
        outputs = self._outputs(pending)
        for r, (i, p, j) in enumerate(refs):
            logits, act_probs = window.rows_read.setdefault(i, ([None] * len(p.rows), [None] * len(p.rows)))
            logits[j], act_probs[j] = outputs.logits[r], outputs.act_probs[r]
            if all(row is not None for row in logits):
                window.results[i] = self._answer(p, logits, act_probs)
                del window.rows_read[i]
        window.unread -= 1

    def prepare(self, payload: dict, protocol: str = V03) -> Prepared:
        """Validate a payload and build its rows: as much of the state as a row can hold in one tokenizer call,
        every question's texts in another (or from the tokenizer's cache of recent texts). Under protocol 0.4 its
        controls first, and the whole state is tokenized: the answer says how much of it a row kept."""
        strict = protocol == V04
        state, raw_questions = parse_payload(payload, self.model_name, strict=strict)
        controls = self._controls(payload) if strict else protocol04.NO_CONTROLS
        questions = parse_questions(raw_questions, strict=strict)
        if not questions:
            return Prepared([], [], protocol, controls)
        tok, cfg = self.tokenizer, self.config
        max_len, head_max_len = controls.max_len or cfg.max_len, controls.head_max_len or cfg.head_max_len
        state_ids = encode_whole_state(tok, state) if strict else encode_state(tok, state, max_len)
        held = held_ids(state, state_ids, max_len)
        per_question = [row_texts(tok, q) for q in questions]
        encoded, at, rows = encode_texts(tok, [t for texts in per_question for t in texts], cached=True), 0, []
        for question, texts in zip(questions, per_question, strict=True):
            rows.append(
                build_row(
                    tok,
                    question,
                    encoded[at : at + len(texts)],
                    held,
                    truncate_left=is_conversation(state),
                    max_len=max_len,
                    head_max_len=head_max_len,
                )
            )
            at += len(texts)
        return Prepared(questions, rows, protocol, controls, len(state_ids))

    def _controls(self, payload: dict) -> protocol04.Controls:
        """Protocol 0.4's controls of `payload`, its token budgets bounded by what this engine admits."""
        limit = self.executor.admits.max_tokens

        def note() -> str:
            return (
                f"model {self.model_name!r} takes here: {limit} tokens a row (its checkpoint's max_len is "
                f"{self.config.max_len}; the {self.executor.name} executor admits {limit})"
            )

        return protocol04.parse_controls(payload, max_tokens=limit, limit_note=note)

    def warmup(self, *, every_bucket: bool = False) -> None:
        """Prepare the executor's common shapes (or every shape it has), then answer a real request at the
        smallest and largest."""
        self.executor.warmup(every_bucket=every_bucket)
        long_state = " ".join(["word"] * (2 * self.config.max_len))
        questions = {
            f"q{i}": {"type": "noul", "instructions": "Is this a warm-up?"} for i in range(LIMITS["max_questions"])
        }
        self.decide({"model": self.model_name, "state": WARMUP_STATE, "questions": {"q": questions["q0"]}})
        self.decide({"model": self.model_name, "state": long_state, "questions": questions})

    def _launch(self, rows: list[Row]) -> Pending | None:
        """Start one forward pass over `rows` (None when there are none)."""
        if not rows:
            return None
        try:
            return self.executor.launch(Batch.from_rows(rows, self.tokenizer.pad_id, self.executor.admits))
        except Exception as e:
            raise self._failed(e) from e

    def _outputs(self, pending: Pending) -> Outputs:
        try:
            return pending.result()
        except Exception as e:
            raise self._failed(e) from e

    def _answer(self, p: Prepared, logits, act_probs) -> dict:
        """The response to a prepared request from each of its rows' outputs (rows of logits and act_probs)."""
        answers = decode_answers(
            self.config,
            p.questions,
            [len(r.markers) for r in p.rows],
            logits,
            act_probs,
            protocol=p.protocol,
            min_confidence=p.controls.min_confidence,
        )
        response = _response(answers, sum(len(r.ids) for r in p.rows))
        if p.protocol == V04:
            response["usage"].update(_state_usage(p))
        return response

    def _failed(self, error: Exception) -> ExecutorError:
        return ExecutorError(f"{self.executor.name} executor failed: {type(error).__name__}: {error}")


class LetPass(Protocol):
    """What a batch lets run between two of its passes (worker.service.let_pass)."""

    def wanted(self) -> bool: ...

    def run(self) -> None: ...


class _Window:
    """Payloads of one window of `decide_in_windows`: those prepared, in input order, and each answer or error."""

    def __init__(self) -> None:
        self.prepared: list[tuple[int, Prepared]] = []
        self.results: dict[int, dict] = {}
        self.bounds = (0, 0)  # (start, end) in the payloads
        self.unread = 0  # passes launched or to launch whose outputs are not read yet
        self.rows_read: dict[int, tuple[list, list]] = {}  # payload -> each row's logits and act_probs, once read

    def answers(self) -> tuple[int, list[dict]]:
        """(start, every payload's answer or error body, in input order)."""
        start, end = self.bounds
        return start, [self.results[i] for i in range(start, end)]


def _window_bounds(n: int, window: int) -> list[tuple[int, int]]:
    """(start, end) of each window over n payloads: the first an eighth as long, since nothing runs on the GPU
    while it is prepared; each later one is prepared while the one before it runs, so it grows by at most
    WINDOW_GROWTH over that one (preparing a state takes the host about as long as the GPU takes to run it:
    a window much longer than the one before would leave the GPU waiting), up to `window`."""
    bounds, start, size = [], 0, max(1, window // 8)
    while start < n:
        bounds.append((start, min(n, start + size)))
        start += size
        size = min(window, max(size + 1, int(size * WINDOW_GROWTH)))
    return bounds


def _drain(pending: Pending | None) -> None:
    """Wait for a pass whose answers nobody will read, so that the executor can reuse what it holds."""
    if pending is not None:
        with contextlib.suppress(Exception):  # the loop it belonged to has ended already, by its caller or an error
            pending.result()


def _split(indices: range, weights: list[int]) -> list[range]:
    """`indices` in consecutive pieces, one per weight, each about as long as its share of the weights' sum."""
    weights = weights if sum(weights) > 0 else [1] * len(weights)
    size, total, cuts, running = len(indices), sum(weights), [0], 0
    for weight in weights:
        running += weight
        cuts.append(running * size // total)
    return [indices[a:b] for a, b in itertools.pairwise(cuts)]


def _tokens(refs: list[RowRef]) -> int:
    """The tokens of a pass over these rows, padded to its longest (what sets the pass's GPU time): the next
    window is prepared in pieces of this share, so the host prepares less during a short pass."""
    return len(refs) * max((len(p.rows[j].ids) for _, p, j in refs), default=0)


class Prepared:
    """A validated request: its questions, one row per question, the protocol it is answered in, its controls
    and how many tokens its whole state has (protocol 0.4; 0 otherwise)."""

    __slots__ = ("questions", "rows", "protocol", "controls", "state_tokens")

    def __init__(
        self,
        questions: list[Question],
        rows: list[Row],
        protocol: str = V03,
        controls: protocol04.Controls = protocol04.NO_CONTROLS,
        state_tokens: int = 0,
    ) -> None:
        self.questions, self.rows, self.protocol = questions, rows, protocol
        self.controls, self.state_tokens = controls, state_tokens


def _state_usage(p: Prepared) -> dict:
    """What protocol 0.4 adds to `usage`: the state's tokens, the most a row dropped of them and the questions
    whose rows dropped some; and the questions whose options lost their own token spans to the head budget."""
    dropped = [p.state_tokens - row.state_kept for row in p.rows]
    usage = {
        "state_tokens": p.state_tokens,
        "state_tokens_dropped": max(dropped),
        "truncated": max(dropped) > 0,
        "truncated_questions": [q.qid for q, d in zip(p.questions, dropped, strict=True) if d > 0],
    }
    collapsed = {
        q.qid: {"total": len(row.markers), "distinct": row.distinct_options, "tokens_per_option": row.option_cap}
        for q, row in zip(p.questions, p.rows, strict=True)
        if row.distinct_options < len(row.markers)
    }
    if collapsed:
        usage["options"] = collapsed
    return usage


class Started(NamedTuple):
    """A request `Engine.start` launched: its prepared rows and its pass (None when it has no questions)."""

    prepared: Prepared
    pending: Pending | None


class Answered(NamedTuple):
    """A response and how long the executor took over its pass (None without one)."""

    response: dict
    executor_ms: float | None


RowRef = tuple[int, Prepared, int]  # a row of a window's pass: (payload index, its prepared request, row index)


def _response(answers: dict, input_tokens: int) -> dict:
    return {"model": RESPONSE_MODEL, "answers": answers, "usage": {"input_tokens": input_tokens, "output_tokens": 0}}
