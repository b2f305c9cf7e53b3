"""The engine of one worker process: loaded and warmed before the worker takes a task, stopped for good when it fails.

`laya-worker` runs Celery's solo pool: the process that takes a task from Redis runs it, one at a time.
It builds the engine and answers a real warmup first, and only then starts consuming the model's queues, so a
warming worker holds no task that an idle one could run; it announces readiness in Redis once Celery's consumer
is ready (its shutdown handlers are in place by then).
A task writes its envelope to its result key (which the API blocks on) in the same round trip as
its metrics and its message's acknowledgement (acks late: the answer is written first; see
laya_common.broker.transport). An executor failure answers that request with a 500 envelope, marks the
worker failed, and asks Celery for a warm shutdown, which acknowledges the answered task and exits
non-zero; a task that reaches a failed engine is requeued, and so is a request whose pass was launched behind
the failed one.
A sync request's task then answers the sync requests and jobs waiting back to back, each one's host work done
while the pass before it runs (worker.service.back_to_back). A batch is scored in windows; between two of them,
the sync requests and jobs waiting run first (worker.service.let_pass), so a batch holds an interactive caller for
one window at most. A cancelled job or batch (its result key holds the cancellation) is acknowledged without being
run; a running batch stops at its next window. On a warm shutdown a running batch goes back on its queue after its
current window, and the next worker goes on from there.
A worker that dies whole leaves its task to the others, or to the next one to start (worker.service.redelivery).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import json
import logging
import os
import signal
import time
from collections.abc import Callable, Iterator

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import OutOfMemoryError
from redis.exceptions import TimeoutError as RedisTimeoutError

from laya_common import contract
from laya_common.broker import queues, transport
from laya_common.broker.delivery import Delivery
from laya_common.version import version_info
from worker.service import tracing
from worker.service.back_to_back import Message, answer_back_to_back
from worker.service.batch_input import BatchInput
from worker.service.heartbeat import Heartbeat, executor_bucket, record_executor_seconds
from worker.service.let_pass import LetPass
from worker.service.redelivery import Redeliverer
from worker.service.round_trip import RoundTrip
from worker.service.settings import WorkerSettings

log = logging.getLogger("laya.worker")
STORE_PATIENCE_S = 60.0  # how long a computed answer waits for room in a full Redis before the worker gives up
EXIT_NO_ROOM = 75  # EX_TEMPFAIL: the task in hand stays unacknowledged, for redelivery
WAIT_SLICE_S = 1.0  # the longest single wait on the doorbell (kombu's brpop_timeout, the consumer's own)
MIN_WAIT_S = 0.001  # Redis counts a blocking timeout in whole ms, and 0 ms is forever

# Appends a window of batch results only where the previous window ended: a batch that two workers run
# at once (redelivered while its first worker, cut off from Redis, still ran it) is never written twice. And
# not at all once the batch has a result: its cancellation (KEYS[2]).
APPEND_AT = """
if redis.call('EXISTS', KEYS[2]) == 1 then return -1 end
if redis.call('LLEN', KEYS[1]) ~= tonumber(ARGV[1]) then return 0 end
redis.call('RPUSH', KEYS[1], unpack(ARGV, 3))
redis.call('EXPIRE', KEYS[1], ARGV[2])
return 1
"""
APPENDED, ELSEWHERE, CANCELLED = 1, 0, -1

# A task's answer, then its executor-time observation (heartbeat.record_executor_seconds's three commands)
# and the removal of its message's unacknowledged record (laya_common.broker says why), as one command: a
# pipeline of the eight took about 0.09 ms longer here, and the waiting API wakes only once all of it is sent.
STORE_ANSWER = """
redis.call('RPUSH', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[2])
redis.call('EXPIRE', KEYS[2], ARGV[2])
if ARGV[4] ~= '' then
  if ARGV[3] ~= '' then redis.call('HINCRBY', KEYS[3], ARGV[3], 1) end
  redis.call('HINCRBY', KEYS[3], 'count', 1)
  redis.call('HINCRBYFLOAT', KEYS[3], 'sum', ARGV[4])
end
""" + transport.settle_lua(keys_at=4, tag_at=5)

_runtime: Runtime | None = None


def start(settings: WorkerSettings, celery) -> Runtime:
    """Load and warm up this process's engine (`announce` says it is ready, once Celery's consumer is).

    :raise: whatever stopped it, once the worker's record says it failed.
    """
    global _runtime
    from redis import Redis

    redis = Redis.from_url(settings.redis_url)
    heartbeat = Heartbeat(
        redis,
        model=settings.model,
        node=contract.worker_node(),
        ttl_s=settings.heartbeat_ttl_s,
        info={"pid": os.getpid(), **version_info()},
        after_beat=Redeliverer(celery, redis, grace_s=settings.heartbeat_ttl_s),
    )
    try:
        engine = _load_engine(settings)
        heartbeat.record.update(executor=engine.executor.name, info=engine.info())
        _runtime = Runtime(settings, engine, redis, heartbeat, transport.Records(celery, redis))
    except Exception as e:
        log.exception("laya worker: the engine did not start")
        with contextlib.suppress(Exception):  # Redis may be what failed
            heartbeat.fail(f"startup failed ({type(e).__name__}); see the worker's log")
        raise
    return _runtime


def announce() -> None:
    """Celery's consumer is ready, its shutdown handlers in place: say this worker is ready (what /health reads).
    Before them, a SIGTERM would kill a worker the API already counted as ready."""
    if _runtime is not None and not _runtime.failed:
        _runtime.heartbeat.start()
        settings = _runtime.settings
        log.info("laya worker: %s executor warm, serving queues %s", _runtime.engine.executor.name, settings.queues)


def stop() -> None:
    """A graceful exit: withdraw readiness now rather than when the key expires (a failed record stays)."""
    if _runtime is not None and not _runtime.failed:
        _runtime.heartbeat.stop()


def stop_taking() -> None:
    """The worker is shutting down: the task running takes no more messages itself (worker.service.back_to_back)."""
    if _runtime is not None:
        _runtime.stopping = True


def failed() -> bool:
    return _runtime is not None and _runtime.failed


def current() -> Runtime:
    if _runtime is None:
        raise RuntimeError("no engine in this process: run the worker with laya-worker")
    return _runtime


def _load_engine(settings: WorkerSettings):
    from worker.engine.engine import Engine

    engine = Engine(
        settings.checkpoint, executor=settings.executor, model_name=settings.model, options=settings.executor_options()
    )
    log.info("laya worker: %s", engine.startup_line())
    t0 = time.perf_counter()
    engine.warmup(every_bucket=settings.warm_buckets == "all")
    log.info("laya worker: warmed up in %.1f s (LAYA_WARM_BUCKETS=%s)", time.perf_counter() - t0, settings.warm_buckets)
    # what the process holds from here on (torch, the tokenizer, the weights' wrappers: ~300,000 objects) stays
    # out of the garbage collector's full passes, each of which walked them all (~160 ms here) while a request
    # or a batch window waited
    gc.collect()
    gc.freeze()
    return engine


class Running:
    """A request `Runtime.begin` took up: its message, when it was taken, when its engine work started (wall
    and monotonic clocks) and its launched pass."""

    __slots__ = ("message", "taken_at", "started_at", "t0", "started")

    def __init__(self, message: Message, taken_at: float) -> None:
        self.message, self.taken_at = message, taken_at
        self.started_at, self.t0, self.started = 0.0, taken_at, None


class Runtime:
    def __init__(
        self, settings: WorkerSettings, engine, redis, heartbeat: Heartbeat, records: transport.Records
    ) -> None:
        self.settings, self.engine, self.redis, self.heartbeat = settings, engine, redis, heartbeat
        self.records = records  # kombu's records of unacknowledged messages, to put back a request left unanswered
        self.failed = False
        self.stopping = False  # a shutdown has begun: Celery's consumer takes nothing more, and neither does a task
        self._append_at = redis.register_script(APPEND_AT)
        keys = transport.take_keys(settings.model)
        self._take = ("EVAL", transport.TAKE, len(keys), *keys, len(queues.INTERACTIVE))  # TAKE, as Redis reads it
        self.let_pass = LetPass(self, every_s=settings.batch_yield_ms / 1000)

    def answer(self, message: Message) -> None:
        """The Celery task of a sync request or a job: answer it, then every one waiting
        (worker.service.back_to_back)."""
        self._refuse_if_failed()
        answer_back_to_back(self, message, linger_s=self.settings.linger_ms / 1000)

    def begin(self, message: Message) -> Running | None:
        """Start answering a sync request or a job (worker.service.back_to_back): its pass launched, to `end`; or
        None once its envelope is stored already (a request error, a /v1/systemone/batch call, which runs whole,
        a job cancelled while queued, a redelivered request answered before its worker died)."""
        delivery, payload, trace = message
        tracing.stamp(trace, "task_started")
        running = Running(message, taken_at=time.perf_counter())
        self.heartbeat.tasks[delivery.id] = delivery.tag  # a job reads "running", and no other worker redelivers it
        if (delivery.work_class == "jobs" or delivery.redelivered) and self._has_result(delivery):
            self._settle(delivery)
            self._release(running)
            return None
        tracing.stamp(trace, "engine_started")
        running.started_at, running.t0 = time.time(), time.perf_counter()
        protocol = payload.get(contract.PROTOCOL_KEY, contract.V03)
        try:
            if "states" not in payload:
                running.started = self.engine.start(payload, protocol)
                tracing.stamp(trace, "launched")
                return running
            response = self.engine.decide_states(payload, protocol)
        except contract.RequestError as e:
            self._conclude(running, contract.error_envelope(e.kind, e.detail, field=e.field))
        except Exception as e:
            self._conclude(running, self._failure(e))
        else:
            self._conclude_with(running, response)
        return None

    def end(self, running: Running, *, take_next: bool = False) -> Stored:
        """Read the pass `begin` launched and send the request's answer; with `take_next`, take the next waiting
        sync request or job in the same round trip (as `take_interactive`), whose reply `Stored.taken()` reads."""
        try:
            answered = self.engine.finish(running.started)
        except Exception as e:
            if self.failed:  # launched behind a pass that failed the executor: another worker answers it
                self._requeue(running)
                return Stored()
            return self._conclude(running, self._failure(e), take_next=take_next)
        return self._conclude_with(running, answered.response, answered.executor_ms, take_next=take_next)

    def abandon(self, running: Running) -> None:
        """Leave a request unanswered (an error stopped the worker's loop): its pass is waited for, so that the
        executor is free, and its message, no longer named by this worker, is redelivered."""
        with contextlib.suppress(Exception):
            self.engine.finish(running.started)
        self.heartbeat.tasks.pop(running.message.delivery.id, None)

    def _requeue(self, running: Running) -> None:
        """Put a request this failed worker cannot answer back on its queue for a warm worker (`put_back`)."""
        delivery = running.message.delivery
        self.heartbeat.tasks.pop(delivery.id, None)
        self.put_back(delivery)

    def put_back(self, delivery: Delivery) -> None:
        """Put a message taken and not answered back at the head of its queue (kombu's restore), and ring the
        doorbell, so that a warm worker takes it now."""
        if delivery.tag is None:
            return
        self.records.restore(delivery.tag)
        bell = queues.bell_key(self.settings.model)
        self.redis.pipeline().lpush(bell, 1).ltrim(bell, 0, 0).execute()
        log.warning("laya worker: %s put back on its queue for another worker", delivery.id)

    def _conclude_with(
        self, running: Running, response: dict, executor_ms: float | None = None, *, take_next: bool = False
    ) -> Stored:
        seconds = time.perf_counter() - running.t0
        timings = _timings(running.started_at, seconds, executor_ms)
        envelope = contract.ok_envelope(response, timings)
        return self._conclude(running, envelope, executor_seconds=seconds, take_next=take_next)

    def _conclude(
        self, running: Running, envelope: dict, *, executor_seconds: float | None = None, take_next: bool = False
    ) -> Stored:
        delivery, _, trace = running.message
        tracing.stamp(trace, "engine_finished")
        take_next = take_next and self.taking  # not once this answer's own failure stopped the worker
        commands = self._store_commands(delivery, envelope, executor_seconds=executor_seconds, trace=trace)
        if take_next:
            resend = functools.partial(self._write_when_room, commands, delivery)
            stored = Stored(RoundTrip(self.redis, [*commands, self._take]), resend)
        else:
            self._write_when_room(commands, delivery)
            stored = Stored()
        self._release(running)
        return stored

    def _release(self, running: Running) -> None:
        delivery = running.message.delivery
        self.heartbeat.tasks.pop(delivery.id, None)
        self.heartbeat.drain.answered(delivery.work_class or "sync", running.taken_at, time.perf_counter())

    def decide_batch(self, delivery: Delivery, batch: dict) -> None:
        """Score a batch ({"model", "total", "questions"?}, its states or requests in Redis: worker.service.batch_input)
        in windows, appending each state's result to the batch's Redis list in input order; between two windows,
        the sync requests and jobs waiting run first.

        States already in the list (a batch redelivered after its worker died) are not scored again.
        """
        with self._holding(delivery):
            if self._has_result(delivery):  # cancelled while queued (or finished before a redelivery)
                self._settle(delivery)
                return
            key = contract.batch_results_key(delivery.id)
            started_at, t0 = time.time(), time.perf_counter()
            done = self.redis.llen(key)
            payloads = BatchInput(self.redis, delivery.id, batch, start=done)
            windows = self.engine.decide_in_windows(
                payloads,
                self.settings.batch_chunk,
                let_pass=self.let_pass,
                protocol=batch.get(contract.PROTOCOL_KEY, contract.V03),
            )
            while True:
                window_t0 = time.perf_counter()
                try:
                    start, results = next(windows)
                except StopIteration:
                    break
                except Exception as e:
                    if self.failed:  # a request the batch let pass failed the executor: another worker goes on
                        stored = self.redis.llen(key)
                        log.warning(
                            "laya worker: executor failed; batch %s requeued after %d states", delivery.id, stored
                        )
                        self._requeue_task("this worker's executor has failed")
                    self._store(delivery, self._failure(e))
                    return
                appended = self._append(delivery.id, done + start, results, time.perf_counter() - window_t0)
                if appended == CANCELLED:
                    log.info("laya worker: batch %s cancelled; stopping after %d states", delivery.id, done + start)
                    windows.close()  # waits for the passes in flight, so the executor is free
                    self._settle(delivery)
                    return
                if appended == ELSEWHERE:
                    log.warning("laya worker: batch %s is being scored elsewhere; leaving it", delivery.id)
                    return
                if self.stopping:  # a warm shutdown: back on its queue, the next worker goes on after these states
                    stored = done + start + len(results)
                    log.warning("laya worker: shutting down; batch %s requeued after %d states", delivery.id, stored)
                    windows.close()
                    self._requeue_task("shutting down")
            seconds = time.perf_counter() - t0
            envelope = contract.ok_envelope({"done": batch["total"]}, _timings(started_at, seconds))
            self._store(delivery, envelope, drop=contract.batch_input_key(delivery.id))
        self.heartbeat.drain.observe("batches", seconds)

    def refuse(self, delivery: Delivery, detail: str) -> None:
        """Answer a message that cannot be run with a 400 envelope, and acknowledge it."""
        self._store(delivery, contract.error_envelope("bad_request", detail))

    @property
    def taking(self) -> bool:
        """Whether a task may take messages itself: not once the executor failed or a shutdown began."""
        return not (self.failed or self.stopping)

    def take_interactive(self) -> tuple[str, bytes] | None:
        """The next waiting sync request or job of this worker's model ((queue, message as queued), recorded as
        unacknowledged), or None."""
        pipe = self.redis.pipeline(transaction=False)
        pipe.execute_command(*self._take)
        return _taken(pipe.execute(raise_on_error=False)[0])

    def wait_interactive(self, seconds: float) -> tuple[str, bytes] | None:
        """As `take_interactive`, waiting up to `seconds` on the model's doorbell when nothing waits, with TAKE
        pipelined behind each wait as the consumer runs it. None when the time is up, once a shutdown begins, or
        when what rang the bell was not for TAKE's classes (a batch, which Celery's consumer then takes) or was
        taken by another worker. It waits in slices of at most WAIT_SLICE_S, as the consumer does: a blocked read
        may outlast the socket's timeout, and a shutdown is seen between two slices. For the first LAYA_SPIN_MS of
        the wait it polls the reply instead of sleeping: a process woken from sleep starts slower."""
        bell, deadline = queues.bell_key(self.settings.model), time.monotonic() + seconds
        spin_until = time.monotonic() + self.settings.spin_ms / 1000
        while self.taking and (left := deadline - time.monotonic()) >= MIN_WAIT_S:  # BLPOP 0 would never end
            trip = RoundTrip(self.redis, [("BLPOP", bell, round(min(left, WAIT_SLICE_S), 3)), self._take])
            while time.monotonic() < spin_until and not trip.arrived():
                pass
            rang, taken = trip.replies()
            if rang is not None or taken:
                return _taken(taken)
        return None

    def interactive_waiting(self) -> bool:
        pipe = self.redis.pipeline(transaction=False)
        for work_class in queues.INTERACTIVE:
            pipe.llen(queues.queue_name(self.settings.model, work_class))
        return any(pipe.execute())

    @contextlib.contextmanager
    def _holding(self, delivery: Delivery) -> Iterator[None]:
        """While a task runs, the heartbeat names it: a job reads "running", and no other worker redelivers it."""
        self._refuse_if_failed()
        self.heartbeat.tasks[delivery.id] = delivery.tag
        try:
            yield
        finally:
            self.heartbeat.tasks.pop(delivery.id, None)

    def _has_result(self, delivery: Delivery) -> bool:
        """The task's result key holds an envelope: its answer (stored before its worker died) or its cancellation."""
        return bool(self.redis.exists(contract.result_key(delivery.id)))

    def _settle(self, delivery: Delivery) -> None:
        """Acknowledge a task that leaves no answer (it was answered or cancelled before)."""
        if delivery.tag is None:
            return
        pipe = self.redis.pipeline(transaction=False)
        transport.settle(pipe, delivery.tag)
        pipe.execute()

    def _store(self, delivery: Delivery, envelope: dict, *, drop: str | None = None) -> None:
        """Write a task's envelope and its metrics, and acknowledge its message, in one round trip (and delete the
        key `drop`: a finished batch's input)."""
        self._write_when_room(self._store_commands(delivery, envelope, drop=drop), delivery)

    def _store_commands(
        self,
        delivery: Delivery,
        envelope: dict,
        *,
        executor_seconds: float | None = None,
        trace: dict[str, float] | None = None,
        drop: str | None = None,
    ) -> list[tuple]:
        """The commands that write a task's envelope, its metrics and its trace, and acknowledge its message (and
        delete the key `drop`)."""
        job_id, ttl_s = delivery.id, self.settings.result_ttl_s
        bucket = executor_bucket(executor_seconds) if executor_seconds is not None else None
        commands = [
            (
                "EVAL",
                STORE_ANSWER,
                5,
                contract.result_key(job_id),
                contract.job_key(job_id),  # a job record outlives its queue wait
                contract.executor_metrics_key(self.settings.model),
                *transport.RECORD_KEYS,
                json.dumps(envelope),
                ttl_s,
                bucket or "",
                "" if executor_seconds is None else repr(executor_seconds),
                delivery.tag or "",
            )
        ]
        tracing.stamp(trace, "result_sent")  # the waiting API may wake before the round trip's reply is read
        if trace is not None:
            commands += contract.trace_commands(job_id, {**trace, "worker": self.heartbeat.record["node"]})
        if drop is not None:
            commands.append(("DEL", drop))
        return commands

    def _write_when_room(self, commands: list[tuple], delivery: Delivery) -> None:
        """Send `commands` in a pipeline; while Redis refuses it for being past its maxmemory, send it again
        (admission keeps room for the answers of accepted work, but another tenant of the Redis may take it), for
        STORE_PATIENCE_S. Then the worker exits without acknowledging the message: a worker that takes it up once
        there is room answers it, and nothing accepted is lost."""
        deadline, delay = time.monotonic() + STORE_PATIENCE_S, 0.05
        while True:
            pipe = self.redis.pipeline(transaction=False)
            for command in commands:
                pipe.execute_command(*command)
            try:
                pipe.execute()
                return
            except OutOfMemoryError:
                if time.monotonic() + delay > deadline:
                    log.critical(
                        "laya worker: Redis has had no room for %s's answer for %.0f s; exiting so that "
                        "it is redelivered",
                        delivery.id,
                        STORE_PATIENCE_S,
                    )
                    os._exit(EXIT_NO_ROOM)
                log.warning("laya worker: Redis is past its maxmemory; %s's answer waits %.2f s", delivery.id, delay)
                time.sleep(delay)
                delay = min(1.0, 2 * delay)

    def _append(self, batch_id: str, start: int, results: list[dict], seconds: float) -> int:
        """Append a batch window that begins at result `start`: APPENDED, or ELSEWHERE if the list does not end
        there, or CANCELLED."""
        pipe = self.redis.pipeline(transaction=False)
        self._append_at(
            keys=[contract.batch_results_key(batch_id), contract.result_key(batch_id)],
            args=[start, self.settings.result_ttl_s, *(contract.wire_json(r) for r in results)],
            client=pipe,
        )
        record_executor_seconds(pipe, self.settings.model, seconds)
        return int(pipe.execute()[0])

    def _refuse_if_failed(self) -> None:
        if self.failed:
            self._requeue_task("this worker's executor has failed")

    @staticmethod
    def _requeue_task(why: str) -> None:
        """End the Celery task running, its message put back on its queue for another worker (Celery's Reject)."""
        from celery.exceptions import Reject

        raise Reject(why, requeue=True)

    def _failure(self, error: Exception) -> dict:
        """The envelope for an exception from the engine; an executor failure also stops this worker."""
        if not isinstance(error, contract.ExecutorError):
            # a bug outside the executor: this request fails, the executor is intact and keeps serving
            log.exception("laya worker: internal error")
            return contract.error_envelope("executor_failure", f"internal error in the worker ({type(error).__name__})")
        detail = f"the {self.engine.executor.name} executor failed; this worker has stopped"
        if not self.failed:  # the first failure stops the worker; a pass launched behind it may fail too
            log.error("laya worker: executor failure, stopping: %s", error)
            self.failed = True
            self.heartbeat.fail(detail)
            os.kill(os.getpid(), signal.SIGTERM)  # Celery's warm shutdown: the task in hand is stored and acknowledged
        return contract.error_envelope("executor_failure", detail)


class Stored:
    """A request's answer sent to Redis (`Runtime.end`), with the take of the next waiting message behind it when
    one was asked for. The caller launches another pass while Redis answers, then reads the replies: `taken()`."""

    def __init__(self, round_trip: RoundTrip | None = None, resend: Callable[[], None] | None = None) -> None:
        """`resend`: writes the answer again, waiting for room (`Runtime._write_when_room`), when the round trip's
        reply says it may not be stored."""
        self._round_trip, self._resend = round_trip, resend

    def taken(self) -> tuple[str, bytes] | None:
        """The message the round trip took ((queue, message as queued), recorded as unacknowledged), or None."""
        if self._round_trip is None:
            return None
        try:
            *stored, taken = self._round_trip.replies()
        except (RedisConnectionError, RedisTimeoutError):
            # the answer may not be stored: sent again, as redis-py's retries send a pipeline again; what TAKE
            # took (if it ran) stays taken until the redelivery of a held message no worker names
            self._resend()
            return None
        if any(isinstance(result, OutOfMemoryError) for result in stored):
            self._resend()  # the answer waits for room; what TAKE took (if it ran) stays taken
        else:
            for result in stored:
                if isinstance(result, Exception):
                    raise result
        return _taken(taken)


def _taken(result) -> tuple[str, bytes] | None:
    """TAKE's reply in a pipeline run without raising: (queue, message) or None (nothing waits, or a Redis past its
    maxmemory refused it before its pop: the message waits in its queue for a later take)."""
    if isinstance(result, OutOfMemoryError):
        log.warning("laya worker: Redis is past its maxmemory; the next message waits in its queue for room")
        return None
    if not result:
        return None
    if isinstance(result, Exception):
        raise result
    return result[0].decode(), result[1]


def _timings(started_at: float, seconds: float, executor_ms: float | None = None) -> dict:
    timings = {"started_at": started_at, "finished_at": time.time(), "inference_ms": round(seconds * 1000, 3)}
    if executor_ms is not None:
        timings["executor_ms"] = round(executor_ms, 3)
    return timings
