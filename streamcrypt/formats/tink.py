"""Tink streaming AEAD as async streams; the codec is :mod:`streamcrypt.codecs.tink`."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from ..abc import Buffer
from ..codecs import FormatOptions
from ..codecs.tink import FORMAT, TinkKeyLike, TinkStreamingKey
from ..engine import DEFAULT_POLICY, OffloadPolicy, Source
from . import run as _run

__all__ = ["decrypt", "decrypt_bytes", "encrypt", "encrypt_bytes"]


def encrypt(
    source: Source,
    key: TinkKeyLike,
    *,
    aad: Buffer = b"",
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> AsyncIterator[bytes]:
    """Encrypt an async source with a Tink streaming key (a keyset's primary key)."""
    return _run.encrypt(FORMAT, source, FormatOptions(key=key, aad=aad), policy)


def decrypt(
    source: Source,
    key: TinkKeyLike | Sequence[TinkStreamingKey],
    *,
    aad: Buffer = b"",
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> AsyncIterator[bytes]:
    """Decrypt a Tink streaming ciphertext, yielding only verified segments."""
    return _run.decrypt(FORMAT, source, FormatOptions(key=key, aad=aad), policy)


def encrypt_bytes(
    plaintext: Buffer,
    key: TinkKeyLike,
    *,
    aad: Buffer = b"",
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> bytes:
    """Encrypt ``plaintext`` into one Tink streaming ciphertext, segments on all cores."""
    return _run.encrypt_bytes(FORMAT, plaintext, FormatOptions(key=key, aad=aad), policy)


def decrypt_bytes(
    ciphertext: Buffer,
    key: TinkKeyLike | Sequence[TinkStreamingKey],
    *,
    aad: Buffer = b"",
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> bytes:
    """Decrypt a whole Tink streaming ciphertext, segments on all cores; all or nothing."""
    return _run.decrypt_bytes(FORMAT, ciphertext, FormatOptions(key=key, aad=aad), policy)
