"""RFC 8188 ``aes128gcm`` bodies as async streams; the codec is :mod:`streamcrypt.codecs.ece`."""

from __future__ import annotations

from collections.abc import AsyncIterator

from ..abc import Buffer
from ..codecs import FormatOptions
from ..codecs.ece import (
    DEFAULT_MAX_RECORD_SIZE,
    DEFAULT_RECORD_SIZE,
    FORMAT,
    EceKey,
    EceKeySource,
    encrypted_length,
)
from ..engine import DEFAULT_POLICY, OffloadPolicy, Source
from ..keys import KeyRing
from . import run as _run

__all__ = ["decrypt", "decrypt_bytes", "encrypt", "encrypt_bytes", "encrypted_length"]


def _writing(
    key: EceKey | KeyRing, salt: bytes | None, record_size: int, keyid: bytes | str, padding: int
) -> FormatOptions:
    extra = {"salt": salt, "record_size": record_size, "keyid": keyid, "padding": padding}
    return FormatOptions(key=key, extra=extra)


def _reading(key: EceKeySource, max_record_size: int, allow_no_records: bool) -> FormatOptions:
    extra = {"max_record_size": max_record_size, "allow_no_records": allow_no_records}
    return FormatOptions(key=key, extra=extra)


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
    """Encrypt an async source into an ``aes128gcm`` body (arguments as
    :class:`~streamcrypt.codecs.EceEncryptor`)."""
    options = _writing(key, salt, record_size, keyid, padding)
    return _run.encrypt(FORMAT, source, options, policy)


def decrypt(
    source: Source,
    key: EceKeySource,
    *,
    max_record_size: int = DEFAULT_MAX_RECORD_SIZE,
    allow_no_records: bool = False,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> AsyncIterator[bytes]:
    """Decrypt an ``aes128gcm`` body, yielding only verified records."""
    options = _reading(key, max_record_size, allow_no_records)
    return _run.decrypt(FORMAT, source, options, policy)


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
    options = _writing(key, salt, record_size, keyid, padding)
    return _run.encrypt_bytes(FORMAT, body, options, policy)


def decrypt_bytes(
    body: Buffer,
    key: EceKeySource,
    *,
    max_record_size: int = DEFAULT_MAX_RECORD_SIZE,
    allow_no_records: bool = False,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> bytes:
    """Decrypt a whole ``aes128gcm`` body, records opened on all cores; all or nothing."""
    options = _reading(key, max_record_size, allow_no_records)
    return _run.decrypt_bytes(FORMAT, body, options, policy)
