"""app/hot_wait.py on gevent's hub, by the CPU time the process burns: while one call waits the process polls, with
two it sleeps, it polls on for its linger after the last call, then sleeps; with no linger it never polls."""

from __future__ import annotations

import time

import gevent

from app.hot_wait import HotWait

POLLING, SLEEPING = 0.05, 0.02  # CPU seconds over 0.2 s of waiting: at least a quarter of a core, at most a tenth


def cpu_over(seconds: float) -> float:
    """The process's CPU time over `seconds` of a greenlet's wait."""
    t0 = time.process_time()
    gevent.sleep(seconds)
    return time.process_time() - t0


def test_one_call_waiting_polls_two_sleep_and_the_polling_lingers_after_the_last():
    hot = HotWait(linger_s=0.3)
    with hot.call():
        one = cpu_over(0.2)
        with hot.call():
            two = cpu_over(0.2)
        one_again = cpu_over(0.2)
    lingering = cpu_over(0.2)
    gevent.sleep(0.15)  # the linger ends
    after = cpu_over(0.2)
    assert one > POLLING and one_again > POLLING and lingering > POLLING, (one, one_again, lingering)
    assert two < SLEEPING and after < SLEEPING, (two, after)


def test_a_new_call_within_the_linger_keeps_polling_and_none_polls_without_a_linger():
    hot = HotWait(linger_s=0.1)
    with hot.call():
        pass
    gevent.sleep(0.05)
    with hot.call():
        gevent.sleep(0.1)  # past the first linger: the new call's wait keeps the polling
        assert cpu_over(0.2) > POLLING
    gevent.sleep(0.15)
    assert cpu_over(0.2) < SLEEPING

    off = HotWait(linger_s=0)
    with off.call():
        assert cpu_over(0.2) < SLEEPING
