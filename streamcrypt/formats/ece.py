"""RFC 8188 ``aes128gcm`` bodies as async streams; the codec is :mod:`streamcrypt.codecs.ece`."""

from __future__ import annotations

from collections.abc import AsyncIterator

from ..codecs.ece import (
    DEFAULT_MAX_RECORD_SIZE,
    DEFAULT_RECORD_SIZE,
    EceDecryptor,
    EceEncryptor,
    EceKey,
    EceKeySource,
    decrypt_bytes,
    encrypt_bytes,
    encrypted_length,
)
from ..engine import DEFAULT_POLICY, OffloadPolicy, Source
from ..keys import KeyRing
from ._run import stream

__all__ = ["decrypt", "decrypt_bytes", "encrypt", "encrypt_bytes", "encrypted_length"]


def encrypt(
    source: Source,
    key: EceKey | KeyRing,
    *,
    record_size: int = DEFAULT_RECORD_SIZE,
    keyid: bytes | str = b"",
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> AsyncIterator[bytes]:
    """Encrypt an async source into an ``aes128gcm`` body."""
    return stream(source, EceEncryptor(key, record_size=record_size, keyid=keyid), policy=policy)


def decrypt(
    source: Source,
    key: EceKeySource,
    *,
    max_record_size: int = DEFAULT_MAX_RECORD_SIZE,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> AsyncIterator[bytes]:
    """Decrypt an ``aes128gcm`` body, yielding only verified records."""
    return stream(source, EceDecryptor(key, max_record_size=max_record_size), policy=policy)
