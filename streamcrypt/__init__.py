"""streamcrypt: composable async streaming encryption.

The few names people remember live here; everything else is in the layered
subpackages (``errors``, ``keys``, ``primitives``, ``codecs``, ``engine``, ``transports``).
"""

from __future__ import annotations

from . import errors
from .keys import KeyRing, SecretKey

__all__ = ["KeyRing", "SecretKey", "errors"]
__version__ = "0.1.0"
