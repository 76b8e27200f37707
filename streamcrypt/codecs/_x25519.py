"""The one X25519 key pair age and the envelope share (private to ``codecs``).

An :class:`X25519Identity` is a Curve25519 private key and an :class:`X25519Recipient`
its public key. The same pair serves both formats: ``wrap`` / ``unwrap`` speak age's
X25519 stanza (HKDF-SHA-256 over the shared secret with salt ``share || recipient``,
then ChaCha20-Poly1305 with a zero nonce), and the envelope wraps to the same keys with
its own x25519 stanza (``codecs.envelope``). Each key has two text forms, one per
format (Bech32: ``age1...`` / ``AGE-SECRET-KEY-1...`` and ``sc-x25519-pub1...`` /
``SC-X25519-SECRET-1...``); ``parse`` reads either, and a key writes itself in the form
it was read in or made with (``text_form``). :func:`dh_wrap` / :func:`dh_unwrap` are the
X25519 wrapping age's ssh-ed25519 stanza shares.
"""

from __future__ import annotations

from typing import Literal, Self

from cryptography.hazmat.primitives.asymmetric import x25519

from ..abc import Buffer
from ..errors import FormatError, InvalidPublicKeyError
from ..keys import SecretKey, as_secret_key, hkdf, random_bytes
from ._bech32 import bech32_decode, bech32_encode
from ._stanza import (
    KeyIdentity,
    PublicKey,
    Stanza,
    b64encode,
    check_shape,
    stanza_arg,
    unwrap_key,
    wrap_key,
)

#: Which format's text a key is written in: ``"age"`` or ``"envelope"``.
TextForm = Literal["age", "envelope"]
#: The Bech32 prefixes (public, secret) of each text form.
PREFIXES: dict[TextForm, tuple[str, str]] = {
    "age": ("age", "age-secret-key-"),
    "envelope": ("sc-x25519-pub", "sc-x25519-secret-"),
}
_X25519_INFO = b"age-encryption.org/v1/X25519"


def x25519_exchange(private: x25519.X25519PrivateKey, public: bytes) -> bytes | None:
    """The shared secret, or ``None`` for a low-order peer key (all-zero secret)."""
    try:
        shared = private.exchange(x25519.X25519PublicKey.from_public_bytes(public))
    except ValueError:  # OpenSSL refuses the all-zero result
        return None
    return None if shared == bytes(32) else shared


def ephemeral_exchange(
    public: bytes, tweak: x25519.X25519PrivateKey | None = None
) -> tuple[bytes, bytes]:
    """X25519 to ``public`` from a fresh ephemeral key (the secret then multiplied by
    ``tweak`` for ssh-ed25519), as age's and the envelope's stanzas do it: the share and
    the shared secret. Raises :class:`InvalidPublicKeyError` for a low-order ``public``."""
    ephemeral = x25519.X25519PrivateKey.generate()
    share = ephemeral.public_key().public_bytes_raw()
    shared = x25519_exchange(ephemeral, public)
    if shared is not None and tweak is not None:
        shared = x25519_exchange(tweak, shared)
    if shared is None:
        raise InvalidPublicKeyError("the X25519 recipient is a low-order point")
    return share, shared


def dh_wrap(
    public: bytes, file_key: bytes, info: bytes, tweak: x25519.X25519PrivateKey | None = None
) -> tuple[bytes, bytes]:
    """age's X25519 wrapping (:func:`ephemeral_exchange`): the share and the wrapped file
    key. Raises :class:`InvalidPublicKeyError` for a low-order ``public``."""
    share, shared = ephemeral_exchange(public, tweak)
    return share, wrap_key(hkdf(shared, salt=share + public, info=info), file_key)


def dh_unwrap(
    private: x25519.X25519PrivateKey,
    public: bytes,
    stanza: Stanza,
    share: bytes,
    info: bytes,
    tweak: x25519.X25519PrivateKey | None = None,
) -> bytes | None:
    """The inverse of :func:`dh_wrap` for ``private`` (whose public key is ``public``):
    the file key, or ``None`` when the stanza does not open. Raises :class:`FormatError`
    for a low-order share."""
    shared = x25519_exchange(private, share)
    if shared is not None and tweak is not None:
        shared = x25519_exchange(tweak, shared)
    if shared is None:
        raise FormatError(f"age {stanza.kind} stanza has a low-order ephemeral share")
    key = hkdf(shared, salt=share + public, info=info)
    return unwrap_key(key, stanza.body)


def _decode(text: str, secret: bool) -> tuple[bytes, TextForm]:
    """The 32 key bytes of either text form, and which form it was."""
    hrp, data = bech32_decode(text.strip())
    for form, prefixes in PREFIXES.items():
        if hrp == prefixes[secret] and len(data) == 32:
            return data, form
    what = "identity (AGE-SECRET-KEY-1... or SC-X25519-SECRET-1...)"
    raise FormatError(
        f"not an X25519 {what if secret else 'recipient (age1... or sc-x25519-pub1...)'} "
        "with a 32-byte key"
    )


class X25519Recipient(PublicKey):
    """An X25519 public key: a recipient of age files and envelopes alike.

    Raises :class:`InvalidPublicKeyError` for a wrong size or a low-order point (the
    shared secret would be all zeros).
    """

    __slots__ = ("text_form",)

    def __init__(self, public_key: Buffer, *, text_form: TextForm = "age") -> None:
        raw = bytes(public_key)
        if len(raw) != 32:
            raise InvalidPublicKeyError(f"an X25519 public key must be 32 bytes, got {len(raw)}")
        if x25519_exchange(x25519.X25519PrivateKey.generate(), raw) is None:
            raise InvalidPublicKeyError(
                "X25519 public key is a low-order point (the shared secret would be all zeros)"
            )
        self._public = raw
        #: The text form ``str()`` writes.
        self.text_form: TextForm = text_form

    @classmethod
    def parse(cls, text: str) -> Self:
        """Parse ``age1...`` or ``sc-x25519-pub1...``; raises :class:`FormatError`."""
        raw, form = _decode(text, secret=False)
        return cls(raw, text_form=form)

    def public_bytes(self) -> bytes:
        return self._public

    def wrap(self, file_key: bytes) -> list[Stanza]:
        """One age X25519 stanza (the envelope writes its own for this key)."""
        share, body = dh_wrap(self._public, file_key, _X25519_INFO)
        return [Stanza(("X25519", b64encode(share).decode()), body)]

    def __str__(self) -> str:
        return bech32_encode(PREFIXES[self.text_form][0], self._public)


class X25519Identity(KeyIdentity[X25519Recipient]):
    """An X25519 private key: an identity for age files and envelopes alike.

    ``repr`` and ``str`` show only the public key; pickling raises :class:`TypeError`.
    """

    __slots__ = ("_private",)

    kind = "X25519"

    def __init__(self, secret: Buffer | SecretKey, *, text_form: TextForm = "age") -> None:
        raw = as_secret_key(secret, 32, what="an X25519 private key").secret_bytes()
        self._private = x25519.X25519PrivateKey.from_private_bytes(raw)
        public = self._private.public_key().public_bytes_raw()
        self._recipient = X25519Recipient(public, text_form=text_form)

    @classmethod
    def generate(cls, *, text_form: TextForm = "age") -> Self:
        return cls(random_bytes(32), text_form=text_form)

    @classmethod
    def parse(cls, text: str) -> Self:
        """Parse ``AGE-SECRET-KEY-1...`` or ``SC-X25519-SECRET-1...``; raises
        :class:`FormatError` (the message never contains the key)."""
        raw, form = _decode(text, secret=True)
        return cls(raw, text_form=form)

    def exchange(self, share: bytes) -> bytes | None:
        """The shared secret with ``share``, ``None`` for a low-order share. Handle with care."""
        return x25519_exchange(self._private, share)

    def secret_key(self) -> SecretKey:
        """The 32 private key bytes. Handle with care."""
        return SecretKey(self._private.private_bytes_raw())

    def to_string(self) -> str:
        """The secret key in its text form. Handle with care."""
        prefix = PREFIXES[self._recipient.text_form][1]
        return bech32_encode(prefix, self._private.private_bytes_raw(), upper=True)

    def _unwrap_one(self, stanza: Stanza) -> bytes | None:
        """The file key from an age X25519 stanza for this identity, else ``None``.

        Raises :class:`FormatError` for a malformed X25519 stanza or a low-order share.
        """
        check_shape(stanza, 2)
        share = stanza_arg(stanza, 1, 32)
        ours = self._recipient.public_bytes()
        return dh_unwrap(self._private, ours, stanza, share, _X25519_INFO)
