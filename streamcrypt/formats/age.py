"""age v1 (age-encryption.org/v1) as async streams; the codec is :mod:`streamcrypt.codecs.age`.

Every call goes through the codec's descriptor (:data:`streamcrypt.codecs.age.FORMAT`):
armor is written on request and detected when reading; a passphrase's scrypt runs on a
worker thread (inline only with ``policy=None``), never on the event loop.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from typing import Any

from ..abc import Buffer
from ..codecs import FormatOptions
from ..codecs.age import (
    DEFAULT_MAX_WORK_FACTOR,
    DEFAULT_WORK_FACTOR,
    FORMAT,
    IdentityLike,
    RecipientLike,
)
from ..deprecation import warn_renamed
from ..engine import DEFAULT_POLICY, OffloadPolicy, Source
from ..errors import InvalidParameterError
from . import run as _run

__all__ = ["decrypt", "decrypt_bytes", "encrypt", "encrypt_bytes"]


def _by_keyword(where: str, names: tuple[str, ...], args: tuple[Any, ...], **given: Any) -> Any:
    """The values of ``names`` from the keywords ``given``, or from ``args`` given by
    position (deprecated for one release: a :class:`DeprecationWarning`)."""
    if len(args) > len(names):
        raise InvalidParameterError(
            f"formats.age.{where} takes at most {len(names) + 1} positional arguments"
        )
    for name, value in zip(names, args, strict=False):
        if given[name] is not None:
            raise InvalidParameterError(f"formats.age.{where}: {name} given twice")
        given[name] = value
    if args:
        shown = ", ".join(names[: len(args)])
        warn_renamed(f"formats.age.{where}: {shown} by position", "keywords", stacklevel=4)
    return given


#: The arguments once taken by position, in their old order.
_WRITE = ("recipients", "passphrase", "armor")
_READ = ("identities", "passphrase")


def _writing(
    recipients: Iterable[RecipientLike] | None,
    passphrase: str | Buffer | None,
    armor: bool,
    work_factor: int,
) -> FormatOptions:
    return FormatOptions(
        recipients=tuple(recipients or ()),
        passphrase=passphrase,
        armor=armor,
        work_factor=work_factor,
    )


def _reading(
    identities: Iterable[IdentityLike] | None,
    passphrase: str | Buffer | None,
    max_work_factor: int,
) -> FormatOptions:
    return FormatOptions(
        identities=tuple(identities or ()),
        passphrase=passphrase,
        max_work_factor=max_work_factor,
    )


def encrypt(
    source: Source,
    *args: Any,
    recipients: Iterable[RecipientLike] | None = None,
    passphrase: str | Buffer | None = None,
    armor: bool = False,
    work_factor: int = DEFAULT_WORK_FACTOR,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> AsyncIterator[bytes]:
    """Encrypt an async source to age recipients (or a passphrase), optionally armored.

    The arguments are keyword-only (by position they still work, with a
    :class:`DeprecationWarning`, for one release) and checked here, at the call.
    """
    kw = _by_keyword("encrypt", _WRITE[:2], args, recipients=recipients, passphrase=passphrase)
    options = _writing(kw["recipients"], kw["passphrase"], armor, work_factor)
    return _run.encrypt(FORMAT, source, options, policy)


def decrypt(
    source: Source,
    *args: Any,
    identities: Iterable[IdentityLike] | None = None,
    passphrase: str | Buffer | None = None,
    max_work_factor: int = DEFAULT_MAX_WORK_FACTOR,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> AsyncIterator[bytes]:
    """Decrypt an age stream (armor detected by itself), yielding only verified chunks.

    The arguments are checked here, at the call. Armor is detected as
    :func:`decrypt_bytes` detects it, however the source is cut (leading whitespace
    included): reading goes on until the verdict is known. Keyword-only, as
    :func:`encrypt`.
    """
    kw = _by_keyword("decrypt", _READ, args, identities=identities, passphrase=passphrase)
    options = _reading(kw["identities"], kw["passphrase"], max_work_factor)
    return _run.decrypt(FORMAT, source, options, policy)


def encrypt_bytes(
    plaintext: Buffer,
    *args: Any,
    recipients: Iterable[RecipientLike] | None = None,
    passphrase: str | Buffer | None = None,
    armor: bool | None = None,
    work_factor: int = DEFAULT_WORK_FACTOR,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> bytes:
    """Encrypt ``plaintext`` to an age v1 file (ASCII-armored when ``armor``), its
    chunks sealed on all cores. Keyword-only, as :func:`encrypt`. Raises as
    :class:`~streamcrypt.codecs.AgeEncryptor`."""
    kw = _by_keyword(
        "encrypt_bytes", _WRITE, args, recipients=recipients, passphrase=passphrase, armor=armor
    )
    options = _writing(kw["recipients"], kw["passphrase"], bool(kw["armor"]), work_factor)
    return _run.encrypt_bytes(FORMAT, plaintext, options, policy)


def decrypt_bytes(
    ciphertext: Buffer,
    *args: Any,
    identities: Iterable[IdentityLike] | None = None,
    passphrase: str | Buffer | None = None,
    max_work_factor: int = DEFAULT_MAX_WORK_FACTOR,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> bytes:
    """Decrypt an age v1 file, binary or ASCII-armored, its chunks opened on all cores.

    Raises as :class:`~streamcrypt.codecs.AgeDecryptor`; bad armor raises
    :class:`~streamcrypt.errors.FormatError`. Keyword-only, as :func:`encrypt`.
    """
    kw = _by_keyword("decrypt_bytes", _READ, args, identities=identities, passphrase=passphrase)
    options = _reading(kw["identities"], kw["passphrase"], max_work_factor)
    return _run.decrypt_bytes(FORMAT, ciphertext, options, policy)
