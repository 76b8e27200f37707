"""age v1 (age-encryption.org/v1) as async streams; the codec is :mod:`streamcrypt.codecs.age`.

Every call goes through the codec's descriptor (:data:`streamcrypt.codecs.age.FORMAT`):
armor is written on request and detected when reading; a passphrase's scrypt runs on a
worker thread (inline only with ``policy=None``), never on the event loop.
"""

from __future__ import annotations

from collections.abc import Iterable
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
from ..engine import DEFAULT_POLICY, OffloadPolicy
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
        warn_renamed(f"formats.age.{where}: {shown} by position", "keywords", stacklevel=5)
    return given


#: The arguments once taken by position, in their old order (the async ``encrypt``
#: took the first two).
_WRITE = ("recipients", "passphrase", "armor")
_READ = ("identities", "passphrase")


def _writing(
    name: str,
    *args: Any,
    recipients: Iterable[RecipientLike] | None = None,
    passphrase: str | Buffer | None = None,
    armor: bool | None = None,
    work_factor: int = DEFAULT_WORK_FACTOR,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> _run.Call:
    """age recipients (or a passphrase), ASCII armor when ``armor``; keyword-only (by
    position they still work, with a :class:`DeprecationWarning`, for one release)."""
    names = _WRITE if name == "encrypt_bytes" else _WRITE[:2]
    kw = _by_keyword(name, names, args, recipients=recipients, passphrase=passphrase, armor=armor)
    options = FormatOptions(
        recipients=tuple(kw["recipients"] or ()),
        passphrase=kw["passphrase"],
        armor=bool(kw["armor"]),
        work_factor=work_factor,
    )
    return _run.Call(options, policy)


def _reading(
    name: str,
    *args: Any,
    identities: Iterable[IdentityLike] | None = None,
    passphrase: str | Buffer | None = None,
    max_work_factor: int = DEFAULT_MAX_WORK_FACTOR,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> _run.Call:
    """age identities (or a passphrase); keyword-only, as when writing."""
    kw = _by_keyword(name, _READ, args, identities=identities, passphrase=passphrase)
    options = FormatOptions(
        identities=tuple(kw["identities"] or ()),
        passphrase=kw["passphrase"],
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
