"""The package version and the git commit it was built from: every command's --version, worker records, recipes.

Standard library only, so the API can report it too. A built package (sdist or wheel) carries its commit in
`laya_common/_commit.py`, written by setup.py when it is built; a source checkout (an editable install,
PYTHONPATH=.) asks git.
"""

from __future__ import annotations

import argparse
import functools
import subprocess
from importlib import metadata
from pathlib import Path

PACKAGE = "laya-service"
CHECKOUT = Path(__file__).resolve().parent.parent


def package_version() -> str:
    try:
        return metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


def git_commit() -> str:
    """The commit this code was built from; in a checkout, with '+dirty' when tracked files differ from it."""
    try:
        from laya_common._commit import COMMIT
    except ImportError:
        pass
    else:
        return COMMIT
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=CHECKOUT, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=CHECKOUT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit + ("+dirty" if dirty else "")


@functools.cache  # a process runs the code it started with
def version_info() -> dict[str, str]:
    return {"version": package_version(), "commit": git_commit()}


class _PrintVersion(argparse.Action):
    """--version, worked out only when asked for (git is not run at every start)."""

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        print(f"{parser.prog} {package_version()} (commit {git_commit()})")
        parser.exit()


def add_version_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--version", action=_PrintVersion, nargs=0, help="print the version and git commit, and exit")
