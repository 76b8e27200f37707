"""libsodium secretstream as async streams; the codec is :mod:`streamcrypt.codecs.secretstream`.

secretstream ratchets its state message by message, so it runs sequentially (large
pieces still leave the event loop, one at a time).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from ..abc import Buffer
from ..codecs.secretstream import DEFAULT_CHUNK_SIZE, SecretStreamDecryptor, SecretStreamEncryptor
from ..engine import DEFAULT_POLICY, OffloadPolicy, Source
from ..keys import SecretKey
from ._run import stream

__all__ = ["decrypt", "encrypt"]


def encrypt(
    source: Source,
    key: Buffer | SecretKey,
    *,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    aad: Buffer = b"",
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> AsyncIterator[bytes]:
    """Encrypt an async source as a secretstream of fixed-size messages."""
    return stream(source, SecretStreamEncryptor(key, chunk_size=chunk_size, aad=aad), policy=policy)


def decrypt(
    source: Source,
    key: Buffer | SecretKey,
    *,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    aad: Buffer = b"",
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> AsyncIterator[bytes]:
    """Decrypt a secretstream; raises TruncatedStreamError if FINAL never came."""
    return stream(source, SecretStreamDecryptor(key, chunk_size=chunk_size, aad=aad), policy=policy)
