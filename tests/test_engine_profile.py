"""recipe.engine_profile's split of the cuda executor's launch: each part timed while inside, the executor as it was
after (its readout is an instance attribute, its replay a method of the class)."""

from collections import defaultdict

import pytest

from recipe.engine_profile import LAUNCH_PARTS, timing_launch_parts


class Launching:
    """The two calls the split times, shaped as the cuda executor holds them."""

    def __init__(self) -> None:
        self.readout = lambda h: h + 1

    def _run(self, R: int, L: int) -> int:
        return R * L

    def launch(self) -> tuple[int, int]:
        return self._run(2, 3), self.readout(4)


def test_each_launch_part_is_timed_inside_and_the_executor_is_as_it_was_after():
    executor = Launching()
    readout = executor.readout
    times = defaultdict(list)
    with timing_launch_parts(executor, times):
        assert executor.launch() == (6, 5)
        assert executor.launch() == (6, 5)
    assert sorted(times) == sorted(LAUNCH_PARTS) and all(len(ms) == 2 and min(ms) >= 0 for ms in times.values())
    assert executor.readout is readout and "_run" not in vars(executor)
    executor.launch()
    assert all(len(ms) == 2 for ms in times.values())  # nothing timed after the block


def test_a_part_that_raises_is_timed_and_the_executor_restored():
    executor = Launching()
    executor.readout = raising = lambda h: 1 / 0
    times = defaultdict(list)
    with pytest.raises(ZeroDivisionError), timing_launch_parts(executor, times):
        executor.launch()
    assert len(times["launch: readout call"]) == 1
    assert executor.readout is raising and "_run" not in vars(executor)
