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
from ._signing import (
    ED25519_SIGNATURE_SIZE,
    Ed25519phSigner,
    Ed25519phVerifier,
    Ed25519PrivateKey,
    Ed25519PublicKey,
    ed25519_verify,
)

__all__ = [
    "AES128GCM",
    "AES256GCM",
    "ED25519_SIGNATURE_SIZE",
    "SUITES",
    "Aead",
    "AesGcm",
    "ChaCha20Poly1305Suite",
    "Ed25519PrivateKey",
    "Ed25519PublicKey",
    "Ed25519phSigner",
    "Ed25519phVerifier",
    "XChaCha20Poly1305",
    "aead_suite",
    "ed25519_verify",
    "hchacha20",
]
