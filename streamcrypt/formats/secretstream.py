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
    size = renamed_keyword(
        "formats.secretstream.encrypt",
        "chunk_size",
        "segment_size",
        chunk_size,
        segment_size,
        DEFAULT_CHUNK_SIZE,
    )
    options = FormatOptions(key=key, segment_size=size, aad=aad)
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
    size = renamed_keyword(
        "formats.secretstream.decrypt",
        "chunk_size",
        "segment_size",
        chunk_size,
        segment_size,
        DEFAULT_CHUNK_SIZE,
    )
    options = FormatOptions(key=key, segment_size=size, aad=aad)
    return _run.decrypt(FORMAT, source, options, policy)
