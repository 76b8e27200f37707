"""Tink streaming AEAD as async streams; the codec is :mod:`streamcrypt.codecs.tink`."""

from __future__ import annotations

from collections.abc import Sequence

from ..abc import Buffer
from ..codecs import FormatOptions
from ..codecs.tink import FORMAT, TinkKeyLike, TinkStreamingKey
from ..engine import DEFAULT_POLICY, OffloadPolicy
from . import run as _run

__all__ = ["decrypt", "decrypt_bytes", "encrypt", "encrypt_bytes"]


def _options(
    name: str,
    key: TinkKeyLike | Sequence[TinkStreamingKey],
    *,
    aad: Buffer = b"",
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> _run.Call:
    """A Tink streaming key (encrypting: a keyset's primary key; decrypting: any of a
    keyset's keys) and the associated data."""
    return _run.Call(FormatOptions(key=key, aad=aad), policy)


encrypt = _run.streaming(
    FORMAT,
    _options,
    "encrypt",
    "Encrypt an async source with a Tink streaming key (a keyset's primary key).",
)
decrypt = _run.streaming(
    FORMAT,
    _options,
    "decrypt",
    "Decrypt a Tink streaming ciphertext, yielding only verified segments.",
)
encrypt_bytes = _run.one_shot(
    FORMAT,
    _options,
    "encrypt_bytes",
    "Encrypt ``plaintext`` into one Tink streaming ciphertext, segments on all cores.",
)
decrypt_bytes = _run.one_shot(
    FORMAT,
    _options,
    "decrypt_bytes",
    "Decrypt a whole Tink streaming ciphertext, segments on all cores; all or nothing.",
)
