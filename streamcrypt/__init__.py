"""streamcrypt: composable async streaming encryption.

The few names people remember live here; everything else is in the layered
subpackages (``errors``, ``keys``, ``primitives``, ``codecs``, ``engine``, ``transports``).
"""

from __future__ import annotations

from . import errors
from ._api import decrypt, decrypt_bytes, encrypt, encrypt_bytes
from .engine import OffloadPolicy, Pipeline, pipeline
from .keys import KeyRing, SecretKey
from .transports import EncryptedFile, EncryptedStream, connect, serve
from .transports import open_file as _open_file

#: ``streamcrypt.open(path, "rb" | "wb", ...)``: the same function as
#: :func:`streamcrypt.transports.open_file`. Used qualified, it stays out of ``__all__``
#: so that ``from streamcrypt import *`` never replaces the builtin ``open``.
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
