"""The high-level names: encrypt/decrypt bytes and async streams in the native container."""

from __future__ import annotations

from collections.abc import AsyncIterator

from .abc import Buffer
from .codecs.container import DEFAULT_SEGMENT_SIZE, KeyLike, StreamDecryptor, StreamEncryptor
from .engine import DEFAULT_POLICY, OffloadPolicy, Source, pipeline, run_segmented

__all__ = ["decrypt", "decrypt_bytes", "encrypt", "encrypt_bytes", "run_segmented"]


def encrypt_bytes(
    plaintext: Buffer,
    key: KeyLike,
    *,
    suite: str = "aes-256-gcm",
    segment_size: int = DEFAULT_SEGMENT_SIZE,
    aad: Buffer = b"",
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> bytes:
    """Encrypt ``plaintext`` into a native container (see docs/FORMAT.md)."""
    enc = StreamEncryptor(key, suite=suite, segment_size=segment_size, aad=aad)
    return run_segmented(enc, plaintext, policy)


def decrypt_bytes(
    ciphertext: Buffer,
    key: KeyLike,
    *,
    aad: Buffer = b"",
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> bytes:
    """Decrypt a whole native container. Raises AuthenticationError, TruncatedStreamError,
    FormatError, UnsupportedFormatError or UnknownKeyError; returns nothing on failure."""
    return run_segmented(StreamDecryptor(key, aad=aad), ciphertext, policy)


def encrypt(
    source: Source,
    key: KeyLike,
    *,
    suite: str = "aes-256-gcm",
    segment_size: int = DEFAULT_SEGMENT_SIZE,
    aad: Buffer = b"",
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> AsyncIterator[bytes]:
    """Encrypt an async source (iterable of bytes, anyio byte stream) as it streams.

    Key and parameter errors are raised here, at the call; the result is an async
    iterator of ciphertext chunks.
    """
    enc = StreamEncryptor(key, suite=suite, segment_size=segment_size, aad=aad)
    return pipeline(enc, policy=policy).stream(source)


def decrypt(
    source: Source,
    key: KeyLike,
    *,
    aad: Buffer = b"",
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> AsyncIterator[bytes]:
    """Decrypt an async source of container bytes, yielding only verified plaintext.

    Raises (while iterating) AuthenticationError, TruncatedStreamError, FormatError,
    UnsupportedFormatError, UnknownKeyError.
    """
    return pipeline(StreamDecryptor(key, aad=aad), policy=policy).stream(source)
