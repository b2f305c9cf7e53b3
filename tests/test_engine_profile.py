"""recipe.engine_profile's split of the cuda executor's launch: each part timed while inside, the executor as it was
after (its readout is an instance attribute, its replay a method of the class); its --host-only run, which needs
no GPU."""

import json
import subprocess
import sys
from collections import defaultdict

import pytest

from recipe.bench_inputs import INPUTS
from recipe.engine_profile import LAUNCH_PARTS, STAGES, timing_launch_parts
from worker.commands.synthesize import synthesize


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


def test_host_only_paces_each_input_and_times_its_stages_without_a_gpu(tmp_path):
    checkpoint = synthesize(tmp_path / "checkpoint", size="tiny")
    out = tmp_path / "profile"
    command = [sys.executable, "-m", "recipe.engine_profile", "--checkpoint", str(checkpoint), "--output", str(out)]
    subprocess.run([*command, "--host-only", "--pace-ms", "0.2,0.2,0.2,0.2,4"], check=True, timeout=600)
    stages = json.loads((out / "host-stages.json").read_text())
    assert list(stages) == list(INPUTS)
    for name, ms in stages.items():
        assert set(STAGES) <= set(ms) and all(ms[stage] > 0 for stage in STAGES)
        assert (ms["executor (GPU)"] >= 4) == name.startswith("16x512"), "each input's passes take its own pace"
        assert (out / f"host-{name.split()[0]}.txt").read_text().count("decide") > 0
    refused = subprocess.run([*command[:-1], str(tmp_path / "again"), "--host-only", "--bundle", "b"], check=False)
    assert refused.returncode == 2
