"""age v1 (age-encryption.org/v1) as async streams; the codec is :mod:`streamcrypt.codecs.age`.

Every call goes through the codec's descriptor (:data:`streamcrypt.codecs.age.FORMAT`):
armor is written on request and detected when reading; a passphrase's scrypt runs on a
worker thread (inline only with ``policy=None``), never on the event loop.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..abc import Buffer
from ..codecs import FormatOptions
from ..codecs.age import (
    DEFAULT_MAX_WORK_FACTOR,
    DEFAULT_WORK_FACTOR,
    FORMAT,
    IdentityLike,
    RecipientLike,
)
from ..engine import DEFAULT_POLICY, OffloadPolicy
from . import run as _run

__all__ = ["decrypt", "decrypt_bytes", "encrypt", "encrypt_bytes"]


def _writing(
    name: str,
    *,
    recipients: Iterable[RecipientLike] | None = None,
    passphrase: str | Buffer | None = None,
    armor: bool = False,
    work_factor: int = DEFAULT_WORK_FACTOR,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> _run.Call:
    """age recipients (or a passphrase), ASCII armor when ``armor``."""
    options = FormatOptions(
        recipients=tuple(recipients or ()),
        passphrase=passphrase,
        armor=armor,
        work_factor=work_factor,
    )
    return _run.Call(options, policy)


def _reading(
    name: str,
    *,
    identities: Iterable[IdentityLike] | None = None,
    passphrase: str | Buffer | None = None,
    max_work_factor: int = DEFAULT_MAX_WORK_FACTOR,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> _run.Call:
    """age identities (or a passphrase)."""
    options = FormatOptions(
        identities=tuple(identities or ()),
        passphrase=passphrase,
        max_work_factor=max_work_factor,
    )
    return _run.Call(options, policy)


encrypt = _run.streaming(
    FORMAT,
    _writing,
    "encrypt",
    "Encrypt an async source to age ``recipients=`` (or a ``passphrase=``), armored when\n"
    "``armor=True``. The arguments are checked here, at the call.",
)
decrypt = _run.streaming(
    FORMAT,
    _reading,
    "decrypt",
    "Decrypt an age stream (armor detected by itself), yielding only verified chunks.\n\n"
    "The arguments are checked here, at the call. Armor is detected as\n"
    ":func:`decrypt_bytes` detects it, however the source is cut (leading whitespace\n"
    "included): reading goes on until the verdict is known.",
)
encrypt_bytes = _run.one_shot(
    FORMAT,
    _writing,
    "encrypt_bytes",
    "Encrypt ``plaintext`` to an age v1 file (ASCII-armored when ``armor``), its chunks\n"
    "sealed on all cores. Raises as :class:`~streamcrypt.codecs.AgeEncryptor`.",
)
decrypt_bytes = _run.one_shot(
    FORMAT,
    _reading,
    "decrypt_bytes",
    "Decrypt an age v1 file, binary or ASCII-armored, its chunks opened on all cores.\n\n"
    "Raises as :class:`~streamcrypt.codecs.AgeDecryptor`; bad armor raises\n"
    ":class:`~streamcrypt.errors.FormatError`.",
)
