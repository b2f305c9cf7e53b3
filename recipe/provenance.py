"""What every recipe output records about where it ran: Python, platform, package versions, git commit."""

from __future__ import annotations

import platform
import subprocess
from importlib import metadata
from pathlib import Path


def versions(packages: tuple[str, ...]) -> dict[str, str]:
    found = {"python": platform.python_version(), "platform": platform.platform(), "commit": git_commit()}
    for package in packages:
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = "not installed"
    return found


def git_commit() -> str:
    """The checkout's commit, with '+dirty' when files differ from it; 'unknown' outside a checkout."""
    root = Path(__file__).resolve().parent.parent
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                                check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit + ("+dirty" if dirty else "")
