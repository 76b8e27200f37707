"""age's passphrase recipient and identity: an scrypt stanza (r = 8, p = 1), which must
be a file's only stanza."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ...abc import Buffer
from ...errors import FormatError, InvalidParameterError, LimitExceededError
from ...keys import HoldsSecrets, random_bytes
from .. import _stanza
from .._stanza import Stanza, b64encode, check_shape, stanza_arg, unwrap_key, wrap_key
from ._header import scrypt_not_alone

#: scrypt work factor (log2 N) used when encrypting with a passphrase (age's default).
DEFAULT_WORK_FACTOR = 18
#: Highest scrypt work factor a reader accepts unless told otherwise: the library's one
#: cap on password KDFs read from outside (``keys.MAX_SCRYPT_READ_PARAMS``, N = 2**20 at
#: r = 8: 1 GiB; tests/test_age.py holds the two equal). Go age accepts up to 22 (4 GiB);
#: pass ``max_work_factor=22`` for a file you trust that needs it.
DEFAULT_MAX_WORK_FACTOR = 20
_SCRYPT_LABEL = b"age-encryption.org/v1/scrypt"
_WORK_FACTOR = re.compile(r"[1-9][0-9]*")


def _scrypt(passphrase: bytes, salt: bytes, work_factor: int) -> bytes:
    """age's scrypt (r = 8, p = 1); :class:`LimitExceededError` if its memory is not there."""
    from ...keys import ScryptParams, derive_key_from_password

    params = ScryptParams(1 << work_factor, 8, 1)
    return derive_key_from_password(passphrase, _SCRYPT_LABEL + salt, params=params).secret_bytes()


class ScryptRecipient(HoldsSecrets):
    """Passphrase encryption (an scrypt stanza; it must be a file's only recipient)."""

    __slots__ = ("_passphrase", "work_factor")

    def __init__(self, passphrase: str | Buffer, *, work_factor: int = DEFAULT_WORK_FACTOR):
        if not 1 <= work_factor <= 30:
            raise InvalidParameterError(f"scrypt work factor must be 1..30, got {work_factor}")
        self._passphrase = _stanza.passphrase_bytes(passphrase)
        self.work_factor = work_factor

    def wrap(self, file_key: bytes) -> list[Stanza]:
        salt = random_bytes(16)
        key = _scrypt(self._passphrase, salt, self.work_factor)
        args = ("scrypt", b64encode(salt).decode(), str(self.work_factor))
        return [Stanza(args, wrap_key(key, file_key))]

    def __repr__(self) -> str:
        return f"ScryptRecipient(<passphrase hidden>, work_factor={self.work_factor})"


class ScryptIdentity(HoldsSecrets):
    """Passphrase decryption. Work factors above ``max_work_factor`` raise
    :class:`LimitExceededError`; a wrong passphrase unwraps nothing (``None``)."""

    __slots__ = ("_passphrase", "max_work_factor")

    def __init__(
        self, passphrase: str | Buffer, *, max_work_factor: int = DEFAULT_MAX_WORK_FACTOR
    ) -> None:
        self._passphrase = _stanza.passphrase_bytes(passphrase)
        self.max_work_factor = max_work_factor

    def unwrap(self, stanzas: Sequence[Stanza]) -> bytes | None:
        """The file key from the scrypt stanza, or ``None`` for a wrong passphrase.

        Raises :class:`FormatError` (malformed stanza, or not the only stanza) and
        :class:`LimitExceededError` (work factor over the cap).
        """
        if scrypt_not_alone(stanzas):
            raise FormatError("an age scrypt stanza must be the only stanza in the header")
        for stanza in stanzas:
            if stanza.kind != "scrypt":
                continue
            check_shape(stanza, 3)
            salt = stanza_arg(stanza, 1, 16)
            digits = stanza.args[2]
            if not _WORK_FACTOR.fullmatch(digits):
                raise FormatError("age scrypt work factor must be a decimal without leading 0")
            # Compare lengths first: int() refuses strings of more than 4300 digits.
            cap = str(self.max_work_factor)
            if len(digits) > len(cap) or int(digits) > self.max_work_factor:
                shown = digits if len(digits) <= 20 else f"of {len(digits)} digits"
                raise LimitExceededError(
                    f"age scrypt work factor {shown} is over the limit "
                    f"{self.max_work_factor}; raise max_work_factor if you trust this file"
                )
            work_factor = int(digits)
            return unwrap_key(_scrypt(self._passphrase, salt, work_factor), stanza.body)
        return None

    def __repr__(self) -> str:
        return f"ScryptIdentity(<passphrase hidden>, max_work_factor={self.max_work_factor})"
