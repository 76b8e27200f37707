"""streamcrypt: composable async streaming encryption.

The few names people remember live here; everything else is in the layered
subpackages (``errors``, ``keys``, ``primitives``, ``codecs``, ``engine``, ``transports``).

The names load on first use (PEP 562 ``__getattr__``), so ``import streamcrypt`` and the
``streamcrypt`` command start without importing every format; ``__all__`` and ``dir()``
list them all, and ``from streamcrypt import *`` loads them.
"""

from __future__ import annotations

import importlib

from . import errors

#: ``typing.TYPE_CHECKING`` without importing ``typing`` (~8 ms of the command's start-up);
#: mypy and ruff treat the name as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ._api import decrypt as decrypt
    from ._api import decrypt_bytes as decrypt_bytes
    from ._api import encrypt as encrypt
    from ._api import encrypt_bytes as encrypt_bytes
    from .engine import OffloadPolicy as OffloadPolicy
    from .engine import Pipeline as Pipeline
    from .engine import pipeline as pipeline
    from .keys import KeyRing as KeyRing
    from .keys import SecretKey as SecretKey
    from .transports import EncryptedFile as EncryptedFile
    from .transports import EncryptedStream as EncryptedStream
    from .transports import connect as connect
    from .transports import open_file as _open_file
    from .transports import serve as serve

    #: ``streamcrypt.open(path, "rb" | "wb", ...)``: the same function as
    #: :func:`streamcrypt.transports.open_file`. Used qualified, it stays out of
    #: ``__all__`` so that ``from streamcrypt import *`` never replaces the builtin ``open``.
    open = _open_file

__all__ = [
    "EncryptedFile",
    "EncryptedStream",
    "KeyRing",
    "OffloadPolicy",
    "Pipeline",
    "SecretKey",
    "connect",
    "decrypt",
    "decrypt_bytes",
    "encrypt",
    "encrypt_bytes",
    "errors",
    "pipeline",
    "serve",
]
__version__ = "0.1.0"

#: Each lazily loaded name: (module relative to this package, its name there).
_LAZY: dict[str, tuple[str, str]] = {
    "decrypt": ("._api", "decrypt"),
    "decrypt_bytes": ("._api", "decrypt_bytes"),
    "encrypt": ("._api", "encrypt"),
    "encrypt_bytes": ("._api", "encrypt_bytes"),
    "OffloadPolicy": (".engine", "OffloadPolicy"),
    "Pipeline": (".engine", "Pipeline"),
    "pipeline": (".engine", "pipeline"),
    "KeyRing": (".keys", "KeyRing"),
    "SecretKey": (".keys", "SecretKey"),
    "EncryptedFile": (".transports", "EncryptedFile"),
    "EncryptedStream": (".transports", "EncryptedStream"),
    "connect": (".transports", "connect"),
    "serve": (".transports", "serve"),
    "open": (".transports", "open_file"),
}


#: Subpackages ``import streamcrypt`` used to import eagerly, so ``streamcrypt.transports``
#: (and the others) still work after a bare ``import streamcrypt``: imported on access.
_SUBPACKAGES = frozenset({"abc", "codecs", "engine", "formats", "keys", "primitives", "transports"})


def __getattr__(name: str) -> Any:
    if name in _SUBPACKAGES:
        return importlib.import_module(f".{name}", __name__)
    try:
        module, attribute = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module, __name__), attribute)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
