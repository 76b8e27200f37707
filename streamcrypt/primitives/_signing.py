"""Ed25519 signatures (RFC 8032), one-shot and Ed25519ph over a stream as a tap.

Theory of operation
-------------------
Pure Ed25519 (:class:`Ed25519PrivateKey` / :class:`Ed25519PublicKey`) signs a whole
message held in memory, through OpenSSL (``cryptography``). A stream too large to hold
is signed with Ed25519ph, the pre-hashed variant of RFC 8032 section 5.1 (empty
context): the message goes through SHA-512 as it passes, and the signature is made over
the digest at the end. :class:`Ed25519phSigner` and :class:`Ed25519phVerifier` are taps:
``update(data)`` returns ``data`` unchanged, so they can stand anywhere in a pipeline;
the kernel is libsodium's incremental ``crypto_sign_ed25519ph`` (PyNaCl). An Ed25519ph
signature is not an Ed25519 signature of the same message: the two never verify
as each other.
"""

from __future__ import annotations

from typing import Self

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric import ed25519
from nacl import bindings as _sodium
from nacl import exceptions as _nacl_exc

from ..abc import Buffer, Lifecycle, State, as_bytes
from ..errors import (
    InvalidParameterError,
    InvalidPublicKeyError,
    InvalidSignatureError,
    NotFinalizedError,
)
from ..keys import HoldsSecrets, SecretKey, key_bytes

#: Bytes of an Ed25519 or Ed25519ph signature.
ED25519_SIGNATURE_SIZE = 64
_KEY = 32


def _bytes_of(data: Buffer, what: str) -> bytes:
    return as_bytes(data, what)


class _RawPublicKey:
    """A public key held as its 32 raw bytes: ``bytes(key)``, equality and hash by value
    (against keys of the same class), a ``repr`` in hex."""

    __slots__ = ("_raw",)

    _raw: bytes

    def __init__(self, data: Buffer) -> None:
        raise NotImplementedError

    @classmethod
    def _of(cls, key: Self | Buffer) -> Self:
        """``key`` itself, or the key of class ``cls`` its bytes encode."""
        return key if isinstance(key, cls) else cls(key)  # type: ignore[arg-type]

    def public_bytes(self) -> bytes:
        """The 32-byte encoding of the key."""
        return self._raw

    __bytes__ = public_bytes

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _RawPublicKey) or type(other) is not type(self):
            return NotImplemented
        return self._raw == other._raw

    def __hash__(self) -> int:
        return hash(self._raw)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._raw.hex()})"


class Ed25519PublicKey(_RawPublicKey):
    """An Ed25519 verification key (32 bytes).

    Construction raises :class:`InvalidPublicKeyError` for a wrong length;
    :meth:`verify` raises :class:`InvalidSignatureError`.
    """

    __slots__ = ("_key",)

    def __init__(self, data: Buffer) -> None:
        raw = _bytes_of(data, "an Ed25519 public key")
        if len(raw) != _KEY:
            raise InvalidPublicKeyError(f"an Ed25519 public key must be 32 bytes, got {len(raw)}")
        # OpenSSL verifies under a small-order key, where one forged signature (R the
        # identity, S = 0) passes for every message; libsodium's check refuses such keys,
        # points off the curve and non-canonical encodings.
        if not _sodium.crypto_core_ed25519_is_valid_point(raw):
            raise InvalidPublicKeyError(
                "not a valid Ed25519 public key: off the curve, of small order, or "
                "not canonically encoded"
            )
        self._raw = raw
        self._key = ed25519.Ed25519PublicKey.from_public_bytes(raw)

    def verify(self, message: Buffer, signature: Buffer) -> None:
        """Check ``signature`` over ``message``; raises :class:`InvalidSignatureError`."""
        sig = _bytes_of(signature, "an Ed25519 signature")
        if len(sig) != ED25519_SIGNATURE_SIZE:
            raise InvalidSignatureError(
                f"an Ed25519 signature must be 64 bytes, got {len(sig)}; check it was not "
                "truncated or padded"
            )
        try:
            self._key.verify(sig, _bytes_of(message, "the message"))
        except InvalidSignature:
            raise InvalidSignatureError(
                "Ed25519 signature did not verify: wrong public key, altered message or "
                "altered signature"
            ) from None


class Ed25519PrivateKey(HoldsSecrets):
    """An Ed25519 signing key from its 32-byte seed; ``repr`` shows only the public key.

    Construction raises :class:`InvalidKeySizeError` for a seed that is not 32 bytes.
    """

    __slots__ = ("_key", "_public", "_seed")

    _pickle_advice = "store its seed deliberately"

    def __init__(self, seed: Buffer | SecretKey) -> None:
        raw = key_bytes(seed, "an Ed25519 seed", _KEY)
        self._seed = SecretKey(raw)
        self._key = ed25519.Ed25519PrivateKey.from_private_bytes(raw)
        self._public = Ed25519PublicKey(self._key.public_key().public_bytes_raw())

    @classmethod
    def generate(cls) -> Ed25519PrivateKey:
        """A fresh random signing key."""
        return cls(SecretKey.generate(_KEY))

    def sign(self, message: Buffer) -> bytes:
        """The 64-byte Ed25519 signature of ``message`` (deterministic)."""
        return self._key.sign(_bytes_of(message, "the message"))

    def public_key(self) -> Ed25519PublicKey:
        return self._public

    def public_bytes(self) -> bytes:
        """The 32-byte public key."""
        return self._public.public_bytes()

    def secret_bytes(self) -> bytes:
        """The 32-byte seed. Handle with care."""
        return self._seed.secret_bytes()

    def _libsodium_secret(self) -> bytes:
        return self._seed.secret_bytes() + self._public.public_bytes()

    def __repr__(self) -> str:
        return f"Ed25519PrivateKey(<seed hidden>, public={self._public.public_bytes().hex()})"

    __str__ = __repr__


def ed25519_verify(
    public_key: Ed25519PublicKey | Buffer, message: Buffer, signature: Buffer
) -> None:
    """Check an Ed25519 signature.

    Raises :class:`InvalidSignatureError` if it does not verify and
    :class:`InvalidPublicKeyError` for a malformed public key.
    """
    Ed25519PublicKey._of(public_key).verify(message, signature)


class _PhTap(Lifecycle):
    __slots__ = ("_ph",)

    def _init_ph(self) -> None:
        self._init_lifecycle()
        self._ph = _sodium.crypto_sign_ed25519ph_state()

    def update(self, data: Buffer, /) -> bytes:
        """Hash ``data`` and return it unchanged."""
        self._check()
        chunk = _bytes_of(data, "data")
        if chunk:
            _sodium.crypto_sign_ed25519ph_update(self._ph, chunk)
        return chunk


class Ed25519phSigner(HoldsSecrets, _PhTap):
    """A tap that signs what passes through with Ed25519ph.

    ``update(data) -> data``; ``finalize() -> b""`` makes the signature, then
    :meth:`signature` (also :meth:`digest`) returns its 64 bytes. Calls after
    ``finalize()`` raise :class:`AlreadyFinalizedError`.
    """

    __slots__ = ("_key", "_signature")

    def __init__(self, private_key: Ed25519PrivateKey | Buffer | SecretKey) -> None:
        self._key = (
            private_key
            if isinstance(private_key, Ed25519PrivateKey)
            else Ed25519PrivateKey(private_key)
        )
        self._signature: bytes | None = None
        self._init_ph()

    def finalize(self) -> bytes:
        """Sign the data seen; returns ``b""`` (the tap has nothing more to pass on)."""
        self._check()
        self._signature = _sodium.crypto_sign_ed25519ph_final_create(
            self._ph, self._key._libsodium_secret()
        )
        self._finish()
        return b""

    def signature(self) -> bytes:
        """The 64-byte Ed25519ph signature; raises :class:`NotFinalizedError` before finalize."""
        if self._signature is None:
            raise NotFinalizedError("call finalize() before asking for the signature")
        return self._signature

    digest = signature

    def hexdigest(self) -> str:
        return self.signature().hex()

    def public_key(self) -> Ed25519PublicKey:
        return self._key.public_key()

    def __repr__(self) -> str:
        return f"Ed25519phSigner(public={self._key.public_bytes().hex()}, state={self.state.value})"


class Ed25519phVerifier(_PhTap):
    """A tap that checks an Ed25519ph signature over what passed through.

    ``update(data) -> data``; ``finalize()`` raises :class:`InvalidSignatureError` if the
    signature (given here or to ``finalize``) does not match, and leaves the verifier
    broken. Data passed on before ``finalize`` is NOT yet authenticated: callers must
    not act on it until ``finalize()`` returns.
    """

    __slots__ = ("_public", "_signature")

    def __init__(
        self, public_key: Ed25519PublicKey | Buffer, signature: Buffer | None = None
    ) -> None:
        self._public = Ed25519PublicKey._of(public_key)
        self._signature = None if signature is None else _bytes_of(signature, "a signature")
        self._init_ph()

    def finalize(self, signature: Buffer | None = None) -> bytes:
        """Verify; returns ``b""``. Raises :class:`InvalidSignatureError` and
        :class:`InvalidParameterError` if no signature was given at all."""
        self._check()
        if signature is not None:
            self._signature = _bytes_of(signature, "a signature")
        sig = self._signature
        if sig is None:
            raise self._break(
                InvalidParameterError(
                    "Ed25519phVerifier needs the signature, at construction or at finalize()"
                )
            )
        if len(sig) != ED25519_SIGNATURE_SIZE:
            raise self._break(
                InvalidSignatureError(f"an Ed25519ph signature must be 64 bytes, got {len(sig)}")
            )
        try:
            _sodium.crypto_sign_ed25519ph_final_verify(self._ph, sig, self._public.public_bytes())
        except _nacl_exc.BadSignatureError:
            raise self._break(
                InvalidSignatureError(
                    "Ed25519ph signature did not verify: wrong public key, altered stream or "
                    "altered signature"
                )
            ) from None
        self._finish()
        return b""

    def verified(self) -> bool:
        """True once ``finalize()`` has checked the signature."""
        return self._state is State.FINALIZED

    def __repr__(self) -> str:
        return (
            f"Ed25519phVerifier(public={self._public.public_bytes().hex()}, "
            f"state={self.state.value})"
        )
