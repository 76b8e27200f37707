"""Deprecated: ECIES moved to :mod:`streamcrypt.codecs.ecies`.

``import streamcrypt.ecies`` and ``from streamcrypt import ecies`` keep working for one
release with a :class:`DeprecationWarning`; every name is the one in
:mod:`streamcrypt.codecs.ecies`.
"""

from __future__ import annotations

from .codecs.ecies import (
    CONFIGS,
    Cipher,
    Curve,
    EciesConfig,
    NonceLength,
    PrivateKeyInput,
    PublicKeyInput,
    decapsulate,
    decrypt,
    ecdh,
    encapsulate,
    encrypt,
    generate_keypair,
    public_key,
    shared_point,
)
from .deprecation import warn_renamed

__all__ = [
    "CONFIGS",
    "Cipher",
    "Curve",
    "EciesConfig",
    "NonceLength",
    "PrivateKeyInput",
    "PublicKeyInput",
    "decapsulate",
    "decrypt",
    "ecdh",
    "encapsulate",
    "encrypt",
    "generate_keypair",
    "public_key",
    "shared_point",
]

warn_renamed("streamcrypt.ecies", "streamcrypt.codecs.ecies")
