"""The drain rate a worker publishes for admission (worker.service.heartbeat.DrainRates): the worker's time per
task, which tasks answered back to back share rather than each counting their time in hand."""

from __future__ import annotations

import pytest

from worker.service.heartbeat import DrainRates


def test_a_task_answered_alone_took_from_its_take_to_its_answer():
    rates = DrainRates()
    rates.answered("sync", taken_at=10.0, now=10.5)
    rates.answered("sync", taken_at=20.0, now=20.5)  # idle in between: that time is nobody's
    assert rates.rates() == {"sync": pytest.approx(0.5)}


def test_tasks_in_hand_together_count_from_the_answer_before():
    rates = DrainRates()
    # three requests back to back, each taken while the one before was in hand, one answered every 0.1 s
    rates.answered("sync", taken_at=0.0, now=0.15)
    rates.answered("sync", taken_at=0.05, now=0.25)
    rates.answered("jobs", taken_at=0.15, now=0.35)
    assert rates.rates() == {"sync": pytest.approx(0.15 + 0.2 * (0.1 - 0.15)), "jobs": pytest.approx(0.1)}
