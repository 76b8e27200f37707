"""libsodium secretstream as async streams; the codec is :mod:`streamcrypt.codecs.secretstream`.

secretstream ratchets its state message by message, so it runs sequentially (large
pieces still leave the event loop, one at a time).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from ..abc import Buffer
from ..codecs import FormatOptions
from ..codecs.secretstream import DEFAULT_CHUNK_SIZE, FORMAT
from ..deprecation import renamed_keyword
from ..engine import DEFAULT_POLICY, OffloadPolicy, Source
from ..keys import SecretKey
from . import run as _run

__all__ = ["decrypt", "encrypt"]


def _options(
    where: str, key: Buffer | SecretKey, segment_size: int, aad: Buffer, chunk_size: int | None
) -> FormatOptions:
    """The options (``chunk_size``: the deprecated name of ``segment_size``)."""
    size = renamed_keyword(
        f"formats.secretstream.{where}",
        "chunk_size",
        "segment_size",
        chunk_size,
        segment_size,
        DEFAULT_CHUNK_SIZE,
        stacklevel=5,
    )
    return FormatOptions(key=key, segment_size=size, aad=aad)


def encrypt(
    source: Source,
    key: Buffer | SecretKey,
    *,
    segment_size: int = DEFAULT_CHUNK_SIZE,
    aad: Buffer = b"",
    policy: OffloadPolicy | None = DEFAULT_POLICY,
    chunk_size: int | None = None,
) -> AsyncIterator[bytes]:
    """Encrypt an async source as a secretstream of fixed-size messages."""
    options = _options("encrypt", key, segment_size, aad, chunk_size)
    return _run.encrypt(FORMAT, source, options, policy)


def decrypt(
    source: Source,
    key: Buffer | SecretKey,
    *,
    segment_size: int = DEFAULT_CHUNK_SIZE,
    aad: Buffer = b"",
    policy: OffloadPolicy | None = DEFAULT_POLICY,
    chunk_size: int | None = None,
) -> AsyncIterator[bytes]:
    """Decrypt a secretstream; raises TruncatedStreamError if FINAL never came."""
    options = _options("decrypt", key, segment_size, aad, chunk_size)
    return _run.decrypt(FORMAT, source, options, policy)
