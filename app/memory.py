"""Giving the memory of a large request back to the operating system once it has been answered.

A maximal batch (64 MB of JSON) is parsed into many small objects; once they are freed, glibc keeps their pages
in its heap for the next allocation, so the API process stayed about 60 MB larger after one such request (and
423 MB when a batch was still copied whole several times over). glibc's malloc_trim(0) returns every free page
of its heaps at once; where the C library has none (not glibc), this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools


def give_back() -> None:
    """Return the free pages of the C heap to the operating system (a few milliseconds after a large request)."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim():
    name = ctypes.util.find_library("c")
    return getattr(ctypes.CDLL(name), "malloc_trim", None) if name else None
