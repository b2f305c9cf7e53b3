"""A synthesized checkpoint and a bundle whose tables were exported for it, prepared once per work directory.

The GPU tests and recipes share it: `<workdir>/<size>/checkpoint` (seed 0, deterministic) and
`<workdir>/<size>/<bundle name>` (the built bundle's manifest and library, tables exported on this machine's
GPU for that checkpoint). Whatever already verifies is reused, so one GPU session synthesizes and exports once.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from bundle.manifest import LIBRARY, MANIFEST

SEED = 0


def checkpoint(workdir: Path, size: str) -> Path:
    """The `size` checkpoint of this work directory, synthesized on first use."""
    from laya_common.checkpoint import ARTIFACTS
    from worker.commands.synthesize import synthesize

    path = Path(workdir) / size / "checkpoint"
    if not all((path / name).is_file() for name in ARTIFACTS):
        synthesize(path, size=size, seed=SEED)
    return path


def bundle_for(workdir: Path, size: str, built: Path) -> tuple[Path, Path]:
    """(checkpoint, bundle): `built` (a `laya-bundle build` output) with tables exported for the checkpoint."""
    from bundle import export_tables
    from bundle.verify import verify

    ckpt = checkpoint(workdir, size)
    bundle = Path(workdir) / size / Path(built).name
    if verify(bundle, ckpt):
        bundle.mkdir(parents=True, exist_ok=True)
        for name in (MANIFEST, LIBRARY):
            shutil.copy(Path(built) / name, bundle / name)
        if export_tables.main(checkpoint=ckpt, out=bundle) != 0:
            raise RuntimeError(f"exporting tables into {bundle} failed")
        found = verify(bundle, ckpt)
        if found:
            raise RuntimeError(f"{bundle} does not verify against {ckpt}: " + "; ".join(map(str, found)))
    return ckpt, bundle


if __name__ == "__main__":
    if not sys.argv[1:] or "--help" in sys.argv:
        print("usage: LAYA_GPU_WORKDIR=DIR python -m recipe.gpu_workdir SIZE:BUILT_BUNDLE ...\n\n" + __doc__)
        sys.exit(0 if "--help" in sys.argv else 2)
    for pair in sys.argv[1:]:
        size, built = pair.split(":", 1)
        print(*bundle_for(Path(os.environ["LAYA_GPU_WORKDIR"]), size, Path(built)), flush=True)
