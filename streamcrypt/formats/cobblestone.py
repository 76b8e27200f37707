"""C2SP chunked encryption (Cobblestone) as async streams; codec: :mod:`streamcrypt.codecs.cobblestone`."""

from __future__ import annotations

from collections.abc import AsyncIterator

from ..abc import Buffer
from ..codecs import FormatOptions
from ..codecs.cobblestone import FORMAT, Variant
from ..deprecation import renamed_keyword
from ..engine import DEFAULT_POLICY, OffloadPolicy, Source
from ..keys import SecretKey
from . import run as _run

__all__ = ["decrypt", "decrypt_bytes", "encrypt", "encrypt_bytes"]


def _options(
    where: str,
    key: Buffer | SecretKey,
    aad: Buffer,
    variant: Variant | None,
    context: Buffer | None,
) -> FormatOptions:
    """The options (``context``: the deprecated name of ``aad``)."""
    aad = renamed_keyword(
        f"formats.cobblestone.{where}", "context", "aad", context, aad, b"", stacklevel=5
    )
    return FormatOptions(key=key, aad=aad, extra={"variant": variant})


def encrypt(
    source: Source,
    key: Buffer | SecretKey,
    *,
    aad: Buffer = b"",
    variant: Variant | None = None,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
    context: Buffer | None = None,
) -> AsyncIterator[bytes]:
    """Encrypt an async source into C2SP chunked encryption, chunks sealed in parallel.

    ``aad`` is the spec's context (``context=`` is its deprecated name).
    """
    options = _options("encrypt", key, aad, variant, context)
    return _run.encrypt(FORMAT, source, options, policy)


def decrypt(
    source: Source,
    key: Buffer | SecretKey,
    *,
    aad: Buffer = b"",
    variant: Variant | None = None,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
    context: Buffer | None = None,
) -> AsyncIterator[bytes]:
    """Decrypt C2SP chunked encryption, yielding only verified chunks."""
    options = _options("decrypt", key, aad, variant, context)
    return _run.decrypt(FORMAT, source, options, policy)


def encrypt_bytes(
    plaintext: Buffer,
    key: Buffer | SecretKey,
    *,
    aad: Buffer = b"",
    variant: Variant | None = None,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
    context: Buffer | None = None,
) -> bytes:
    """Encrypt a whole message (random salt), chunks sealed on all cores."""
    options = _options("encrypt_bytes", key, aad, variant, context)
    return _run.encrypt_bytes(FORMAT, plaintext, options, policy)


def decrypt_bytes(
    ciphertext: Buffer,
    key: Buffer | SecretKey,
    *,
    aad: Buffer = b"",
    variant: Variant | None = None,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
    context: Buffer | None = None,
) -> bytes:
    """Decrypt a whole message, chunks opened on all cores; all or nothing."""
    options = _options("decrypt_bytes", key, aad, variant, context)
    return _run.decrypt_bytes(FORMAT, ciphertext, options, policy)
