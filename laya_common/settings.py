"""LAYA_* settings for every command: one table of `Setting`s per command, read from the environment by one loader.

A value is converted to its default's type (booleans as 1/0, true/false, yes/no), checked against its
choices, and a bad one is a `SettingsError` naming the variable, which each command prints as one line
before it exits with status 2. `help_text` writes the table for `--help`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

_BOOLEANS = {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False}
T = TypeVar("T")


class SettingsError(ValueError):
    """A LAYA_* variable holds a value its setting does not take; the message names the variable."""


@dataclass(frozen=True)
class Setting:
    var: str  # the environment variable
    default: object
    meaning: str
    choices: tuple[str, ...] = ()

    def parse(self, raw: str) -> object:
        kind = type(self.default)
        try:
            if kind is bool:
                value: object = _BOOLEANS[raw.strip().lower()]
            else:
                value = kind(raw)
        except (KeyError, ValueError):
            expected = {bool: "1 or 0", int: "an integer", float: "a number"}.get(kind, f"a {kind.__name__}")
            raise SettingsError(f"{self.var}={raw!r} is not {expected}") from None
        if self.choices and value not in self.choices:
            raise SettingsError(f"{self.var}={raw!r}; use {', '.join(self.choices)}")
        return value


def read(table: Mapping[str, Setting], environ: Mapping[str, str], *, overrides_only: bool = False) -> dict:
    """Each key's value: from the environment where set (and not empty), else its default (unless
    `overrides_only`). :raise SettingsError: for the first value its setting does not take."""
    values = {}
    for key, setting in table.items():
        raw = environ.get(setting.var, "")
        if raw != "":
            values[key] = setting.parse(raw)
        elif not overrides_only:
            values[key] = setting.default
    return values


def help_text(table: Mapping[str, Setting]) -> str:
    width = max(len(s.var) for s in table.values()) + 2
    return "environment:\n" + "\n".join(
        f"  {s.var:{width}} {s.meaning} (default: {s.default!r})" for s in table.values()
    )


def or_exit(prog: str, load: Callable[[], T]) -> T:
    """`load()`, or one line on stderr naming the bad variable and exit status 2."""
    try:
        return load()
    except SettingsError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        raise SystemExit(2) from None
