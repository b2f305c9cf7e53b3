"""A Redis round trip sent now and read later.

A worker sends a request's answer and the take of the next message in one round trip (Redis runs the commands
as they arrive, and the waiting API wakes then), launches the pass of a message it took before while Redis
answers, and reads the replies after (worker.service.back_to_back). Under 32 clients an H100 host's worker
spent 0.2 ms of its 1.0 ms of work per 1x77 request waiting on this reply.

redis-py's pipelines send and read in one call. This sends on a connection of the client's pool and holds it
until the replies are read, through redis-py's public Connection API (pack_commands, send_packed_command,
read_response, can_read, its retry policy); tests/service/test_round_trip.py checks it against the installed
redis-py.
"""

from __future__ import annotations

from redis.exceptions import ResponseError


class RoundTrip:
    def __init__(self, redis, commands: list[tuple]) -> None:
        """Send `commands` (each as Redis reads it: ("EVAL", script, 1, key, ...)); a connection lost before they
        are sent is retried as redis-py retries a pipeline."""
        self._pool, self._n = redis.connection_pool, len(commands)
        self._connection = connection = self._pool.get_connection()
        try:
            packed = connection.pack_commands(commands)
            connection.retry.call_with_retry(
                lambda: connection.send_packed_command(packed), lambda _error: connection.disconnect()
            )
        except BaseException:
            self._pool.release(connection)
            raise

    def arrived(self) -> bool:
        """Whether a reply has begun to arrive, without waiting (true also of a lost connection: `replies` raises).
        A worker polls it instead of sleeping until the reply (worker.service.lifecycle.Runtime.wait_interactive)."""
        try:
            return self._connection.can_read(timeout=0)
        except Exception:
            return True

    def replies(self) -> list:
        """Each command's reply, unparsed, or the error Redis answered it with (as a pipeline run without raising).
        A lost connection raises, and the commands may or may not have run."""
        try:
            replies = []
            for _ in range(self._n):
                try:
                    replies.append(self._connection.read_response())
                except ResponseError as e:
                    replies.append(e)
            return replies
        except BaseException:
            self._connection.disconnect()  # replies may still be on the socket: no later caller may read them
            raise
        finally:
            self._pool.release(self._connection)
