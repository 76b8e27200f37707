"""Modules the command imports on first use (start-up).

``encrypt``/``decrypt`` know the format only once the keys are read or the input's first
bytes are seen; importing every format up front cost the command tens of milliseconds
on each run. A :class:`LazyModule` stands where ``from ..codecs import aws as _aws``
stood and imports the module when an attribute is first read.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["LazyModule"]


class LazyModule:
    """A module, imported when one of its attributes is first read, together with the
    modules ``also`` names (its submodules read as attributes, as ``anyio.to_thread``)."""

    __slots__ = ("_also", "_module", "_name")

    def __init__(self, name: str, *also: str) -> None:
        self._name = name
        self._also = also
        self._module: ModuleType | None = None

    def __getattr__(self, attr: str) -> object:
        module = self._module
        if module is None:
            for name in self._also:
                importlib.import_module(name)
            module = self._module = importlib.import_module(self._name)
        return getattr(module, attr)

    def __repr__(self) -> str:
        return f"<lazy module {self._name!r}>"
