"""What the recipes' executors that wrap another share (recipe.faulty_executor, recipe.paced_executor): the
executor "auto" picks here, and everything but its passes handed to it."""

from __future__ import annotations

import os

from laya_common.settings import Setting, read
from worker.engine.batch import Executor


class WrappedExecutor(Executor):
    """Names, limits, warmup and kernels of `inner`; a subclass changes how passes run, and takes SETTINGS (read
    from the environment by `factory`) as keyword arguments, but for "inner": the executor it wraps, by a name
    LAYA_EXECUTOR takes (default auto)."""

    SETTINGS: dict[str, Setting] = {}

    @classmethod
    def factory(cls):
        """The factory a LAYA_EXECUTOR=MODULE:FACTORY name points at (worker.engine.executors.make_executor): this
        class around the executor its "inner" setting names (or `auto` picks), with its SETTINGS."""

        def make(cfg, weights: dict, *, checkpoint, options) -> Executor:
            from worker.engine.executors import make_executor

            settings = read(cls.SETTINGS, os.environ)
            inner, _ = make_executor(
                settings.pop("inner", "auto"), cfg, weights, checkpoint=checkpoint, options=options
            )
            return cls(inner, **settings)

        return make

    def __init__(self, inner: Executor) -> None:
        self.inner, self.name = inner, inner.name

    def describe(self) -> dict:
        return self.inner.describe()

    def warmup(self, *, every_bucket: bool = False) -> None:
        self.inner.warmup(every_bucket=every_bucket)

    def mapping(self) -> dict[str, dict[str, str]]:
        return self.inner.mapping()

    @property
    def admits(self):
        return self.inner.admits
