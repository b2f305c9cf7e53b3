"""What every recipe output records about where it ran: Python, platform, package versions, git commit."""

from __future__ import annotations

import platform
from importlib import metadata

from laya_common.version import git_commit


def versions(packages: tuple[str, ...]) -> dict[str, str]:
    """Python, the platform, the commit this code was built from, and each of `packages`' versions."""
    found = {"python": platform.python_version(), "platform": platform.platform(), "commit": git_commit()}
    for package in packages:
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = "not installed"
    return found
