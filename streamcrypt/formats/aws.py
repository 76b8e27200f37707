"""The AWS Encryption SDK message format as async streams; codec: :mod:`streamcrypt.codecs.aws`.

Frames are sealed and opened in parallel on the engine. For signed suites the encryptor's
signer hashes the output in order on its own stage (off the event loop for large pieces);
the decryptor hashes its input in order as it parses it.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..codecs import FormatOptions
from ..codecs.aws import (
    DEFAULT_FRAME_LENGTH,
    DEFAULT_MAX_ENCRYPTED_DATA_KEYS,
    DEFAULT_SUITE,
    FORMAT,
    KeyringLike,
)
from ..engine import DEFAULT_POLICY, OffloadPolicy
from . import run as _run

__all__ = ["decrypt", "decrypt_bytes", "encrypt", "encrypt_bytes"]


def _writing(
    name: str,
    key: KeyringLike,
    *,
    encryption_context: Mapping[str, str] | None = None,
    suite: str = DEFAULT_SUITE,
    segment_size: int = DEFAULT_FRAME_LENGTH,
    allow_legacy: bool = False,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> _run.Call:
    """``segment_size`` is the frame length, plaintext bytes per frame
    (:class:`~streamcrypt.codecs.AwsEncryptor` keeps the SDK's term, ``frame_length``)."""
    options = FormatOptions(
        key=key,
        suite=suite,
        segment_size=segment_size,
        encryption_context=encryption_context,
        extra={"allow_legacy": allow_legacy},
    )
    return _run.Call(options, policy)


def _reading(
    name: str,
    key: KeyringLike,
    *,
    encryption_context: Mapping[str, str] | None = None,
    allow_legacy: bool = False,
    allow_unverified: bool = False,
    max_encrypted_data_keys: int | None = DEFAULT_MAX_ENCRYPTED_DATA_KEYS,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> _run.Call:
    """Nothing of a signed message is released before its signature verified (the
    plaintext is held in memory until then) unless ``allow_unverified=True``."""
    extra = {
        "allow_legacy": allow_legacy,
        "allow_unverified": allow_unverified,
        "max_encrypted_data_keys": max_encrypted_data_keys,
    }
    options = FormatOptions(key=key, encryption_context=encryption_context, extra=extra)
    return _run.Call(options, policy)


encrypt = _run.streaming(
    FORMAT,
    _writing,
    "encrypt",
    "Encrypt an async source into an AWS Encryption SDK message.\n\n"
    "``segment_size`` is the frame length.",
)
decrypt = _run.streaming(
    FORMAT,
    _reading,
    "decrypt",
    "Decrypt an AWS Encryption SDK message, yielding only verified frames.\n\n"
    "Nothing of a signed message is yielded before its signature verified (the plaintext\n"
    "is held in memory until then) unless ``allow_unverified=True``.",
)
encrypt_bytes = _run.one_shot(
    FORMAT,
    _writing,
    "encrypt_bytes",
    "Encrypt a whole message, frames sealed on all cores (arguments as :func:`encrypt`).",
)
decrypt_bytes = _run.one_shot(
    FORMAT,
    _reading,
    "decrypt_bytes",
    "Decrypt a whole message, frames opened on all cores; all or nothing.",
)
