"""Layer 0 plumbing: a package's names, imported from its modules on first use (PEP 562).

``streamcrypt.keys``, ``streamcrypt.primitives`` and ``streamcrypt.engine`` re-export
names from private modules, some of which pull in costly imports (the password KDFs,
anyio, thread pools); a program that uses one name should not pay for the others (the
``streamcrypt`` command's start-up, docs/CLI.md). Such a package lists its names by module
once, in a table given to :func:`lazy_exports` (``keys`` and ``primitives`` read their
``__all__`` from it), and imports each name as itself (``import x as x``, an explicit
re-export) under ``if TYPE_CHECKING:`` for type checkers; tests/test_public_api.py holds
the two to agree. A private module need not list its names again.

:func:`import_extra` imports an optional dependency where it is first needed, its
``ImportError`` naming the extra that installs it.

A :class:`LazyModule` does the same for one module a package uses in a few places (the
command's format modules, ``concurrent.futures`` for the engine's annotations): it stands
where ``import x`` would, under the ``else:`` of ``if TYPE_CHECKING:``, and imports the
module when an attribute is first read, so ``typing.get_type_hints`` resolves annotations
that name it without the import costing every program its start-up.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Mapping
from types import ModuleType


def lazy_exports(
    package: str, table: Mapping[str, Iterable[str]], submodules: Iterable[str] = ()
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of module ``package``: each name listed under a
    module of ``table`` (relative to ``package``, as ``"._secret"``; ``"open=open_file"``
    exports the module's ``open_file`` as ``open``) is imported from it when first read,
    then kept in the package's namespace (later reads cost nothing); each of
    ``submodules`` is imported when read as an attribute. ``dir()`` lists what a user
    reads: ``__all__`` (else every name), the lazy names and the dunders.
    Reading another name raises :class:`AttributeError`, so
    ``from package import submodule`` still imports it."""
    namespace = sys.modules[package].__dict__
    home: dict[str, tuple[str, str]] = {}
    for module, names in table.items():
        for entry in names:
            name, _, attribute = entry.partition("=")
            home[name] = (module, attribute or name)
    for name in submodules:
        home[name] = (f".{name}", "")

    def __getattr__(name: str) -> object:
        try:
            module, attribute = home[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        imported = importlib.import_module(module, package)
        value = getattr(imported, attribute) if attribute else imported
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        public = namespace.get("__all__", namespace)
        return sorted({*public, *home, *(n for n in namespace if n.startswith("__"))})

    return __getattr__, __dir__


def import_extra(module: str, needs: str, extra: str) -> ModuleType:
    """Module ``module`` of an optional dependency, imported where it is first needed;
    without it, :class:`ImportError` saying what ``needs`` it and the extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ImportError(f"{needs}: pip install 'streamcrypt[{extra}]'") from None


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
