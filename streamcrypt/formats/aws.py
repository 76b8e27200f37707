"""The AWS Encryption SDK message format as async streams; codec: :mod:`streamcrypt.codecs.aws`.

Frames are sealed and opened in parallel on the engine. For signed suites the encryptor's
signer hashes the output in order on its own stage (off the event loop for large pieces);
the decryptor hashes its input in order as it parses it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping

from ..codecs.aws import (
    DEFAULT_FRAME_LENGTH,
    DEFAULT_MAX_ENCRYPTED_DATA_KEYS,
    DEFAULT_SUITE,
    AwsDecryptor,
    AwsEncryptor,
    KeyringLike,
    Release,
    decrypt_bytes,
    encrypt_bytes,
)
from ..engine import DEFAULT_POLICY, OffloadPolicy, Source
from ._run import stream

__all__ = ["decrypt", "decrypt_bytes", "encrypt", "encrypt_bytes"]


def encrypt(
    source: Source,
    keyring: KeyringLike,
    *,
    encryption_context: Mapping[str, str] | None = None,
    suite: int = DEFAULT_SUITE,
    frame_length: int = DEFAULT_FRAME_LENGTH,
    allow_legacy: bool = False,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> AsyncIterator[bytes]:
    """Encrypt an async source into an AWS Encryption SDK message."""
    enc = AwsEncryptor(
        keyring,
        encryption_context=encryption_context,
        suite=suite,
        frame_length=frame_length,
        allow_legacy=allow_legacy,
    )
    return stream(source, enc, policy=policy)


def decrypt(
    source: Source,
    keyring: KeyringLike,
    *,
    encryption_context: Mapping[str, str] | None = None,
    allow_legacy: bool = False,
    release: Release = "verified-frames",
    max_encrypted_data_keys: int | None = DEFAULT_MAX_ENCRYPTED_DATA_KEYS,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> AsyncIterator[bytes]:
    """Decrypt an AWS Encryption SDK message, yielding only verified frames.

    With ``release="after-signature"`` nothing is yielded before a signed message's
    signature verified (the plaintext is held in memory until then).
    """
    dec = AwsDecryptor(
        keyring,
        encryption_context=encryption_context,
        allow_legacy=allow_legacy,
        release=release,
        max_encrypted_data_keys=max_encrypted_data_keys,
    )
    return stream(source, dec, policy=policy)
