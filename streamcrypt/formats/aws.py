"""The AWS Encryption SDK message format as async streams; codec: :mod:`streamcrypt.codecs.aws`.

Frames are sealed and opened in parallel on the engine. For signed suites the encryptor's
signer hashes the output in order on its own stage (off the event loop for large pieces);
the decryptor hashes its input in order as it parses it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping

from ..abc import Buffer
from ..codecs import FormatOptions
from ..codecs.aws import (
    DEFAULT_FRAME_LENGTH,
    DEFAULT_MAX_ENCRYPTED_DATA_KEYS,
    DEFAULT_SUITE,
    FORMAT,
    KeyringLike,
    Release,
)
from ..deprecation import renamed_keyword
from ..engine import DEFAULT_POLICY, OffloadPolicy, Source
from . import run as _run

__all__ = ["decrypt", "decrypt_bytes", "encrypt", "encrypt_bytes"]


def _writing(
    where: str,
    keyring: KeyringLike,
    encryption_context: Mapping[str, str] | None,
    suite: int,
    segment_size: int,
    allow_legacy: bool,
    frame_length: int | None,
) -> FormatOptions:
    """The options of ``encrypt`` / ``encrypt_bytes`` (``frame_length``: the deprecated
    name of ``segment_size``, the warning pointed at their caller)."""
    size = renamed_keyword(
        f"formats.aws.{where}",
        "frame_length",
        "segment_size",
        frame_length,
        segment_size,
        DEFAULT_FRAME_LENGTH,
        stacklevel=5,
    )
    extra = {
        "encryption_context": encryption_context,
        "suite": suite,
        "allow_legacy": allow_legacy,
    }
    return FormatOptions(key=keyring, segment_size=size, extra=extra)


def _reading(
    keyring: KeyringLike,
    encryption_context: Mapping[str, str] | None,
    allow_legacy: bool,
    release: Release,
    max_encrypted_data_keys: int | None,
) -> FormatOptions:
    extra = {
        "encryption_context": encryption_context,
        "allow_legacy": allow_legacy,
        "release": release,
        "max_encrypted_data_keys": max_encrypted_data_keys,
    }
    return FormatOptions(key=keyring, extra=extra)


def encrypt(
    source: Source,
    keyring: KeyringLike,
    *,
    encryption_context: Mapping[str, str] | None = None,
    suite: int = DEFAULT_SUITE,
    segment_size: int = DEFAULT_FRAME_LENGTH,
    allow_legacy: bool = False,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
    frame_length: int | None = None,
) -> AsyncIterator[bytes]:
    """Encrypt an async source into an AWS Encryption SDK message.

    ``segment_size`` is the frame length, plaintext bytes per frame (``frame_length=`` is
    its deprecated name here; the codec's :class:`~streamcrypt.codecs.AwsEncryptor` keeps
    the SDK's term).
    """
    options = _writing(
        "encrypt", keyring, encryption_context, suite, segment_size, allow_legacy, frame_length
    )
    return _run.encrypt(FORMAT, source, options, policy)


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
    options = _reading(keyring, encryption_context, allow_legacy, release, max_encrypted_data_keys)
    return _run.decrypt(FORMAT, source, options, policy)


def encrypt_bytes(
    plaintext: Buffer,
    keyring: KeyringLike,
    *,
    encryption_context: Mapping[str, str] | None = None,
    suite: int = DEFAULT_SUITE,
    segment_size: int = DEFAULT_FRAME_LENGTH,
    allow_legacy: bool = False,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
    frame_length: int | None = None,
) -> bytes:
    """Encrypt a whole message, frames sealed on all cores (arguments as :func:`encrypt`)."""
    options = _writing(
        "encrypt_bytes",
        keyring,
        encryption_context,
        suite,
        segment_size,
        allow_legacy,
        frame_length,
    )
    return _run.encrypt_bytes(FORMAT, plaintext, options, policy)


def decrypt_bytes(
    ciphertext: Buffer,
    keyring: KeyringLike,
    *,
    encryption_context: Mapping[str, str] | None = None,
    allow_legacy: bool = False,
    release: Release = "verified-frames",
    max_encrypted_data_keys: int | None = DEFAULT_MAX_ENCRYPTED_DATA_KEYS,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> bytes:
    """Decrypt a whole message, frames opened on all cores; all or nothing."""
    options = _reading(keyring, encryption_context, allow_legacy, release, max_encrypted_data_keys)
    return _run.decrypt_bytes(FORMAT, ciphertext, options, policy)
