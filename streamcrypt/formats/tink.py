"""Tink streaming AEAD as async streams; the codec is :mod:`streamcrypt.codecs.tink`."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from ..abc import Buffer
from ..codecs.tink import (
    TinkKeyLike,
    TinkStreamDecryptor,
    TinkStreamEncryptor,
    TinkStreamingKey,
)
from ..engine import DEFAULT_POLICY, OffloadPolicy, Source, run_segmented
from ._run import stream

__all__ = ["decrypt", "decrypt_bytes", "encrypt", "encrypt_bytes"]


def encrypt(
    source: Source,
    key: TinkKeyLike,
    *,
    aad: Buffer = b"",
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> AsyncIterator[bytes]:
    """Encrypt an async source with a Tink streaming key (a keyset's primary key)."""
    return stream(source, TinkStreamEncryptor(key, aad=aad), policy=policy)


def decrypt(
    source: Source,
    key: TinkKeyLike | Sequence[TinkStreamingKey],
    *,
    aad: Buffer = b"",
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> AsyncIterator[bytes]:
    """Decrypt a Tink streaming ciphertext, yielding only verified segments."""
    return stream(source, TinkStreamDecryptor(key, aad=aad), policy=policy)


def encrypt_bytes(
    plaintext: Buffer,
    key: TinkKeyLike,
    *,
    aad: Buffer = b"",
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> bytes:
    """Encrypt ``plaintext`` into one Tink streaming ciphertext, segments on all cores."""
    return run_segmented(TinkStreamEncryptor(key, aad=aad), plaintext, policy)


def decrypt_bytes(
    ciphertext: Buffer,
    key: TinkKeyLike | Sequence[TinkStreamingKey],
    *,
    aad: Buffer = b"",
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> bytes:
    """Decrypt a whole Tink streaming ciphertext, segments on all cores; all or nothing."""
    return run_segmented(TinkStreamDecryptor(key, aad=aad), ciphertext, policy)
