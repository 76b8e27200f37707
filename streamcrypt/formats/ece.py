"""RFC 8188 ``aes128gcm`` bodies as async streams; the codec is :mod:`streamcrypt.codecs.ece`."""

from __future__ import annotations

from collections.abc import AsyncIterator

from ..abc import Buffer
from ..codecs import FormatOptions
from ..codecs.ece import (
    DEFAULT_MAX_RECORD_SIZE,
    DEFAULT_SEGMENT_SIZE,
    FORMAT,
    OVERHEAD,
    EceKey,
    EceKeySource,
    encrypted_length,
)
from ..deprecation import warn_renamed
from ..engine import DEFAULT_POLICY, OffloadPolicy, Source
from ..errors import InvalidParameterError
from ..keys import KeyRing
from . import run as _run

__all__ = ["decrypt", "decrypt_bytes", "encrypt", "encrypt_bytes", "encrypted_length"]


def _writing(
    where: str,
    key: EceKey | KeyRing,
    salt: bytes | None,
    segment_size: int,
    record_size: int | None,
    keyid: bytes | str,
    padding: int,
) -> FormatOptions:
    extra: dict[str, object] = {"salt": salt, "keyid": keyid, "padding": padding}
    if record_size is None:
        return FormatOptions(key=key, segment_size=segment_size, extra=extra)
    if segment_size != DEFAULT_SEGMENT_SIZE:
        raise InvalidParameterError(
            f"formats.ece.{where}: give segment_size= only (record_size= is segment_size + "
            f"{OVERHEAD}, its old form)"
        )
    warn_renamed(
        f"formats.ece.{where}: record_size=",
        f"segment_size= (plaintext bytes per record, record_size - {OVERHEAD})",
        stacklevel=4,
    )
    return FormatOptions(key=key, extra={**extra, "record_size": record_size})


def _reading(key: EceKeySource, max_record_size: int, allow_no_records: bool) -> FormatOptions:
    extra = {"max_record_size": max_record_size, "allow_no_records": allow_no_records}
    return FormatOptions(key=key, extra=extra)


def encrypt(
    source: Source,
    key: EceKey | KeyRing,
    *,
    salt: bytes | None = None,
    segment_size: int = DEFAULT_SEGMENT_SIZE,
    keyid: bytes | str = b"",
    padding: int = 0,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
    record_size: int | None = None,
) -> AsyncIterator[bytes]:
    """Encrypt an async source into an ``aes128gcm`` body (arguments as
    :class:`~streamcrypt.codecs.EceEncryptor`).

    ``segment_size`` is the plaintext bytes of a full record: the RFC's record size
    ``rs`` less :data:`~streamcrypt.codecs.ece.OVERHEAD` (17). ``record_size=`` (``rs``
    itself) is its deprecated form.
    """
    options = _writing("encrypt", key, salt, segment_size, record_size, keyid, padding)
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
    segment_size: int = DEFAULT_SEGMENT_SIZE,
    keyid: bytes | str = b"",
    padding: int = 0,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
    record_size: int | None = None,
) -> bytes:
    """Encrypt a whole body into the ``aes128gcm`` coding, records sealed on all cores
    (arguments as :func:`encrypt`)."""
    options = _writing("encrypt_bytes", key, salt, segment_size, record_size, keyid, padding)
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
