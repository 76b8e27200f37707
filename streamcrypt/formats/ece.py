"""RFC 8188 ``aes128gcm`` bodies as async streams; the codec is :mod:`streamcrypt.codecs.ece`."""

from __future__ import annotations

from collections.abc import AsyncIterator

from ..abc import Buffer
from ..codecs.ece import (
    DEFAULT_MAX_RECORD_SIZE,
    DEFAULT_RECORD_SIZE,
    EceDecryptor,
    EceEncryptor,
    EceKey,
    EceKeySource,
    encrypted_length,
)
from ..engine import DEFAULT_POLICY, OffloadPolicy, Source, run_segmented
from ..keys import KeyRing
from ._run import stream

__all__ = ["decrypt", "decrypt_bytes", "encrypt", "encrypt_bytes", "encrypted_length"]


def encrypt(
    source: Source,
    key: EceKey | KeyRing,
    *,
    salt: bytes | None = None,
    record_size: int = DEFAULT_RECORD_SIZE,
    keyid: bytes | str = b"",
    padding: int = 0,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> AsyncIterator[bytes]:
    """Encrypt an async source into an ``aes128gcm`` body (arguments as :class:`EceEncryptor`)."""
    enc = EceEncryptor(key, salt=salt, record_size=record_size, keyid=keyid, padding=padding)
    return stream(source, enc, policy=policy)


def decrypt(
    source: Source,
    key: EceKeySource,
    *,
    max_record_size: int = DEFAULT_MAX_RECORD_SIZE,
    allow_no_records: bool = False,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> AsyncIterator[bytes]:
    """Decrypt an ``aes128gcm`` body, yielding only verified records."""
    dec = EceDecryptor(key, max_record_size=max_record_size, allow_no_records=allow_no_records)
    return stream(source, dec, policy=policy)


def encrypt_bytes(
    body: Buffer,
    key: EceKey | KeyRing,
    *,
    salt: bytes | None = None,
    record_size: int = DEFAULT_RECORD_SIZE,
    keyid: bytes | str = b"",
    padding: int = 0,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> bytes:
    """Encrypt a whole body into the ``aes128gcm`` coding, records sealed on all cores."""
    enc = EceEncryptor(key, salt=salt, record_size=record_size, keyid=keyid, padding=padding)
    return run_segmented(enc, body, policy)


def decrypt_bytes(
    body: Buffer,
    key: EceKeySource,
    *,
    max_record_size: int = DEFAULT_MAX_RECORD_SIZE,
    allow_no_records: bool = False,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> bytes:
    """Decrypt a whole ``aes128gcm`` body, records opened on all cores; all or nothing."""
    dec = EceDecryptor(key, max_record_size=max_record_size, allow_no_records=allow_no_records)
    return run_segmented(dec, body, policy)
