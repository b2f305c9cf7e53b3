"""Shared test setup: fixed seeds, the `gpu` marker, and a run that cannot pass on nothing.

A test may skip only when it is marked `gpu` (it needs a Hopper GPU, skipped elsewhere), `nvcc` (it builds a
bundle, which needs the CUDA toolkit's nvcc; skipped where scripts/setup.sh found none) or `optional` (it needs
what a machine may lack and the service does not: the TLS test, where redis-server is built without TLS). Any
other skip means this machine's setup is incomplete (TileLang, redis-server: scripts/setup.sh installs them),
and the run fails naming those tests; so does a run in which no test ran at all.
"""

from __future__ import annotations

import random

import pytest

MAY_SKIP = ("gpu", "optional", "nvcc")


class MustRun:
    """Fails the run when a test skipped that must run on this machine, or when no test ran at all."""

    def __init__(self) -> None:
        self.may_skip: set[str] = set()  # node ids of the tests marked with one of MAY_SKIP
        self.skipped_wrongly: list[str] = []
        self.ran = 0
        self.failure: str | None = None

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        self.may_skip = {item.nodeid for item in items if any(item.get_closest_marker(m) for m in MAY_SKIP)}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.skipped:
            if not hasattr(report, "wasxfail") and report.nodeid not in self.may_skip:
                reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr
                self.skipped_wrongly.append(f"{report.nodeid}: {reason}")
        elif report.when == "call":
            self.ran += 1

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.skipped_wrongly:
            self.failure = "skipped, but must run on this machine:\n" + "\n".join(self.skipped_wrongly)
        elif session.testscollected and not self.ran and not session.config.option.collectonly:
            self.failure = f"none of the {session.testscollected} tests collected ran"
        if self.failure:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter) -> None:  # runs after every pytest_sessionfinish
        if self.failure:
            terminalreporter.section("the run fails (tests/conftest.py)", red=True)
            terminalreporter.line(self.failure, red=True)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--seed",
        type=int,
        default=None,
        help="seed the torch generators of the kernel tests with this instead of one drawn from the OS "
        "(a failing test's report names the seed it drew)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(MustRun(), "laya-must-run")


def hopper_gpu_present() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available() and torch.cuda.get_device_capability() >= (9, 0)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if hopper_gpu_present():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU of compute capability 9.0 (H100/H200)")
    for item in items:
        if item.get_closest_marker("gpu"):  # not `"gpu" in item.keywords`: that also matches tests/gpu/
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _seeded() -> None:
    random.seed(0)
