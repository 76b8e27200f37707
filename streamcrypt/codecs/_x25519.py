"""X25519 key pairs with a Bech32 text form: what age and the envelope share.

A format subclasses :class:`X25519PublicText` (its recipients) and
:class:`X25519SecretText` (its identities), sets the Bech32 prefixes and a short
description for error messages, and adds only its own ``wrap`` / ``unwrap``.
"""

from __future__ import annotations

from typing import ClassVar, Generic, Self, TypeVar

from cryptography.hazmat.primitives.asymmetric import x25519

from ..abc import Buffer
from ..errors import FormatError, InvalidPublicKeyError
from ..keys import SecretKey, as_secret_key, random_bytes
from ._bech32 import bech32_decode, bech32_encode
from ._stanza import Unpicklable

__all__ = ["X25519PublicText", "X25519SecretText", "is_low_order", "x25519_exchange"]


def x25519_exchange(private: x25519.X25519PrivateKey, public: bytes) -> bytes | None:
    """The shared secret, or ``None`` for a low-order peer key (all-zero secret)."""
    try:
        shared = private.exchange(x25519.X25519PublicKey.from_public_bytes(public))
    except ValueError:  # OpenSSL refuses the all-zero result
        return None
    return None if shared == bytes(32) else shared


def is_low_order(public: bytes) -> bool:
    """True for a public key that gives the all-zero secret with every scalar."""
    return x25519_exchange(x25519.X25519PrivateKey.generate(), public) is None


class X25519PublicText:
    """A 32-byte X25519 public key whose text form is Bech32 with prefix ``HRP``."""

    HRP: ClassVar[str]
    DESCRIPTION: ClassVar[str]  # e.g. "an age X25519 recipient (age1...)"
    #: refuse low-order points when the key is made, not only when it is used
    CHECK_ORDER_EARLY: ClassVar[bool] = False

    __slots__ = ("_public",)

    def __init__(self, public_key: Buffer) -> None:
        raw = bytes(public_key)
        if len(raw) != 32:
            raise InvalidPublicKeyError(f"an X25519 public key must be 32 bytes, got {len(raw)}")
        if self.CHECK_ORDER_EARLY and is_low_order(raw):
            raise InvalidPublicKeyError(
                "X25519 public key is a low-order point (the shared secret would be all zeros)"
            )
        self._public = raw

    @classmethod
    def parse(cls, text: str) -> Self:
        """Parse the Bech32 text form; raises :class:`FormatError`."""
        hrp, data = bech32_decode(text)
        if hrp != cls.HRP or len(data) != 32:
            raise FormatError(f"not {cls.DESCRIPTION} with a 32-byte key")
        return cls(data)

    def public_bytes(self) -> bytes:
        return self._public

    def __str__(self) -> str:
        return bech32_encode(self.HRP, self._public)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other._public == self._public

    def __hash__(self) -> int:
        return hash(self._public)


R = TypeVar("R", bound=X25519PublicText)


class X25519SecretText(Unpicklable, Generic[R]):
    """An X25519 private key with a Bech32 text form; ``repr`` shows only the public key
    and pickling raises :class:`TypeError`."""

    SECRET_HRP: ClassVar[str]
    DESCRIPTION: ClassVar[str]  # e.g. "an age X25519 identity (AGE-SECRET-KEY-1...)"
    RECIPIENT: ClassVar[type[X25519PublicText]]

    __slots__ = ("_private", "_recipient")

    def __init__(self, secret: Buffer | SecretKey) -> None:
        raw = as_secret_key(secret, 32, what="an X25519 private key").secret_bytes()
        self._private = x25519.X25519PrivateKey.from_private_bytes(raw)
        self._recipient: R = self.RECIPIENT(self._private.public_key().public_bytes_raw())  # type: ignore[assignment]

    @classmethod
    def generate(cls) -> Self:
        return cls(random_bytes(32))

    @classmethod
    def parse(cls, text: str) -> Self:
        """Parse the Bech32 text form; raises :class:`FormatError`."""
        hrp, data = bech32_decode(text)
        if hrp != cls.SECRET_HRP or len(data) != 32:
            raise FormatError(f"not {cls.DESCRIPTION} with a 32-byte key")
        return cls(data)

    @property
    def recipient(self) -> R:
        return self._recipient

    def secret_key(self) -> SecretKey:
        """The 32 private key bytes. Handle with care."""
        return SecretKey(self._private.private_bytes_raw())

    def to_string(self) -> str:
        """The secret key in its Bech32 text form. Handle with care."""
        return bech32_encode(self.SECRET_HRP, self._private.private_bytes_raw(), upper=True)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(<secret hidden>, recipient={str(self._recipient)!r})"

    __str__ = __repr__
