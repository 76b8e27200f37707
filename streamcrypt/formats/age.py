"""age v1 (age-encryption.org/v1) as async streams; the codec is :mod:`streamcrypt.codecs.age`.

Every call goes through the codec's descriptor (:data:`streamcrypt.codecs.age.FORMAT`):
armor is written on request and detected when reading; a passphrase's scrypt runs on a
worker thread (inline only with ``policy=None``), never on the event loop.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable

from ..abc import Buffer
from ..codecs import FormatOptions
from ..codecs.age import (
    DEFAULT_MAX_WORK_FACTOR,
    DEFAULT_WORK_FACTOR,
    FORMAT,
    IdentityLike,
    RecipientLike,
)
from ..engine import DEFAULT_POLICY, OffloadPolicy, Source
from . import run as _run

__all__ = ["decrypt", "decrypt_bytes", "encrypt", "encrypt_bytes"]


def _writing(
    recipients: Iterable[RecipientLike],
    passphrase: str | Buffer | None,
    armor: bool,
    work_factor: int,
) -> FormatOptions:
    return FormatOptions(
        recipients=tuple(recipients), passphrase=passphrase, armor=armor, work_factor=work_factor
    )


def _reading(
    identities: Iterable[IdentityLike], passphrase: str | Buffer | None, max_work_factor: int
) -> FormatOptions:
    return FormatOptions(
        identities=tuple(identities), passphrase=passphrase, max_work_factor=max_work_factor
    )


def encrypt(
    source: Source,
    recipients: Iterable[RecipientLike] = (),
    passphrase: str | Buffer | None = None,
    *,
    armor: bool = False,
    work_factor: int = DEFAULT_WORK_FACTOR,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> AsyncIterator[bytes]:
    """Encrypt an async source to age recipients (or a passphrase), optionally armored.

    The arguments are checked here, at the call.
    """
    options = _writing(recipients, passphrase, armor, work_factor)
    return _run.encrypt(FORMAT, source, options, policy)


def decrypt(
    source: Source,
    identities: Iterable[IdentityLike] = (),
    passphrase: str | Buffer | None = None,
    *,
    max_work_factor: int = DEFAULT_MAX_WORK_FACTOR,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> AsyncIterator[bytes]:
    """Decrypt an age stream (armor detected by itself), yielding only verified chunks.

    The arguments are checked here, at the call. Armor is detected as
    :func:`decrypt_bytes` detects it, however the source is cut (leading whitespace
    included): reading goes on until the verdict is known.
    """
    options = _reading(identities, passphrase, max_work_factor)
    return _run.decrypt(FORMAT, source, options, policy)


def encrypt_bytes(
    plaintext: Buffer,
    recipients: Iterable[RecipientLike] = (),
    passphrase: str | Buffer | None = None,
    armor: bool = False,
    *,
    work_factor: int = DEFAULT_WORK_FACTOR,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> bytes:
    """Encrypt ``plaintext`` to an age v1 file (ASCII-armored when ``armor``), its
    chunks sealed on all cores. Raises as :class:`~streamcrypt.codecs.AgeEncryptor`."""
    options = _writing(recipients, passphrase, armor, work_factor)
    return _run.encrypt_bytes(FORMAT, plaintext, options, policy)


def decrypt_bytes(
    ciphertext: Buffer,
    identities: Iterable[IdentityLike] = (),
    passphrase: str | Buffer | None = None,
    *,
    max_work_factor: int = DEFAULT_MAX_WORK_FACTOR,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> bytes:
    """Decrypt an age v1 file, binary or ASCII-armored, its chunks opened on all cores.

    Raises as :class:`~streamcrypt.codecs.AgeDecryptor`; bad armor raises
    :class:`~streamcrypt.errors.FormatError`.
    """
    options = _reading(identities, passphrase, max_work_factor)
    return _run.decrypt_bytes(FORMAT, ciphertext, options, policy)
