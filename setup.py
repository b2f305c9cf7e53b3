"""setuptools hooks (the project itself is in pyproject.toml): a built sdist or wheel carries the git commit it was
built from in laya_common/_commit.py, which `laya_common.version.git_commit` reads where there is no checkout to ask."""

from __future__ import annotations

import os
import runpy
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

STAMP = Path("laya_common", "_commit.py")


def commit() -> str:
    """LAYA_GIT_COMMIT if set (a Docker build has no .git); else the one an sdist carries; else the checkout's."""
    if os.environ.get("LAYA_GIT_COMMIT"):
        return os.environ["LAYA_GIT_COMMIT"]
    if STAMP.is_file():  # building the wheel from an unpacked sdist
        return runpy.run_path(str(STAMP))["COMMIT"]
    return runpy.run_path("laya_common/version.py")["git_commit"]()  # by path: the project is not importable here


def write_stamp(root: Path) -> None:
    (root / STAMP).write_text(f'"""Written by setup.py when this package was built."""\n\nCOMMIT = {commit()!r}\n')


class BuildPyWithCommit(build_py):
    def run(self) -> None:
        super().run()
        write_stamp(Path(self.build_lib))


class SdistWithCommit(sdist):
    def make_release_tree(self, base_dir: str, files: list[str]) -> None:
        super().make_release_tree(base_dir, files)
        write_stamp(Path(base_dir))


setup(cmdclass={"build_py": BuildPyWithCommit, "sdist": SdistWithCommit})
