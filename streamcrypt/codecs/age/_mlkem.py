"""age's hybrid post-quantum recipients (``age1pq1...``) and identities
(``AGE-SECRET-KEY-PQ-1...``): HPKE with the ML-KEM-768 + X25519 KEM."""

from __future__ import annotations

import hashlib
from typing import ClassVar

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hpke
from cryptography.hazmat.primitives.asymmetric import x25519

from ...abc import Buffer
from ...errors import FormatError, InvalidKeySizeError, InvalidPublicKeyError
from ...keys import SecretKey, as_secret_key, random_bytes
from .._bech32 import bech32_decode, bech32_encode
from .._stanza import KeyIdentity, PublicKey, Stanza, b64encode, check_shape, stanza_arg

_PQ_INFO = b"age-encryption.org/mlkem768x25519"
_PQ_ENC_SIZE = 1120
_PQ_PUBLIC_SIZE = 1184 + 32
_HRP_PQ = "age1pq"
_HRP_PQ_SECRET = "age-secret-key-pq-"

_PQ_SUITE = hpke.Suite(hpke.KEM.MLKEM768_X25519, hpke.KDF.HKDF_SHA256, hpke.AEAD.CHACHA20_POLY1305)


class MLKEM768X25519Recipient(PublicKey):
    """A hybrid post-quantum recipient (``age1pq1...``): ML-KEM-768 || X25519 public keys."""

    __slots__ = ("_key",)

    #: The stanza type it writes (its labels: ``_plugin_process._KIND_LABELS``).
    kind: ClassVar[str] = "mlkem768x25519"

    def __init__(self, public_key: Buffer) -> None:
        raw = bytes(public_key)
        if len(raw) != _PQ_PUBLIC_SIZE:
            raise InvalidKeySizeError(
                f"an ML-KEM-768 + X25519 public key must be {_PQ_PUBLIC_SIZE} bytes, got {len(raw)}"
            )
        from cryptography.hazmat.primitives.asymmetric import mlkem

        try:
            self._key = hpke.MLKEM768X25519PublicKey(
                mlkem.MLKEM768PublicKey.from_public_bytes(raw[:1184]),
                x25519.X25519PublicKey.from_public_bytes(raw[1184:]),
            )
        except ValueError:
            raise InvalidPublicKeyError("not a valid ML-KEM-768 + X25519 public key") from None
        self._public = raw

    @classmethod
    def parse(cls, text: str) -> MLKEM768X25519Recipient:
        """Parse ``age1pq1...``; raises :class:`FormatError`."""
        hrp, data = bech32_decode(text)
        if hrp != _HRP_PQ or len(data) != _PQ_PUBLIC_SIZE:
            raise FormatError("not an age post-quantum recipient (age1pq1... of 1216 bytes)")
        try:
            return cls(data)
        except InvalidPublicKeyError as exc:
            raise FormatError(str(exc)) from None

    def public_bytes(self) -> bytes:
        return self._public

    def wrap(self, file_key: bytes) -> list[Stanza]:
        sealed = _PQ_SUITE.encrypt(file_key, self._key, info=_PQ_INFO)
        enc, body = sealed[:_PQ_ENC_SIZE], sealed[_PQ_ENC_SIZE:]
        return [Stanza((MLKEM768X25519Recipient.kind, b64encode(enc).decode()), body)]

    def __str__(self) -> str:
        return bech32_encode(_HRP_PQ, self._public)

    def __repr__(self) -> str:
        return f"MLKEM768X25519Recipient({str(self)[:16]!r}...)"


class MLKEM768X25519Identity(KeyIdentity[MLKEM768X25519Recipient]):
    """A hybrid post-quantum identity (``AGE-SECRET-KEY-PQ-1...``): a 32-byte seed.

    The seed expands with SHAKE-256 to 96 bytes: the ML-KEM-768 seed (d || z) and the
    X25519 private key, as the MLKEM768-X25519 KEM of filippo.io/hpke-pq (X-Wing) does.
    """

    __slots__ = ("_dh", "_private", "_seed")

    kind = MLKEM768X25519Recipient.kind

    def __init__(self, seed: Buffer | SecretKey) -> None:
        self._seed = as_secret_key(seed, 32, what="a post-quantum identity seed").secret_bytes()
        expanded = hashlib.shake_256(self._seed).digest(96)
        from cryptography.hazmat.primitives.asymmetric import mlkem

        kem = mlkem.MLKEM768PrivateKey.from_seed_bytes(expanded[:64])
        dh = x25519.X25519PrivateKey.from_private_bytes(expanded[64:])
        self._private = hpke.MLKEM768X25519PrivateKey(kem, dh)
        self._dh = dh
        self._recipient = MLKEM768X25519Recipient(
            kem.public_key().public_bytes_raw() + dh.public_key().public_bytes_raw()
        )

    @classmethod
    def generate(cls) -> MLKEM768X25519Identity:
        return cls(random_bytes(32))

    @classmethod
    def parse(cls, text: str) -> MLKEM768X25519Identity:
        """Parse ``AGE-SECRET-KEY-PQ-1...``; raises :class:`FormatError`."""
        hrp, data = bech32_decode(text)
        if hrp != _HRP_PQ_SECRET or len(data) != 32:
            raise FormatError("not an age post-quantum identity (AGE-SECRET-KEY-PQ-1...)")
        return cls(data)

    def to_string(self) -> str:
        """The secret key string ``AGE-SECRET-KEY-PQ-1...``. Handle with care."""
        return bech32_encode(_HRP_PQ_SECRET, self._seed, upper=True)

    def _unwrap_one(self, stanza: Stanza) -> bytes | None:
        """The file key from an ``mlkem768x25519`` stanza for this identity, else ``None``.

        Raises :class:`FormatError` for a malformed stanza of that type, or one whose
        X25519 share is low-order (an all-zero shared secret).
        """
        check_shape(stanza, 2)
        enc = stanza_arg(stanza, 1, _PQ_ENC_SIZE)
        try:
            self._dh.exchange(x25519.X25519PublicKey.from_public_bytes(enc[-32:]))
        except ValueError:
            raise FormatError("age mlkem768x25519 stanza has a low-order X25519 share") from None
        try:
            return _PQ_SUITE.decrypt(enc + stanza.body, self._private, info=_PQ_INFO)
        except (InvalidTag, ValueError):
            return None
