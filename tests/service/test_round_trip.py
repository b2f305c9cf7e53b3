"""A Redis round trip sent now and read later (worker/service/round_trip.py), on a real Redis with the installed
redis-py: the commands run when sent, other commands go on meanwhile on other connections, each reply is read in
order (an error as the exception Redis answered), and the connection goes back to the pool; a lost one raises."""

from __future__ import annotations

import pytest
import redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

from service.helpers import wait_until
from worker.service.round_trip import RoundTrip


def test_commands_run_when_sent_and_their_replies_are_read_later_in_order(private_db):
    client = redis.Redis.from_url(private_db)
    client.set("text", "a string")
    trip = RoundTrip(client, [("RPUSH", "answers", "one"), ("LPUSH", "text", "x"), ("EVAL", "return {1, 'two'}", 0)])
    wait_until(lambda: client.llen("answers") == 1, 5, "the first command to run before its reply is read")
    pushed, wrong_type, listed = trip.replies()
    assert pushed == 1 and listed == [1, b"two"]
    assert isinstance(wrong_type, ResponseError) and "WRONGTYPE" in str(wrong_type)
    for _ in range(20):  # each round trip's connection goes back to the pool: no new ones
        assert RoundTrip(client, [("LLEN", "answers")]).replies() == [1]
    assert len(connections(client, private_db)) <= 2


def test_a_connection_lost_before_the_replies_raises_and_the_next_round_trip_connects_again(private_db):
    client = redis.Redis.from_url(private_db)
    waiting = RoundTrip(client, [("BLPOP", "nothing-here", 5)])
    blocked = wait_until(
        lambda: [c for c in connections(client, private_db) if c["cmd"] == "blpop"], 5, "the round trip's BLPOP"
    )
    client.client_kill_filter(_id=blocked[0]["id"])
    with pytest.raises(RedisConnectionError):
        waiting.replies()
    assert RoundTrip(client, [("PING",)]).replies() == [b"PONG"]


def connections(client, url: str) -> list[dict]:
    """The connections to the test's own database (the Redis serves other tests' too)."""
    return [c for c in client.client_list() if c["db"] == url.rsplit("/", 1)[1]]


def test_arrived_says_without_waiting_whether_a_reply_is_there(private_db):
    client = redis.Redis.from_url(private_db)
    waiting = RoundTrip(client, [("BLPOP", "bell", 5)])
    assert not waiting.arrived()
    client.rpush("bell", "rung")
    wait_until(waiting.arrived, 5, "the BLPOP's reply")
    assert waiting.replies() == [[b"bell", b"rung"]]

    lost = RoundTrip(client, [("BLPOP", "nothing-here", 5)])
    blocked = wait_until(
        lambda: [c for c in connections(client, private_db) if c["cmd"] == "blpop"], 5, "the round trip's BLPOP"
    )
    client.client_kill_filter(_id=blocked[0]["id"])
    wait_until(lost.arrived, 5, "the lost connection to count as arrived")  # so that replies() raises, not waits
    with pytest.raises(RedisConnectionError):
        lost.replies()
