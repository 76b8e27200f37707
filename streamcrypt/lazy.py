"""Layer 0: a package's names, imported from its private modules on first use (PEP 562).

``streamcrypt.keys``, ``streamcrypt.primitives`` and ``streamcrypt.engine`` re-export
names from private modules, some of which pull in costly imports (the password KDFs,
anyio, thread pools); a program that uses one name should not pay for the others (the
``streamcrypt`` command's start-up, docs/CLI.md). Such a package lists its names by module
once, in a table given to :func:`lazy_exports`, and keeps the plain imports under
``if TYPE_CHECKING:`` for type checkers.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Mapping

TYPE_CHECKING = False  # ``typing.TYPE_CHECKING`` without importing typing (start-up)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, table: Mapping[str, Iterable[str]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of module ``package``: each name listed under a
    module of ``table`` (relative to ``package``, as ``"._secret"``) is imported from it
    when first read, then kept in the package's namespace (later reads cost nothing).
    ``dir()`` lists every name. Reading a name not in ``table`` raises
    :class:`AttributeError`, so ``from package import submodule`` still imports it."""
    namespace = sys.modules[package].__dict__
    home = {name: module for module, names in table.items() for name in names}

    def __getattr__(name: str) -> Any:
        try:
            module = home[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        value = getattr(importlib.import_module(module, package), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *home})

    return __getattr__, __dir__
