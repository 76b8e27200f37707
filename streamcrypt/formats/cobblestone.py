"""C2SP chunked encryption (Cobblestone) as async streams; codec: :mod:`streamcrypt.codecs.cobblestone`."""

from __future__ import annotations

from collections.abc import AsyncIterator

from ..abc import Buffer
from ..codecs.cobblestone import CobblestoneDecryptor, CobblestoneEncryptor, Variant
from ..engine import DEFAULT_POLICY, OffloadPolicy, Source, run_segmented
from ..keys import SecretKey
from ._run import stream

__all__ = ["decrypt", "decrypt_bytes", "encrypt", "encrypt_bytes"]


def encrypt(
    source: Source,
    key: Buffer | SecretKey,
    *,
    context: Buffer = b"",
    variant: Variant | None = None,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> AsyncIterator[bytes]:
    """Encrypt an async source into C2SP chunked encryption, chunks sealed in parallel."""
    return stream(
        source, CobblestoneEncryptor(key, context=context, variant=variant), policy=policy
    )


def decrypt(
    source: Source,
    key: Buffer | SecretKey,
    *,
    context: Buffer = b"",
    variant: Variant | None = None,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> AsyncIterator[bytes]:
    """Decrypt C2SP chunked encryption, yielding only verified chunks."""
    return stream(
        source, CobblestoneDecryptor(key, context=context, variant=variant), policy=policy
    )


def encrypt_bytes(
    plaintext: Buffer,
    key: Buffer | SecretKey,
    *,
    context: Buffer = b"",
    variant: Variant | None = None,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> bytes:
    """Encrypt a whole message (random salt), chunks sealed on all cores."""
    return run_segmented(
        CobblestoneEncryptor(key, context=context, variant=variant), plaintext, policy
    )


def decrypt_bytes(
    ciphertext: Buffer,
    key: Buffer | SecretKey,
    *,
    context: Buffer = b"",
    variant: Variant | None = None,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> bytes:
    """Decrypt a whole message, chunks opened on all cores; all or nothing."""
    dec = CobblestoneDecryptor(key, context=context, variant=variant)
    return run_segmented(dec, ciphertext, policy)
