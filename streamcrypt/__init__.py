"""streamcrypt: composable async streaming encryption.

The few names people remember live here; everything else is in the layered
subpackages (``errors``, ``keys``, ``primitives``, ``codecs``, ``engine``, ``transports``).
"""

from __future__ import annotations

from . import errors
from ._api import decrypt, decrypt_bytes, encrypt, encrypt_bytes
from .engine import OffloadPolicy, Pipeline, pipeline
from .keys import KeyRing, SecretKey

__all__ = [
    "KeyRing",
    "OffloadPolicy",
    "Pipeline",
    "SecretKey",
    "decrypt",
    "decrypt_bytes",
    "encrypt",
    "encrypt_bytes",
    "errors",
    "pipeline",
]
__version__ = "0.1.0"
