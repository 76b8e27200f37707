"""The envelope's recipients and identities: passphrase (Argon2id or scrypt), X25519 and
streaming ECIES (secp256k1, x25519) stanzas, each ending with a check value that lets an
identity find its own stanza without revealing to anyone else whom a stanza is for."""

from __future__ import annotations

import hmac
import struct
from collections.abc import Iterable, Sequence
from functools import partial
from typing import Literal

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from ...abc import Buffer
from ...errors import (
    AuthenticationError,
    FormatError,
    InvalidParameterError,
    InvalidPublicKeyError,
    UnsupportedFormatError,
)
from ...keys import (
    MAX_READ_PARAMS,
    MAX_SCRYPT_READ_PARAMS,
    MODERATE,
    Argon2Params,
    HoldsSecrets,
    PasswordParams,
    ScryptParams,
    SecretKey,
    as_secret_key,
    check_read_params,
    derive_key_from_password,
    hkdf,
    random_bytes,
)
from ...primitives import ChaCha20Poly1305Suite
from .. import _stanza, ecies
from .._bech32 import bech32_decode, bech32_encode
from .._stanza import (
    Identity,
    IdentityLike,
    KeyIdentity,
    PublicKey,
    Recipient,
    RecipientLike,
    Stanza,
)
from .._x25519 import PREFIXES, X25519Identity, X25519Recipient, ephemeral_exchange
from ._header import (
    _INFO,
    _PASSPHRASE_TYPES,
    _PREFIX_SIZES,
    _TYPE_BYTES,
    ARGON2ID,
    CHECK_SIZE,
    ECIES_SECP256K1,
    ECIES_X25519,
    MAC_SIZE,
    MAX_STANZAS,
    SCRYPT,
    X25519,
    EnvelopeHeader,
    _keys,
    _mac,
)

_ZERO_NONCE = bytes(12)
#: A passphrase stanza's prefix: salt, then Argon2id's ops and memory (KiB) or scrypt's
#: log2 N, r and p.
_ARGON2 = struct.Struct(">16sII")
_SCRYPT = struct.Struct(">16sBII")
_HRP_SECP256K1 = "sc-secp256k1-pub"
_HRP_SECP256K1_SECRET = "sc-secp256k1-secret-"


def _kek(kind: str, secret: bytes, salt: bytes) -> tuple[ChaCha20Poly1305Suite, bytes]:
    okm = hkdf(secret, salt=salt, info=_INFO + kind.encode(), length=32 + CHECK_SIZE)
    return ChaCha20Poly1305Suite(okm[:32]), okm[32:]


def _seal_stanza(kind: str, prefix: bytes, secret: bytes, salt: bytes, file_key: bytes) -> Stanza:
    aead, check = _kek(kind, secret, salt)
    wrapped = aead.seal(_ZERO_NONCE, file_key, bytes([_TYPE_BYTES[kind]]) + prefix)
    return Stanza((kind,), prefix + check + wrapped)


def _open_stanza(stanza: Stanza, secret: bytes, salt: bytes) -> bytes | None:
    """The file key; ``None`` if the stanza is not for this secret (check differs)."""
    n = _PREFIX_SIZES[stanza.kind]
    aead, check = _kek(stanza.kind, secret, salt)
    if not hmac.compare_digest(check, stanza.body[n : n + CHECK_SIZE]):
        return None
    aad = bytes([_TYPE_BYTES[stanza.kind]]) + stanza.body[:n]
    try:
        return aead.open(_ZERO_NONCE, stanza.body[n + CHECK_SIZE :], aad)
    except AuthenticationError:
        raise AuthenticationError(
            f"envelope {stanza.kind} stanza is addressed to this identity "
            "but its wrapped key does not open: the stanza was tampered with"
        ) from None


def _wrap_x25519(recipient: X25519Recipient, file_key: bytes) -> Stanza:
    """The envelope's x25519 stanza for one of the shared X25519 recipients."""
    public = recipient.public_bytes()
    share, shared = ephemeral_exchange(public)
    return _seal_stanza(X25519, share, shared, share + public, file_key)


def _unwrap_x25519(identity: X25519Identity, stanza: Stanza) -> bytes | None:
    """The file key from an x25519 or ecies-x25519 stanza for ``identity``, else ``None``.

    Raises :class:`InvalidPublicKeyError` for a low-order or invalid ephemeral key and
    :class:`AuthenticationError` for a stanza of ours that was tampered with.
    """
    share = stanza.body[:32]
    if stanza.kind == ECIES_X25519:
        key = ecies.decapsulate(identity.secret_key(), share, curve="x25519")
        return _open_stanza(stanza, key.secret_bytes(), share)
    if stanza.kind != X25519:
        return None
    shared = identity.exchange(share)
    if shared is None:
        raise InvalidPublicKeyError("envelope x25519 stanza has a low-order ephemeral key")
    return _open_stanza(stanza, shared, share + identity.recipient.public_bytes())


def _wrap(recipient: Recipient, file_key: bytes) -> list[Stanza]:
    """The stanzas ``recipient`` gets in an envelope (an X25519 key: the envelope's own)."""
    if isinstance(recipient, X25519Recipient):
        return [_wrap_x25519(recipient, file_key)]
    return recipient.wrap(file_key)


def _unwrap(identity: Identity, stanza: Stanza) -> bytes | None:
    """The file key ``identity`` finds in one envelope stanza (an X25519 key: by the
    envelope's own rule)."""
    if isinstance(identity, X25519Identity):
        return _unwrap_x25519(identity, stanza)
    return identity.unwrap([stanza])


EciesCurve = Literal["secp256k1", "x25519"]
_ECIES_KINDS: dict[str, str] = {"secp256k1": ECIES_SECP256K1, "x25519": ECIES_X25519}


def _ecies_curve(curve: str) -> EciesCurve:
    if curve not in _ECIES_KINDS:
        raise UnsupportedFormatError(
            f"envelope ECIES recipients use secp256k1 or x25519, not {curve!r}"
        )
    return "secp256k1" if curve == "secp256k1" else "x25519"


def _secp256k1_compressed(raw: bytes) -> bytes:
    key = (
        serialization.load_der_public_key(raw)
        if raw[:1] == b"\x30"
        else ec.EllipticCurvePublicKey.from_encoded_point(
            ec.SECP256K1(), b"\x04" + raw if len(raw) == 64 else raw
        )
    )
    return key.public_bytes(serialization.Encoding.X962, serialization.PublicFormat.CompressedPoint)


class EciesRecipient(PublicKey):
    """A public key for "streaming ECIES" stanzas (``ecies.encapsulate``).

    secp256k1 keys in any form :mod:`streamcrypt.codecs.ecies` takes (text:
    ``sc-secp256k1-pub1...``, compressed); x25519 keys of 32 bytes (their text,
    ``sc-x25519-pub1...``, reads as an :class:`X25519Recipient`). Raises
    :class:`InvalidPublicKeyError` for an invalid, off-curve or low-order key.
    """

    __slots__ = ("_curve",)

    def __init__(self, public_key: Buffer, *, curve: EciesCurve = "secp256k1") -> None:
        self._curve = _ecies_curve(curve)
        raw = bytes(public_key)
        ecies.encapsulate(raw, curve=self._curve)  # validates: raises InvalidPublicKeyError
        self._public = _secp256k1_compressed(raw) if self._curve == "secp256k1" else raw

    @classmethod
    def parse(cls, text: str) -> EciesRecipient:
        """Parse ``sc-secp256k1-pub1...``; raises FormatError."""
        hrp, data = bech32_decode(text)
        if hrp == _HRP_SECP256K1 and len(data) == 33:
            return cls(data, curve="secp256k1")
        raise FormatError("not a secp256k1 recipient (sc-secp256k1-pub1...)")

    @property
    def curve(self) -> EciesCurve:
        return self._curve

    def public_bytes(self) -> bytes:
        """The key: SEC1 compressed (secp256k1) or 32 raw bytes (x25519)."""
        return self._public

    def wrap(self, file_key: bytes) -> list[Stanza]:
        share, key = ecies.encapsulate(self._public, curve=self._curve, compress_ephemeral=True)
        kind = _ECIES_KINDS[self._curve]
        return [_seal_stanza(kind, share, key.secret_bytes(), share, file_key)]

    def __str__(self) -> str:
        hrp = _HRP_SECP256K1 if self._curve == "secp256k1" else PREFIXES["envelope"][0]
        return bech32_encode(hrp, self._public)

    def __repr__(self) -> str:
        return f"EciesRecipient({str(self)!r}, curve={self._curve!r})"


class EciesIdentity(KeyIdentity[EciesRecipient]):
    """A secp256k1 private key (``SC-SECP256K1-SECRET-1...``) for ECIES stanzas.

    (An x25519 ECIES stanza opens with its key's :class:`X25519Identity`.) ``repr``
    hides the secret; pickling raises :class:`TypeError`.
    """

    __slots__ = ("_raw",)

    kind = ECIES_SECP256K1

    def __init__(self, private_key: Buffer | SecretKey) -> None:
        raw = as_secret_key(private_key, 32, what="a secp256k1 private key").secret_bytes()
        self._raw = SecretKey(raw)
        public = ecies.public_key(raw, curve="secp256k1", compressed=True)
        self._recipient = EciesRecipient(public, curve="secp256k1")

    @classmethod
    def generate(cls) -> EciesIdentity:
        private, _ = ecies.generate_keypair("secp256k1")
        return cls(private)

    @classmethod
    def parse(cls, text: str) -> EciesIdentity:
        """Parse ``SC-SECP256K1-SECRET-1...``; raises :class:`FormatError`."""
        hrp, data = bech32_decode(text)
        if hrp == _HRP_SECP256K1_SECRET and len(data) == 32:
            return cls(data)
        raise FormatError("not a secp256k1 identity (SC-SECP256K1-SECRET-1...)")

    def to_string(self) -> str:
        """The secret key text. Handle with care."""
        return bech32_encode(_HRP_SECP256K1_SECRET, self._raw.secret_bytes(), upper=True)

    def secret_key(self) -> SecretKey:
        """The 32 private key bytes. Handle with care."""
        return self._raw

    def _unwrap_one(self, stanza: Stanza) -> bytes | None:
        """The file key from an ecies-secp256k1 stanza for this key, else ``None``.

        Raises :class:`InvalidPublicKeyError` for an invalid ephemeral key and
        :class:`AuthenticationError` for a stanza of ours that was tampered with.
        """
        share = stanza.body[:33]
        key = ecies.decapsulate(self._raw, share, curve="secp256k1")
        return _open_stanza(stanza, key.secret_bytes(), share)


class PassphraseRecipient(HoldsSecrets):
    """Wrap to a passphrase with Argon2id (``Argon2Params``) or scrypt (``ScryptParams``)."""

    __slots__ = ("_params", "_passphrase")

    def __init__(self, passphrase: str | Buffer, *, params: PasswordParams = MODERATE) -> None:
        if not isinstance(params, Argon2Params | ScryptParams):
            raise InvalidParameterError("params must be Argon2Params or ScryptParams")
        if isinstance(params, ScryptParams) and (params.log_n > 255 or params.r >= 1 << 32):
            raise InvalidParameterError("scrypt parameters do not fit the envelope stanza")
        self._passphrase = _stanza.passphrase_bytes(passphrase)
        self._params = params

    def wrap(self, file_key: bytes) -> list[Stanza]:
        salt = random_bytes(16)
        params = self._params
        if isinstance(params, Argon2Params):
            kind, prefix = ARGON2ID, _ARGON2.pack(salt, params.ops, params.mem // 1024)
        else:
            kind, prefix = SCRYPT, _SCRYPT.pack(salt, params.log_n, params.r, params.p)
        secret = derive_key_from_password(self._passphrase, salt, params=params)
        return [_seal_stanza(kind, prefix, secret.secret_bytes(), b"", file_key)]

    def __repr__(self) -> str:
        return f"PassphraseRecipient(<passphrase hidden>, params={self._params})"


class PassphraseIdentity(HoldsSecrets):
    """Open a passphrase stanza, refusing KDF parameters above the caps first.

    :meth:`unwrap` raises :class:`LimitExceededError` for parameters above
    ``max_params`` / ``max_scrypt`` and :class:`FormatError` for out-of-range ones.
    """

    __slots__ = ("_max_params", "_max_scrypt", "_passphrase")

    def __init__(
        self,
        passphrase: str | Buffer,
        *,
        max_params: Argon2Params = MAX_READ_PARAMS,
        max_scrypt: ScryptParams = MAX_SCRYPT_READ_PARAMS,
    ) -> None:
        self._passphrase = _stanza.passphrase_bytes(passphrase)
        self._max_params = max_params
        self._max_scrypt = max_scrypt

    @staticmethod
    def params_of(stanza: Stanza) -> tuple[bytes, PasswordParams]:
        """The salt and KDF parameters a passphrase stanza names (FormatError if invalid)."""
        try:
            if stanza.kind == ARGON2ID:
                salt, ops, mem_kib = _ARGON2.unpack_from(stanza.body)
                return salt, Argon2Params(ops, mem_kib * 1024)
            salt, log_n, r, p = _SCRYPT.unpack_from(stanza.body)
            if not 1 <= log_n <= 63:
                raise InvalidParameterError(f"scrypt log2 N must be 1..63, got {log_n}")
            return salt, ScryptParams(1 << log_n, r, p)
        except InvalidParameterError as exc:
            raise FormatError(f"envelope passphrase stanza has invalid parameters: {exc}") from None

    def unwrap(self, stanzas: Sequence[Stanza]) -> bytes | None:
        """The file key from the passphrase stanza, ``None`` for a wrong passphrase."""
        for stanza in stanzas:
            if stanza.kind in _PASSPHRASE_TYPES and len(stanza.args) == 1:
                salt, params = self.params_of(stanza)
                check_read_params(params, max_params=self._max_params, max_scrypt=self._max_scrypt)
                secret = derive_key_from_password(self._passphrase, salt, params=params)
                return _open_stanza(stanza, secret.secret_bytes(), b"")
        return None

    def __repr__(self) -> str:
        return "PassphraseIdentity(<passphrase hidden>)"


def parse_recipient(text: str) -> X25519Recipient | EciesRecipient:
    """``sc-x25519-pub1...`` (or the same key as ``age1...``) -> X25519Recipient;
    ``sc-secp256k1-pub1...`` -> EciesRecipient. Raises :class:`FormatError`."""
    hrp, _ = bech32_decode(text.strip())
    if hrp in (prefix for prefix, _ in PREFIXES.values()):
        return X25519Recipient.parse(text.strip())
    if hrp == _HRP_SECP256K1:
        return EciesRecipient.parse(text.strip())
    raise FormatError(f"unknown recipient type {hrp!r}; expected sc-x25519-pub or sc-secp256k1-pub")


def parse_identity(text: str) -> X25519Identity | EciesIdentity:
    """``SC-X25519-SECRET-1...`` (or the same key as ``AGE-SECRET-KEY-1...``) ->
    X25519Identity; ``SC-SECP256K1-SECRET-1...`` -> EciesIdentity. Raises
    :class:`FormatError` (the message never contains the key)."""
    hrp, _ = bech32_decode(text.strip())
    if hrp in (prefix for _, prefix in PREFIXES.values()):
        return X25519Identity.parse(text.strip())
    if hrp == _HRP_SECP256K1_SECRET:
        return EciesIdentity.parse(text.strip())
    raise FormatError("unknown identity type; expected SC-X25519-SECRET- or SC-SECP256K1-SECRET-")


_RECIPIENTS: _stanza.KeyList[Recipient] = _stanza.KeyList(
    "wrap",
    parse_recipient,
    "a recipient must be an sc-x25519-pub1... or sc-secp256k1-pub1... string or a Recipient",
    "an envelope needs at least one recipient or a passphrase",
)
_IDENTITIES: _stanza.KeyList[Identity] = _stanza.KeyList(
    "unwrap",
    parse_identity,
    "an identity must be an SC-X25519-SECRET-1... or SC-SECP256K1-SECRET-1... string or an Identity",
    "decrypting an envelope needs identities or a passphrase",
)


def _open_file_key(header: EnvelopeHeader, identities: Sequence[Identity], aad: bytes) -> bytes:
    """The file key (each stanza in turn, with each identity shown that stanza alone),
    once the header MAC checked (:class:`AuthenticationError`)."""
    file_key = _stanza.open_file_key(
        (partial(_unwrap, i, s) for s in header.stanzas for i in identities),
        lambda: (
            "no stanza of this envelope opens with the given identities or passphrase: "
            "wrong private key or passphrase, or not addressed to you"
        ),
    )
    mac_key, _ = _keys(file_key)
    body = header.raw[:-MAC_SIZE]
    if not hmac.compare_digest(_mac(mac_key, body, aad), header.raw[-MAC_SIZE:]):
        raise AuthenticationError(
            "envelope header did not authenticate: wrong associated data or a tampered header"
        )
    return file_key


# --------------------------------------------------------------------------- streams


def _recipient_list(
    recipients: Iterable[RecipientLike] | RecipientLike,
    passphrase: str | Buffer | None,
    params: PasswordParams,
) -> list[Recipient]:
    out = _RECIPIENTS(recipients, passphrase, lambda p: PassphraseRecipient(p, params=params))
    if sum(isinstance(r, PassphraseRecipient) for r in out) > 1:
        raise InvalidParameterError("an envelope takes at most one passphrase")
    if len(out) > MAX_STANZAS:
        raise InvalidParameterError(f"an envelope takes at most {MAX_STANZAS} recipients")
    return out


def _identity_list(
    identities: Iterable[IdentityLike] | IdentityLike,
    passphrase: str | Buffer | None,
    max_params: Argon2Params,
    max_scrypt: ScryptParams,
) -> list[Identity]:
    return _IDENTITIES(
        identities,
        passphrase,
        lambda p: PassphraseIdentity(p, max_params=max_params, max_scrypt=max_scrypt),
    )
