"""Layer 0: key objects, key rings, key derivation and small byte utilities."""

from __future__ import annotations

from ._kdf import HashName, hkdf, hkdf_expand, hkdf_extract
from ._keyring import KeyRing
from ._secret import SecretKey, as_secret_key, constant_time_equal, random_bytes, wipe

__all__ = [
    "HashName",
    "KeyRing",
    "SecretKey",
    "as_secret_key",
    "constant_time_equal",
    "hkdf",
    "hkdf_expand",
    "hkdf_extract",
    "random_bytes",
    "wipe",
]
