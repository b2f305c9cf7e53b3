"""Bundles for the GPU kernel tests: one loaded `Kernels` per tile configuration.

LAYA_TEST_BUNDLES (colon-separated directories) names them; by default `bundles/original` and
`bundles/optimized` under the repository root, as `laya-bundle build bundles/<config> --config
<config>` writes them. A missing bundle fails the test: a GPU run that tested nothing must not pass.
"""

import os
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_BUNDLES = ("bundles/original", "bundles/optimized")


def _bundle_dirs() -> list[Path]:
    names = os.environ.get("LAYA_TEST_BUNDLES")
    return [ROOT / p for p in (names.split(":") if names else DEFAULT_BUNDLES)]


@pytest.fixture(scope="session", params=_bundle_dirs(), ids=lambda p: p.name)
def kernels(request):
    from bundle.loader import Kernels

    path = request.param
    if not (path / "manifest.json").is_file():
        pytest.fail(f"no bundle at {path}: build it with `laya-bundle build {path} --config {path.name}`")
    k = Kernels(path)
    k.init()
    return k


@pytest.fixture
def entry(kernels):
    """The declaration of an entry point by name; a tile sweep's candidate bundle holds only the entries it sweeps,
    so there a missing one skips the test (in any other bundle it fails it)."""
    from bundle.build import CANDIDATE_CONFIG

    def find(name):
        if name not in kernels.manifest.entries and kernels.manifest.tile_config == CANDIDATE_CONFIG:
            pytest.skip(f"candidate bundle {kernels.bundle.name} holds no {name}")
        return kernels.manifest.entries[name]

    return find


@pytest.fixture
def gen(request):
    """A fresh generator per test, seeded from the OS (every run draws new inputs) or from --seed to replay one.

    The seed goes into the test's report: a failing test prints it (pytest_runtest_makereport below).
    """
    g = torch.Generator(device="cuda")
    seed = request.config.getoption("seed")
    if seed is None:
        seed = g.seed()
    else:
        g.manual_seed(seed)
    request.node.user_properties.append(("seed", seed))
    return g


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    report = (yield).get_result()
    seeds = [value for name, value in report.user_properties if name == "seed"]
    if report.failed and seeds:
        report.sections.append(("generator seed", f"{seeds[0]}: replay with pytest '{item.nodeid}' --seed {seeds[0]}"))


@pytest.fixture
def poisoned():
    """Makes output buffers full of NaN: an element the kernel does not write fails the finiteness check."""

    def make(*shape, dtype):
        return torch.full(shape, float("nan"), dtype=dtype, device="cuda")

    return make
