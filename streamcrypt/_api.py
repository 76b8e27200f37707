"""The high-level names: encrypt/decrypt bytes and async streams, in any registered format.

``format=`` names a descriptor of :data:`streamcrypt.codecs.FORMATS` (default the native
container); the keywords are the shared vocabulary (:class:`~streamcrypt.codecs.FormatOptions`).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterable
from typing import Any

from .abc import Buffer
from .codecs import FORMATS, FormatOptions, SegmentedFormat
from .engine import DEFAULT_POLICY, OffloadPolicy, Source, run_segmented
from .errors import InvalidParameterError
from .formats import run

__all__ = ["decrypt", "decrypt_bytes", "encrypt", "encrypt_bytes", "run_segmented"]


def _format(name: str) -> SegmentedFormat:
    fmt = FORMATS.get(name) if isinstance(name, str) else None
    if fmt is None:
        raise InvalidParameterError(
            f"unknown format {name!r}; streamcrypt speaks {', '.join(sorted(FORMATS))}"
        )
    return fmt


def _options(
    key: Any,
    suite: str | None,
    segment_size: int | None,
    aad: Buffer,
    keys: Iterable[Any],
    passphrase: str | Buffer | None,
    *,
    writing: bool,
) -> FormatOptions:
    people = (keys,) if isinstance(keys, str | os.PathLike) else tuple(keys)  # one file's text
    return FormatOptions(
        key=key,
        suite=suite,
        segment_size=segment_size,
        aad=aad,
        recipients=people if writing else (),
        identities=() if writing else people,
        passphrase=passphrase,
    )


def encrypt_bytes(
    plaintext: Buffer,
    key: Any = None,
    *,
    format: str = "native",
    suite: str | None = None,
    segment_size: int | None = None,
    aad: Buffer = b"",
    recipients: Iterable[Any] = (),
    passphrase: str | Buffer | None = None,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> bytes:
    """Encrypt ``plaintext`` into ``format`` (default a native container, docs/FORMAT.md).

    ``suite`` / ``segment_size`` default to the format's. Raises
    :class:`~streamcrypt.errors.InvalidParameterError` for an unknown format or options it
    does not take, else as the format's encryptor.
    """
    options = _options(key, suite, segment_size, aad, recipients, passphrase, writing=True)
    return run.encrypt_bytes(_format(format), plaintext, options, policy)


def decrypt_bytes(
    ciphertext: Buffer,
    key: Any = None,
    *,
    format: str = "native",
    aad: Buffer = b"",
    identities: Iterable[Any] = (),
    passphrase: str | Buffer | None = None,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> bytes:
    """Decrypt a whole message in ``format`` (default a native container). Raises
    AuthenticationError, TruncatedStreamError, FormatError, UnsupportedFormatError or
    UnknownKeyError; returns nothing on failure."""
    options = _options(key, None, None, aad, identities, passphrase, writing=False)
    return run.decrypt_bytes(_format(format), ciphertext, options, policy)


def encrypt(
    source: Source,
    key: Any = None,
    *,
    format: str = "native",
    suite: str | None = None,
    segment_size: int | None = None,
    aad: Buffer = b"",
    recipients: Iterable[Any] = (),
    passphrase: str | Buffer | None = None,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> AsyncIterator[bytes]:
    """Encrypt an async source (iterable of bytes, anyio byte stream) as it streams.

    Key and parameter errors are raised here, at the call; the result is an async
    iterator of ciphertext chunks.
    """
    options = _options(key, suite, segment_size, aad, recipients, passphrase, writing=True)
    return run.encrypt(_format(format), source, options, policy)


def decrypt(
    source: Source,
    key: Any = None,
    *,
    format: str = "native",
    aad: Buffer = b"",
    identities: Iterable[Any] = (),
    passphrase: str | Buffer | None = None,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> AsyncIterator[bytes]:
    """Decrypt an async source in ``format``, yielding only verified plaintext.

    Raises (while iterating) AuthenticationError, TruncatedStreamError, FormatError,
    UnsupportedFormatError, UnknownKeyError.
    """
    options = _options(key, None, None, aad, identities, passphrase, writing=False)
    return run.decrypt(_format(format), source, options, policy)
