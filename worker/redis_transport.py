"""kombu's Redis transport with three round trips taken out of every task the worker runs.

- A message taken off the queue is recorded as unacknowledged (kombu's ZADD and HSET, in a
  transaction) without waiting for Redis's reply: the task starts while Redis writes the record. The
  task's answer goes out on the connection that sent the record (`execute_after_record`), and Redis
  runs one connection's commands in order, so the record is in before the answer's script removes
  it; the replies are read after. Any other command of the channel reads the reply first. Nothing is
  lost that kombu's wait would keep: Redis applies the transaction once it has read it, whether or not
  the worker then reads the reply; a worker that dies before sending it leaves the message in its taken
  list (below).
- One Redis client per channel for the commands kombu sends outside its BRPOP (recording a message as
  unacknowledged, acknowledging it). kombu builds a fresh `redis.Redis` for each, and building one
  fills its table of response callbacks: about a fifth of the consumer's profiled time per task.
- The record holds the message as it was queued (kombu encodes the parsed message again: about 3 ms for
  a batch of 1.1 MB, before the task may start).
- A worker takes a message with BLMOVE onto its own list (`contract.taken_key`) instead of kombu's BRPOP,
  and the transaction that records it as unacknowledged also removes it from that list. With BRPOP, a
  worker killed between taking a message and recording it lost the message; now the message waits in the
  list of a worker that is gone, and worker.redelivery puts it back on its queue. (A channel consuming
  more than one queue falls back to kombu's BRPOP; a worker consumes one.)
- A task can acknowledge its message in the round trip that writes its answer (the keys below, then
  `acked`): the commands kombu's acknowledgement would send run after the answer is written, and the
  acknowledgement Celery makes when the task returns then has nothing left to send.

Acks late still holds: a message leaves the unacknowledged set only after (or with) its answer,
so a worker that dies before that round trip leaves it there for redelivery.
"""

from __future__ import annotations

from contextlib import contextmanager
from queue import Empty
from time import monotonic, time

from kombu.transport import redis as kombu_redis
from kombu.transport import virtual
from kombu.utils.encoding import bytes_to_str
from kombu.utils.json import dumps, loads
from kombu.utils.objects import cached_property
from redis.exceptions import ResponseError

from worker import contract

# Delivery tags whose unacked entries a task's own answer pipeline removed (one worker, one task at a time).
_settled: set[str] = set()
# The channel whose record of the message being run has not had its reply read yet, if any.
_unread_record: Channel | None = None


class QoS(kombu_redis.QoS):
    def append(self, message, delivery_tag):
        delivery = message.delivery_info
        channel = self.channel
        received, channel.received = channel.received, None
        untake = ()
        if received is not None and delivery_tag.encode() in received:
            # kombu's record, `[message, exchange, routing key]` in JSON, with the message as it was queued
            record = b"[" + received + b", " + dumps([delivery["exchange"], delivery["routing_key"]])[1:].encode()
            if channel.taken_from is not None:  # BLMOVE put it leftmost, and a worker takes one at a time
                untake = (("LPOP", channel.taken_key),)
        else:  # taken without BRPOP or BLMOVE (basic_get)
            record = dumps([message._raw, delivery["exchange"], delivery["routing_key"]])
        channel.send_unread(
            ("MULTI",),
            ("ZADD", self.unacked_index_key, time(), delivery_tag),
            ("HSET", self.unacked_key, delivery_tag, record),
            *untake,
            ("EXEC",),
        )
        virtual.QoS.append(self, message, delivery_tag)

    def ack(self, delivery_tag):
        if delivery_tag in _settled:
            _settled.discard(delivery_tag)
            virtual.QoS.ack(self, delivery_tag)  # forget it here; Redis is done already
        else:
            super().ack(delivery_tag)


class Channel(kombu_redis.Channel):
    QoS = QoS
    _sync_client = None
    _unread = None  # (pool, connection, number of replies) of the transaction send_unread sent
    received = None  # the message the last BRPOP or BLMOVE returned, as queued, until QoS.append records it
    taken_from = None  # the queue the BLMOVE in flight takes from (None: kombu's BRPOP)
    _restore_taken = False  # a take's reply was lost: what the list holds goes back before the next take

    @cached_property
    def taken_key(self) -> str:
        return contract.taken_key(contract.worker_node())

    def _brpop_start(self, timeout=None):
        """Take the next message of the channel's one queue onto `taken_key` (BLMOVE), or, consuming several
        queues, kombu's BRPOP."""
        queues = list(self.active_queues)
        if len(queues) != 1 or list(self.priority_steps) != [0] or self.global_keyprefix:
            self.taken_from = None
            return super()._brpop_start(timeout)
        if self._restore_taken:
            self._restore_taken = False
            with self.conn_or_acquire() as client:
                while client.lmove(self.taken_key, queues[0], "LEFT", "RIGHT") is not None:
                    pass
        self.taken_from = queues[0]
        self._in_poll = self.client.connection
        self._brpop_sent_at = monotonic()
        timeout = self.brpop_timeout if timeout is None else timeout
        self.client.connection.send_command("BLMOVE", queues[0], self.taken_key, "RIGHT", "LEFT", timeout or 0)

    def _brpop_read(self, **options):
        if self.taken_from is None:
            return super()._brpop_read(**options)
        try:
            try:
                item = self.client.parse_response(self.client.connection, "BLMOVE", **options)
            except self.connection_errors:
                self._restore_taken = True  # the message may have moved with its reply lost
                self.client.connection.disconnect()
                raise
            if not item:
                raise Empty()
            self.received = item
            self.connection._deliver(loads(bytes_to_str(item)), self.taken_from)
            return True
        finally:
            self._in_poll = None
            self._flush_brpop_reauth()

    @cached_property
    def client(self):
        """kombu's client for BRPOP (and publishing), keeping each message BRPOP returns in `received`."""
        client = self._create_client(asynchronous=True)
        parse = client.parse_response

        def parse_keeping_message(connection, command_name, **options):
            reply = parse(connection, command_name, **options)
            if command_name == "BRPOP" and reply:
                self.received = reply[1]
            return reply

        client.parse_response = parse_keeping_message
        return client

    def send_unread(self, *commands) -> None:
        """Send a transaction (MULTI ... EXEC) on a connection of the channel's pool; `read_unread` reads
        its replies."""
        global _unread_record
        self.read_unread()
        pool = self.pool
        self._unread = (pool, pool.get_connection(), len(commands))
        self._send(commands, check_health=True)
        _unread_record = self

    def read_unread(self, *then) -> list:
        """Send `then` (commands) after the transaction `send_unread` sent, on its connection, and read
        every reply; return `then`'s. :raise: the transaction's first error, or a command's."""
        if self._unread is None:
            return []
        if then:
            # its replies are pending: a health-check PING now would read one of them as its answer
            self._send(then, check_health=False)
        pool, conn, count = self._forget()
        try:
            replies = [conn.read_response() for _ in range(count + len(then))]
        except BaseException:
            conn.disconnect()  # replies may be left unread on it
            raise
        finally:
            pool.release(conn)
        for reply in replies[count - 1] or ():  # EXEC's: each command's reply, or its error
            if isinstance(reply, ResponseError):
                raise reply
        return replies[count:]

    def _send(self, commands, *, check_health: bool) -> None:
        pool, conn, _ = self._unread
        try:
            conn.send_packed_command(conn.pack_commands(commands), check_health=check_health)
        except BaseException:
            self._forget()
            conn.disconnect()
            pool.release(conn)
            raise

    def _forget(self) -> tuple:
        global _unread_record
        unread, self._unread = self._unread, None
        if _unread_record is self:
            _unread_record = None
        return unread

    @contextmanager
    def conn_or_acquire(self, client=None):
        self.read_unread()  # whatever kombu sends next comes after the record Redis has taken
        if client is not None:
            yield client
            return
        pool = self.pool  # a fresh pool after a reconnect: a fresh client on it
        if self._sync_client is None or self._sync_client.connection_pool is not pool:
            self._sync_client = self._create_client()
        yield self._sync_client


class Transport(kombu_redis.Transport):
    Channel = Channel


NAME = f"{__name__}:Transport"  # Celery's broker_transport setting


# kombu's keys for unacknowledged messages (the worker's Celery configuration leaves its defaults): a task
# acknowledges its message by removing its delivery tag from both, as kombu's QoS.ack does
UNACKED_INDEX_KEY = kombu_redis.Channel.unacked_index_key
UNACKED_KEY = kombu_redis.Channel.unacked_key


def execute_after_record(pipe) -> list:
    """Execute a pipeline's commands where Redis runs them after the unacknowledged record of the message
    being run: on the connection that sent the record when its reply is unread (the commands go out
    without waiting for it), else as the pipeline would. Returns the commands' replies, unparsed. The
    channel's Redis is the pipeline's: the worker's broker and its results are both LAYA_REDIS_URL."""
    if _unread_record is None:
        return pipe.execute()
    commands = [args for args, _options in pipe.command_stack]
    pipe.reset()
    return _unread_record.read_unread(*commands)


def acked(delivery_tag: str) -> None:
    """The task removed `delivery_tag` itself: Celery's acknowledgement of this message sends nothing."""
    _settled.add(delivery_tag)
