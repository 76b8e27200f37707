"""streamcrypt: composable async streaming encryption.

The few names people remember live here; everything else is in the layered
subpackages (``errors``, ``keys``, ``primitives``, ``codecs``, ``engine``, ``transports``).

The names load on first use (PEP 562 ``__getattr__``), so ``import streamcrypt`` and the
``streamcrypt`` command start without importing every format; ``__all__`` and ``dir()``
list them all, and ``from streamcrypt import *`` loads them.
"""

from __future__ import annotations

from . import errors
from ._lazy import lazy_exports

#: ``typing.TYPE_CHECKING`` without importing ``typing`` (~8 ms of the command's start-up);
#: mypy and ruff treat the name as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._api import decrypt as decrypt
    from ._api import decrypt_bytes as decrypt_bytes
    from ._api import encrypt as encrypt
    from ._api import encrypt_bytes as encrypt_bytes
    from ._rekey import rekey as rekey
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
del TYPE_CHECKING  # out of dir(streamcrypt)

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
    "rekey",
    "serve",
]
__version__ = "0.1.0"

# Where each name is defined: imported from there on first use; the subpackages
# ``import streamcrypt`` used to import eagerly are imported when read as attributes.
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "._api": ("decrypt", "decrypt_bytes", "encrypt", "encrypt_bytes"),
        "._rekey": ("rekey",),
        ".engine": ("OffloadPolicy", "Pipeline", "pipeline"),
        ".keys": ("KeyRing", "SecretKey"),
        ".transports": ("EncryptedFile", "EncryptedStream", "connect", "serve", "open=open_file"),
    },
    ("abc", "codecs", "engine", "keys", "primitives", "transports"),
)
