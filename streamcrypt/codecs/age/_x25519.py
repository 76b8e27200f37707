"""age's X25519 recipients (``age1...``) and identities (``AGE-SECRET-KEY-1...``), and
the X25519 wrapping ssh-ed25519 shares: HKDF-SHA-256 over the shared secret (salt
``share || recipient``), then ChaCha20-Poly1305 with a zero nonce."""

from __future__ import annotations

from collections.abc import Sequence

from cryptography.hazmat.primitives.asymmetric import x25519

from ...errors import FormatError, InvalidPublicKeyError
from ...keys import hkdf
from .._x25519 import X25519PublicText, X25519SecretText, x25519_exchange
from ._header import Stanza, _b64encode, _check_shape, _stanza_arg, _unwrap_key, _wrap_key

__all__ = ["X25519Identity", "X25519Recipient"]

_X25519_INFO = b"age-encryption.org/v1/X25519"
_HRP_X25519 = "age"
_HRP_X25519_SECRET = "age-secret-key-"


def _dh_wrap(
    public: bytes, file_key: bytes, info: bytes, tweak: x25519.X25519PrivateKey | None = None
) -> tuple[bytes, bytes]:
    """X25519 to ``public`` from a fresh ephemeral key (the secret then multiplied by
    ``tweak`` for ssh-ed25519): the share and the wrapped file key. Raises
    :class:`InvalidPublicKeyError` for a low-order ``public``."""
    ephemeral = x25519.X25519PrivateKey.generate()
    share = ephemeral.public_key().public_bytes_raw()
    shared = x25519_exchange(ephemeral, public)
    if shared is not None and tweak is not None:
        shared = x25519_exchange(tweak, shared)
    if shared is None:
        raise InvalidPublicKeyError("the X25519 recipient is a low-order point")
    key = hkdf(shared, salt=share + public, info=info)
    return share, _wrap_key(key, file_key)


def _dh_unwrap(
    private: x25519.X25519PrivateKey,
    public: bytes,
    stanza: Stanza,
    share: bytes,
    info: bytes,
    tweak: x25519.X25519PrivateKey | None = None,
) -> bytes | None:
    """The inverse of :func:`_dh_wrap` for ``private`` (whose public key is ``public``):
    the file key, or ``None`` when the stanza does not open. Raises :class:`FormatError`
    for a low-order share."""
    shared = x25519_exchange(private, share)
    if shared is not None and tweak is not None:
        shared = x25519_exchange(tweak, shared)
    if shared is None:
        raise FormatError(f"age {stanza.kind} stanza has a low-order ephemeral share")
    key = hkdf(shared, salt=share + public, info=info)
    return _unwrap_key(key, stanza.body)


class X25519Recipient(X25519PublicText):
    """An X25519 recipient (``age1...``): a 32-byte Curve25519 public key."""

    HRP = _HRP_X25519
    DESCRIPTION = "an age X25519 recipient (age1...)"
    __slots__ = ()

    def wrap(self, file_key: bytes) -> list[Stanza]:
        """One X25519 stanza; raises :class:`InvalidPublicKeyError` for a low-order key."""
        share, body = _dh_wrap(self._public, file_key, _X25519_INFO)
        return [Stanza(("X25519", _b64encode(share).decode()), body)]


class X25519Identity(X25519SecretText[X25519Recipient]):
    """An X25519 identity (``AGE-SECRET-KEY-1...``). Its repr shows only the recipient."""

    SECRET_HRP = _HRP_X25519_SECRET
    DESCRIPTION = "an age X25519 identity (AGE-SECRET-KEY-1...)"
    RECIPIENT = X25519Recipient
    __slots__ = ()

    def unwrap(self, stanzas: Sequence[Stanza]) -> bytes | None:
        """The file key from an X25519 stanza for this identity, else ``None``.

        Raises :class:`FormatError` for a malformed X25519 stanza or a low-order share.
        """
        ours = self._recipient.public_bytes()
        for stanza in stanzas:
            if stanza.kind != "X25519":
                continue
            _check_shape(stanza, 2)
            share = _stanza_arg(stanza, 1, 32)
            file_key = _dh_unwrap(self._private, ours, stanza, share, _X25519_INFO)
            if file_key is not None:
                return file_key
        return None
