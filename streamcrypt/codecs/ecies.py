"""ECIES compatible byte for byte with ``eciespy`` (and its siblings eciesrs and eciesjs).

Theory of operation
-------------------
A message is sealed to a recipient's public key with a fresh ephemeral key pair::

    shared  = point(ephemeral_private * recipient_public)
    key     = HKDF-SHA256(ikm = ephemeral_public || shared, salt = "", info = "", L = 32)
    message = ephemeral_public || nonce || tag || ciphertext

and opened with ``shared = point(recipient_private * ephemeral_public)``. The details
follow eciespy 0.4 exactly:

* ``secp256k1``: the ephemeral key on the wire is SEC1, uncompressed (65 bytes) or with
  ``compress_ephemeral`` compressed (33 bytes). The HKDF input is the *full* shared point,
  not only its x-coordinate, and both points in it are encoded compressed (33 + 33
  bytes) when ``compress_hkdf`` is set, otherwise uncompressed (65 + 65 bytes),
  whatever form the ephemeral key had on the wire.
* ``x25519``: RFC 7748 keys; the shared point is the 32-byte X25519 output. The
  compression flags change nothing (every key is 32 bytes).
* ``ed25519``: the recipient key is an Ed25519 *verification* key, and the private key
  an Ed25519 seed. The agreement runs on the Edwards curve itself (no conversion to
  X25519): the scalar is the clamped first half of SHA-512(seed), as in Ed25519 signing,
  and the shared point is encoded as an Ed25519 public key (32 bytes).
* ``aes-256-gcm`` with a 12- or 16-byte random nonce (eciespy's default is 16: GCM then
  derives its counter block through GHASH), or ``xchacha20`` (XChaCha20-Poly1305, always
  a 24-byte nonce; ``nonce_length`` is ignored, as eciespy ignores it). The 16-byte tag
  comes *before* the ciphertext.

Keys are accepted as raw bytes (``bytes``, ``bytearray``, ``memoryview``) or as hex
strings with an optional ``0x`` prefix, like eciespy; private keys also as
:class:`~streamcrypt.keys.SecretKey`. Forms:

* secp256k1 public: 65 bytes ``04||x||y``, 33 bytes ``02|03||x``, 64 bytes ``x||y``
  (Ethereum style), or a DER SubjectPublicKeyInfo; private: 32 bytes, big endian, in
  ``1..n-1``.
* x25519 public and private: 32 bytes (RFC 7748).
* ed25519 public: 32 bytes (a point of the prime-order subgroup); private: the 32-byte seed.

Where this is stricter than eciespy: hybrid SEC1 points (``06``/``07``) and Ed25519
points outside the prime-order subgroup are refused with :class:`InvalidPublicKeyError`
(eciespy's backends accept them), and an X25519 point of low order (all-zero shared
secret) is refused. For secp256k1, the full shared point is recovered from two x-only
ECDH computations in OpenSSL (for ``d`` and ``d + 1``) and a few modular multiplications
in Python integers to pick the sign of ``y``; Python integer arithmetic is not constant
time.

Streaming code reuses the key agreement through :func:`encapsulate` (public key ->
ephemeral public bytes and a 32-byte key) and :func:`decapsulate` (private key and
ephemeral public bytes -> the same key).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeAlias, TypeVar, cast, get_args

from cryptography.exceptions import InvalidTag, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, x25519
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from nacl import bindings as _sodium
from nacl import exceptions as _nacl_exc

from ..abc import Buffer, as_bytes
from ..errors import (
    AuthenticationError,
    FormatError,
    InvalidKeySizeError,
    InvalidParameterError,
    InvalidPublicKeyError,
    UnsupportedFormatError,
)
from ..keys import SecretKey, hkdf, random_bytes
from ..primitives import XChaCha20Poly1305

__all__ = [
    "CONFIGS",
    "Cipher",
    "Curve",
    "EciesConfig",
    "NonceLength",
    "PrivateKeyInput",
    "PublicKeyInput",
    "decapsulate",
    "decrypt",
    "ecdh",
    "encapsulate",
    "encrypt",
    "generate_keypair",
    "public_key",
    "shared_point",
]

#: The curves eciespy offers.
Curve = Literal["secp256k1", "x25519", "ed25519"]
#: The symmetric ciphers eciespy offers (AES-256-GCM, XChaCha20-Poly1305).
Cipher = Literal["aes-256-gcm", "xchacha20"]
#: AES-GCM nonce lengths eciespy offers (16 is its default).
NonceLength = Literal[12, 16]

_TAG = 16
_XCHACHA_NONCE = 24
_CIPHER_ALIASES = {"xchacha20-poly1305": "xchacha20"}

#: A public key: raw bytes, or hex text with an optional ``0x`` prefix.
PublicKeyInput: TypeAlias = Buffer | str
#: A private key: raw bytes, hex text with an optional ``0x`` prefix, or a SecretKey.
PrivateKeyInput: TypeAlias = Buffer | str | SecretKey


# --------------------------------------------------------------------------- key input


def _decode(key: Buffer | str | SecretKey, what: str, error: type[InvalidParameterError]) -> bytes:
    if isinstance(key, SecretKey):
        return key.secret_bytes()
    if isinstance(key, str):
        text = key[2:] if key[:2] in ("0x", "0X") else key
        try:
            return bytes.fromhex(text)
        except ValueError:
            raise error(f"{what} is not valid hex (an optional 0x prefix is allowed)") from None
    if isinstance(key, bytes | bytearray | memoryview):
        return bytes(key)
    raise error(f"{what} must be bytes or a hex string, got {type(key).__name__}")


# --------------------------------------------------------------------------- curves

_SK = TypeVar("_SK")
_PK = TypeVar("_PK")


class _Curve(Generic[_SK, _PK]):
    """What ECIES needs of a curve; ``_SK`` / ``_PK`` are its parsed key types."""

    name: str

    def ephemeral_size(self, compressed: bool) -> int:
        return 32

    def generate(self) -> bytes:
        return random_bytes(32)

    def private(self, raw: bytes) -> _SK:
        raise NotImplementedError

    def public_of(self, sk: _SK, compressed: bool) -> bytes:
        raise NotImplementedError

    def load_public(self, data: bytes) -> _PK:
        raise NotImplementedError

    def encode_public(self, pk: _PK, compressed: bool) -> bytes:
        raise NotImplementedError

    def ecdh(self, sk: _SK, pk: _PK) -> bytes:
        raise NotImplementedError

    def shared_point(self, sk: _SK, pk: _PK, compressed: bool) -> bytes:
        """The shared point as eciespy's HKDF input encodes it."""
        return self.ecdh(sk, pk)


def _libsecp256k1() -> Any:
    """coincurve (libsecp256k1), imported on first use: only secp256k1 needs it."""
    try:
        import coincurve
    except ModuleNotFoundError as exc:  # pragma: no cover - the test extra installs it
        raise ModuleNotFoundError(
            "ECIES over secp256k1 runs on libsecp256k1 through coincurve, which is not "
            "installed: pip install 'streamcrypt[ecies]'",
            name=exc.name,
        ) from exc
    return coincurve


class _Secp256k1(_Curve[Any, Any]):
    """secp256k1 through libsecp256k1 (``coincurve``): every operation on a private key
    (range check, public key, the full shared point) runs in its constant-time C code;
    ``cryptography`` only reads DER public keys."""

    name = "secp256k1"

    def ephemeral_size(self, compressed: bool) -> int:
        return 33 if compressed else 65

    def generate(self) -> bytes:
        while True:  # 32 random bytes in 1..n-1 (the range checked by libsecp256k1)
            raw = random_bytes(32)
            try:
                _libsecp256k1().PrivateKey(raw)
            except ValueError:
                continue
            return raw

    def private(self, raw: bytes) -> Any:
        try:
            return _libsecp256k1().PrivateKey(bytes(raw))
        except ValueError:
            raise InvalidParameterError(
                "secp256k1 private key out of range: it must be an integer in 1..n-1"
            ) from None

    def public_of(self, sk: Any, compressed: bool) -> bytes:
        encoded: bytes = sk.public_key.format(compressed=compressed)
        return encoded

    def load_public(self, data: bytes) -> Any:
        if len(data) == 64:
            data = b"\x04" + data
        if len(data) in (33, 65) and data[0] in (2, 3, 4):
            if (data[0] == 4) != (len(data) == 65):
                raise InvalidPublicKeyError(
                    f"secp256k1 public key prefix {data[0]:#04x} does not fit its length {len(data)}"
                )
            try:
                return _libsecp256k1().PublicKey(as_bytes(data, "data"))
            except ValueError:
                raise InvalidPublicKeyError(
                    "secp256k1 public key is not a point on the curve"
                ) from None
        if data[:1] == b"\x30":
            point = self._load_der(data).public_bytes(
                serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
            )
            return _libsecp256k1().PublicKey(point)
        raise InvalidPublicKeyError(
            f"secp256k1 public key must be 33, 64 or 65 bytes of SEC1 or a DER "
            f"SubjectPublicKeyInfo; got {len(data)} bytes"
        )

    def _load_der(self, data: bytes) -> ec.EllipticCurvePublicKey:
        try:
            key = serialization.load_der_public_key(data)
        except (ValueError, UnsupportedAlgorithm):
            raise InvalidPublicKeyError(
                "DER public key is malformed, uses unnamed curve parameters, or is not on its curve"
            ) from None
        if not isinstance(key, ec.EllipticCurvePublicKey) or key.curve.name != self.name:
            raise InvalidPublicKeyError("DER public key is not a secp256k1 key")
        return key

    def ecdh(self, sk: Any, pk: Any) -> bytes:
        """The standard ECDH secret: the x-coordinate of d*Q, 32 bytes."""
        return self.shared_point(sk, pk, False)[1:33]

    def shared_point(self, sk: Any, pk: Any, compressed: bool) -> bytes:
        """SEC1 encoding of the full point d*Q (eciespy feeds it to HKDF)."""
        point: bytes = pk.multiply(sk.secret).format(compressed=compressed)
        return point

    def encode_public(self, pk: Any, compressed: bool) -> bytes:
        encoded: bytes = pk.format(compressed=compressed)
        return encoded


class _X25519(_Curve[x25519.X25519PrivateKey, bytes]):
    """X25519 (RFC 7748) through OpenSSL; low-order points are refused."""

    name = "x25519"

    def private(self, raw: bytes) -> x25519.X25519PrivateKey:
        return x25519.X25519PrivateKey.from_private_bytes(raw)

    def public_of(self, sk: x25519.X25519PrivateKey, compressed: bool) -> bytes:
        return sk.public_key().public_bytes_raw()

    def load_public(self, data: bytes) -> bytes:
        if len(data) != 32:
            raise InvalidPublicKeyError(f"an x25519 public key must be 32 bytes, got {len(data)}")
        return data

    def ecdh(self, sk: x25519.X25519PrivateKey, pk: bytes) -> bytes:
        try:
            return sk.exchange(x25519.X25519PublicKey.from_public_bytes(pk))
        except ValueError:
            raise InvalidPublicKeyError(
                "x25519 public key is a low-order point (the shared secret would be all zeros)"
            ) from None

    def encode_public(self, pk: bytes, compressed: bool) -> bytes:
        return pk


class _Ed25519(_Curve[bytes, bytes]):
    """ECDH on edwards25519 with Ed25519 keys, as eciespy does (libsodium kernels)."""

    name = "ed25519"

    def private(self, raw: bytes) -> bytes:  # the seed
        return raw

    def public_of(self, seed: bytes, compressed: bool) -> bytes:
        return ed25519.Ed25519PrivateKey.from_private_bytes(seed).public_key().public_bytes_raw()

    def load_public(self, data: bytes) -> bytes:
        if len(data) != 32:
            raise InvalidPublicKeyError(f"an ed25519 public key must be 32 bytes, got {len(data)}")
        if not _sodium.crypto_core_ed25519_is_valid_point(data):
            raise InvalidPublicKeyError(
                "ed25519 public key is not a canonical point of the prime-order subgroup"
            )
        return data

    def ecdh(self, seed: bytes, pk: bytes) -> bytes:
        scalar = bytearray(hashlib.sha512(seed).digest()[:32])
        scalar[0] &= 0xF8
        scalar[31] = (scalar[31] & 0x7F) | 0x40
        try:
            return _sodium.crypto_scalarmult_ed25519_noclamp(bytes(scalar), pk)
        except _nacl_exc.CryptoError:
            raise InvalidPublicKeyError("ed25519 public key gave the identity point") from None

    def encode_public(self, pk: bytes, compressed: bool) -> bytes:
        return pk


_CURVES: dict[str, _Curve[Any, Any]] = {c.name: c for c in (_Secp256k1(), _X25519(), _Ed25519())}


def _curve(name: str) -> _Curve[Any, Any]:
    try:
        return _CURVES[name]
    except (KeyError, TypeError):
        raise UnsupportedFormatError(
            f"unknown ECIES curve {name!r}; supported: {', '.join(_CURVES)}"
        ) from None


# --------------------------------------------------------------------------- config


@dataclass(frozen=True, slots=True)
class EciesConfig:
    """One eciespy ``Config``: curve, cipher, AES nonce length and the compression flags.

    Raises :class:`UnsupportedFormatError` for an unknown curve or cipher and
    :class:`InvalidParameterError` for a nonce length other than 12 or 16.
    """

    curve: Curve = "secp256k1"
    cipher: Cipher = "aes-256-gcm"
    nonce_length: NonceLength = 16
    compress_ephemeral: bool = False
    compress_hkdf: bool = False

    def __post_init__(self) -> None:
        _curve(self.curve)
        cipher = _CIPHER_ALIASES.get(self.cipher, self.cipher)
        if cipher not in get_args(Cipher):
            raise UnsupportedFormatError(
                f"unknown ECIES cipher {self.cipher!r}; supported: aes-256-gcm, xchacha20"
            )
        object.__setattr__(self, "cipher", cipher)
        if self.nonce_length not in get_args(NonceLength):
            raise InvalidParameterError(
                f"ECIES AES-GCM nonce length must be 12 or 16, got {self.nonce_length!r}"
            )

    @property
    def ephemeral_key_size(self) -> int:
        """Bytes of the ephemeral public key at the start of a message."""
        return _curve(self.curve).ephemeral_size(self.compress_ephemeral)

    @property
    def symmetric_nonce_size(self) -> int:
        """Bytes of the nonce after the ephemeral key."""
        return _XCHACHA_NONCE if self.cipher == "xchacha20" else self.nonce_length

    @property
    def overhead(self) -> int:
        """Bytes a message grows by: ephemeral key, nonce and tag."""
        return self.ephemeral_key_size + self.symmetric_nonce_size + _TAG


#: Every configuration eciespy's ``Config`` can name (curve x cipher x nonce length x
#: ephemeral compression x HKDF compression), 48 in all. Several are equivalent on the
#: wire (x25519 and ed25519 ignore compression; XChaCha20 ignores the nonce length).
CONFIGS: tuple[EciesConfig, ...] = tuple(
    EciesConfig(curve, cipher, nonce, ce, ch)
    for curve in get_args(Curve)
    for cipher in get_args(Cipher)
    for nonce in get_args(NonceLength)
    for ce in (False, True)
    for ch in (False, True)
)


# --------------------------------------------------------------------------- key agreement


def _load_private(curve: _Curve[Any, Any], key: PrivateKeyInput) -> Any:
    raw = _decode(key, f"{curve.name} private key", InvalidParameterError)
    if len(raw) != 32:  # every curve's (ed25519: the seed)
        raise InvalidKeySizeError(f"a {curve.name} private key must be 32 bytes, got {len(raw)}")
    return curve.private(raw)


def _load_public(curve: _Curve[Any, Any], key: PublicKeyInput) -> Any:
    raw = _decode(key, f"{curve.name} public key", InvalidPublicKeyError)
    return curve.load_public(raw)


def generate_keypair(
    curve: Curve = "secp256k1", *, compressed: bool = False
) -> tuple[SecretKey, bytes]:
    """A fresh ``(private key, public key bytes)`` pair for ``curve``.

    The public key is SEC1 uncompressed (or compressed) for secp256k1, 32 raw bytes
    otherwise. Raises :class:`UnsupportedFormatError` for an unknown curve.
    """
    c = _curve(curve)
    raw = c.generate()
    return SecretKey(raw), c.public_of(c.private(raw), compressed)


def public_key(
    private_key: PrivateKeyInput, *, curve: Curve = "secp256k1", compressed: bool = False
) -> bytes:
    """The public key bytes of ``private_key`` (see the module docstring for the forms).

    Raises :class:`InvalidKeySizeError` or :class:`InvalidParameterError` for a bad key.
    """
    c = _curve(curve)
    return c.public_of(_load_private(c, private_key), compressed)


def ecdh(curve: Curve, private_key: PrivateKeyInput, public_key: PublicKeyInput) -> bytes:
    """The plain ECDH shared secret (32 bytes).

    secp256k1: the x-coordinate of the shared point; x25519: the RFC 7748 output;
    ed25519: the encoded shared Edwards point (what eciespy's HKDF uses). Raises
    :class:`InvalidPublicKeyError` for a malformed, off-curve or low-order public key,
    :class:`InvalidKeySizeError` / :class:`InvalidParameterError` for a bad private key.
    """
    c = _curve(curve)
    sk = _load_private(c, private_key)
    pk = _load_public(c, public_key)
    return c.ecdh(sk, pk)


def shared_point(
    curve: Curve,
    private_key: PrivateKeyInput,
    public_key: PublicKeyInput,
    *,
    compressed: bool = False,
) -> bytes:
    """The full shared point, encoded as eciespy feeds it to HKDF.

    secp256k1: SEC1, 65 bytes (33 with ``compressed``); x25519 and ed25519: as
    :func:`ecdh`. Raises like :func:`ecdh`.
    """
    c = _curve(curve)
    sk = _load_private(c, private_key)
    pk = _load_public(c, public_key)
    return c.shared_point(sk, pk, compressed)


def _derive(ephemeral_public: bytes, shared: bytes) -> SecretKey:
    return SecretKey(hkdf(ephemeral_public + shared, salt=b"", info=b"", length=32))


def encapsulate(
    public_key: PublicKeyInput,
    *,
    curve: Curve = "secp256k1",
    compress_ephemeral: bool = False,
    compress_hkdf: bool = False,
) -> tuple[bytes, SecretKey]:
    """A fresh ephemeral key agreed with ``public_key``: ``(ephemeral public bytes, key)``.

    The 32-byte key is what eciespy's symmetric cipher uses; the ephemeral bytes are what
    it writes first. Raises :class:`InvalidPublicKeyError`.
    """
    c = _curve(curve)
    pk = _load_public(c, public_key)
    sk = c.private(c.generate())
    wire = c.public_of(sk, compress_ephemeral)
    hkdf_public = wire if compress_ephemeral == compress_hkdf else c.public_of(sk, compress_hkdf)
    shared = c.shared_point(sk, pk, compress_hkdf)
    return wire, _derive(hkdf_public, shared)


def decapsulate(
    private_key: PrivateKeyInput,
    ephemeral_public_key: PublicKeyInput,
    *,
    curve: Curve = "secp256k1",
    compress_hkdf: bool = False,
) -> SecretKey:
    """The key :func:`encapsulate` gave the sender, from the recipient's private key.

    Raises :class:`InvalidPublicKeyError` for a bad ephemeral key and
    :class:`InvalidKeySizeError` / :class:`InvalidParameterError` for a bad private key.
    """
    c = _curve(curve)
    sk = _load_private(c, private_key)
    epk = _load_public(c, ephemeral_public_key)
    shared = c.shared_point(sk, epk, compress_hkdf)
    return _derive(c.encode_public(epk, compress_hkdf), shared)


# --------------------------------------------------------------------------- messages


def _config(
    curve: Curve,
    cipher: Cipher | str,
    nonce_length: int,
    compress_ephemeral: bool,
    compress_hkdf: bool,
) -> EciesConfig:
    if cipher == "xchacha20" or cipher in _CIPHER_ALIASES:
        nonce_length = 16  # ignored by the cipher, as in eciespy
    return EciesConfig(
        curve,
        cast(Cipher, cipher),
        cast(NonceLength, nonce_length),
        compress_ephemeral,
        compress_hkdf,
    )


def encrypt(
    public_key: PublicKeyInput,
    plaintext: Buffer,
    *,
    curve: Curve = "secp256k1",
    cipher: Cipher | str = "aes-256-gcm",
    nonce_length: int = 16,
    compress_ephemeral: bool = False,
    compress_hkdf: bool = False,
) -> bytes:
    """Encrypt ``plaintext`` to ``public_key``: ``ephemeral || nonce || tag || ciphertext``.

    ``cipher`` is ``"aes-256-gcm"`` (``nonce_length`` 12 or 16) or ``"xchacha20"`` (also
    spelled ``"xchacha20-poly1305"``; 24-byte nonce, ``nonce_length`` ignored). Raises
    :class:`InvalidPublicKeyError`, :class:`UnsupportedFormatError`,
    :class:`InvalidParameterError`.
    """
    cfg = _config(curve, cipher, nonce_length, compress_ephemeral, compress_hkdf)
    ephemeral, key = encapsulate(
        public_key,
        curve=cfg.curve,
        compress_ephemeral=cfg.compress_ephemeral,
        compress_hkdf=cfg.compress_hkdf,
    )
    nonce = random_bytes(cfg.symmetric_nonce_size)
    sealed = _seal(cfg, key.secret_bytes(), nonce, plaintext)
    return b"".join((ephemeral, nonce, sealed[-_TAG:], sealed[:-_TAG]))


def decrypt(
    private_key: PrivateKeyInput,
    ciphertext: Buffer,
    *,
    curve: Curve = "secp256k1",
    cipher: Cipher | str = "aes-256-gcm",
    nonce_length: int = 16,
    compress_ephemeral: bool = False,
    compress_hkdf: bool = False,
) -> bytes:
    """Decrypt what :func:`encrypt` (or eciespy with the same options) produced.

    Raises :class:`AuthenticationError` (wrong key, wrong options, tampering),
    :class:`FormatError` (shorter than the fixed overhead), :class:`InvalidPublicKeyError`
    (a bad ephemeral key), :class:`InvalidKeySizeError` / :class:`InvalidParameterError`.
    """
    cfg = _config(curve, cipher, nonce_length, compress_ephemeral, compress_hkdf)
    data = memoryview(as_bytes(ciphertext, "ciphertext"))
    if len(data) < cfg.overhead:
        raise FormatError(
            f"ECIES message is {len(data)} bytes, shorter than the {cfg.overhead}-byte "
            f"overhead of {cfg.curve}/{cfg.cipher}; check the options match the sender's"
        )
    k = cfg.ephemeral_key_size
    n = k + cfg.symmetric_nonce_size
    key = decapsulate(
        private_key, bytes(data[:k]), curve=cfg.curve, compress_hkdf=cfg.compress_hkdf
    )
    sealed = bytes(data[n + _TAG :]) + bytes(data[n : n + _TAG])
    return _open(cfg, key.secret_bytes(), bytes(data[k:n]), sealed)


def _seal(cfg: EciesConfig, key: bytes, nonce: bytes, plaintext: Buffer) -> bytes:
    if cfg.cipher == "xchacha20":
        return XChaCha20Poly1305(key).seal(nonce, plaintext)
    return AESGCM(key).encrypt(nonce, as_bytes(plaintext, "plaintext"), None)


def _open(cfg: EciesConfig, key: bytes, nonce: bytes, sealed: bytes) -> bytes:
    if cfg.cipher == "xchacha20":
        return XChaCha20Poly1305(key).open(nonce, sealed)
    try:
        return AESGCM(key).decrypt(nonce, sealed, None)
    except InvalidTag:
        raise AuthenticationError(
            "ECIES AES-256-GCM tag did not verify: wrong private key, options that differ "
            "from the sender's, or tampered data"
        ) from None
