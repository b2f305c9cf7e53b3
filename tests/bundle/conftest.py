"""A real bundle for the CPU tests: every kernel built for sm_90a at the tiny model's dimensions.

Building needs TileLang and nvcc (no GPU): where nvcc or binutils is missing (scripts/setup.sh says how to get
them), the tests that need the bundle skip, naming what is missing; they are marked `nvcc`. The tiny dimensions keep
the checkpoint small; the kernels, build steps and checks are the same as for the large model. One build
per session.
"""

import shutil
from pathlib import Path

import pytest

TILE_CONFIG = "optimized"


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory) -> Path:
    from worker.commands.synthesize import synthesize

    return synthesize(tmp_path_factory.mktemp("ckpt") / "tiny", size="tiny", seed=0)


@pytest.fixture(scope="session")
def built_bundle(tmp_path_factory) -> Path:
    """A bundle straight from `laya-bundle build` (no tables yet)."""
    from bundle.build import main

    missing = [tool for tool in ("nvcc", "objcopy", "objdump") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"building a bundle needs {', '.join(missing)} (scripts/setup.sh says how to install them)")
    out = tmp_path_factory.mktemp("bundle") / TILE_CONFIG
    assert main(out=out, tile_config=TILE_CONFIG, model="tiny") == 0
    return out


@pytest.fixture(scope="session")
def exported_bundle(built_bundle, tiny_checkpoint, tmp_path_factory) -> Path:
    """The built bundle after `laya-bundle export-tables` with the tiny checkpoint."""
    from bundle.export_tables import main

    out = tmp_path_factory.mktemp("exported") / TILE_CONFIG
    shutil.copytree(built_bundle, out)
    assert main(checkpoint=tiny_checkpoint, out=out) == 0
    return out


@pytest.fixture
def bundle_copy(exported_bundle, tiny_checkpoint, tmp_path) -> tuple[Path, Path]:
    """A private copy of the exported bundle and its checkpoint, free to damage."""
    bundle, checkpoint = tmp_path / "bundle", tmp_path / "checkpoint"
    shutil.copytree(exported_bundle, bundle)
    shutil.copytree(tiny_checkpoint, checkpoint)
    return bundle, checkpoint
