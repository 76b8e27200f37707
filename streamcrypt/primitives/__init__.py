"""Layer 1: sans-I/O transforms and one-shot suites over native kernels."""

from __future__ import annotations

from ._aead import (
    AES128GCM,
    AES256GCM,
    SUITES,
    Aead,
    AesGcm,
    ChaCha20Poly1305Suite,
    XChaCha20Poly1305,
    aead_suite,
)
from ._hchacha import hchacha20

__all__ = [
    "AES128GCM",
    "AES256GCM",
    "SUITES",
    "Aead",
    "AesGcm",
    "ChaCha20Poly1305Suite",
    "XChaCha20Poly1305",
    "aead_suite",
    "hchacha20",
]
