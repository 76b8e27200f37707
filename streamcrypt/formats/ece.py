"""RFC 8188 ``aes128gcm`` bodies as async streams; the codec is :mod:`streamcrypt.codecs.ece`."""

from __future__ import annotations

from ..codecs import FormatOptions
from ..codecs.ece import (
    DEFAULT_MAX_RECORD_SIZE,
    DEFAULT_SEGMENT_SIZE,
    FORMAT,
    EceKey,
    EceKeySource,
    encrypted_length,
)
from ..engine import DEFAULT_POLICY, OffloadPolicy
from ..keys import KeyRing
from . import run as _run

__all__ = ["decrypt", "decrypt_bytes", "encrypt", "encrypt_bytes", "encrypted_length"]


def _writing(
    name: str,
    key: EceKey | KeyRing,
    *,
    salt: bytes | None = None,
    segment_size: int = DEFAULT_SEGMENT_SIZE,
    keyid: bytes | str = b"",
    padding: int = 0,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> _run.Call:
    """Arguments as :class:`~streamcrypt.codecs.EceEncryptor`; ``segment_size`` is the
    plaintext bytes of a full record, the RFC's record size ``rs`` less
    :data:`~streamcrypt.codecs.ece.OVERHEAD` (17)."""
    extra: dict[str, object] = {"salt": salt, "keyid": keyid, "padding": padding}
    return _run.Call(FormatOptions(key=key, segment_size=segment_size, extra=extra), policy)


def _reading(
    name: str,
    key: EceKeySource,
    *,
    max_record_size: int = DEFAULT_MAX_RECORD_SIZE,
    allow_no_records: bool = False,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> _run.Call:
    """Arguments as :class:`~streamcrypt.codecs.EceDecryptor`."""
    extra = {"max_record_size": max_record_size, "allow_no_records": allow_no_records}
    return _run.Call(FormatOptions(key=key, extra=extra), policy)


encrypt = _run.streaming(
    FORMAT,
    _writing,
    "encrypt",
    "Encrypt an async source into an ``aes128gcm`` body (arguments as\n"
    ":class:`~streamcrypt.codecs.EceEncryptor`; ``segment_size`` is the plaintext bytes\n"
    "of a full record, ``rs`` less 17).",
)
decrypt = _run.streaming(
    FORMAT, _reading, "decrypt", "Decrypt an ``aes128gcm`` body, yielding only verified records."
)
encrypt_bytes = _run.one_shot(
    FORMAT,
    _writing,
    "encrypt_bytes",
    "Encrypt a whole body into the ``aes128gcm`` coding, records sealed on all cores\n"
    "(arguments as :func:`encrypt`).",
)
decrypt_bytes = _run.one_shot(
    FORMAT,
    _reading,
    "decrypt_bytes",
    "Decrypt a whole ``aes128gcm`` body, records opened on all cores; all or nothing.",
)
