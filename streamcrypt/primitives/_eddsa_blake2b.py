"""EdDSA over edwards25519 with BLAKE2b-512: Monocypher 4's ``crypto_eddsa_*``, byte for byte.

Theory of operation
-------------------
The construction is Ed25519's with BLAKE2b-512 in place of SHA-512:

    a, prefix = trim(H(seed)[:32]), H(seed)[32:]        A = [a]B
    r = H(prefix || M) mod L    R = [r]B    h = H(R || A || M) mod L    S = (r + h a) mod L

and a signature (R, S) is accepted when S < L, A and R decode to curve points (non-canonical
encodings allowed, as Monocypher allows them) and [8]([S]B - R) = [h]([8]A): the
cofactored equation, which also agrees with batch verification.

Signing touches secrets (the trimmed scalar a, the nonce r), so all its arithmetic is
native and constant time: scalars in C Monocypher (``crypto_eddsa_trim_scalar``,
``_reduce``, ``_mul_add``; see :mod:`._curve25519`), base-point multiplications in
libsodium (twice as fast as Monocypher's here); Python never holds a or r as an integer.
Verification handles public values only: its point arithmetic is libsodium's (PyNaCl):
base-point multiplications, point addition and subtraction (which decode any on-curve
encoding) and one variable-base multiplication of the prime-order point [8]A, with the
public scalars S and h as Python integers. Hashes run in hashlib's BLAKE2b.

Signing hashes the message twice (the nonce is derived from it), so it needs the
whole message or a way to read it twice (:meth:`EdDsaBlake2bPrivateKey.sign_chunks`);
verification hashes it once, so :class:`EdDsaBlake2bVerifier` is a tap that checks a stream
as it passes.

One deliberate difference from Monocypher: a public key of small order is refused when
the key is made (:class:`~streamcrypt.errors.InvalidPublicKeyError`). Monocypher accepts
it, and then one signature (R = [S]B) passes for every message.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable

from nacl import bindings as _sodium
from nacl import exceptions as _nacl_exc

from ..abc import Buffer, Lifecycle, State, as_bytes
from ..errors import (
    InvalidParameterError,
    InvalidPublicKeyError,
    InvalidSignatureError,
    NotFinalizedError,
)
from ..keys import HoldsSecrets, SecretKey, key_bytes, random_bytes
from ._curve25519 import native, point_bytes
from ._signing import _RawPublicKey

#: Bytes of an EdDSA-BLAKE2b signature (R || S).
EDDSA_SIGNATURE_SIZE = 64
_IDENTITY = (1).to_bytes(32, "little")
#: Order of the prime-order subgroup (the base point's order).
L = (1 << 252) + 27742317777372353535851937790883648493


def _hash() -> hashlib.blake2b:
    return hashlib.blake2b(digest_size=64)


def _reduce(digest: bytes) -> int:
    """A public challenge hash mod L (verification only)."""
    return int.from_bytes(digest, "little") % L


def _base(k: int) -> bytes:
    """[k]B for a public 0 <= k < 2^255 (libsodium refuses to return the identity)."""
    if k % L == 0:
        return _IDENTITY
    return _sodium.crypto_scalarmult_ed25519_base_noclamp(k.to_bytes(32, "little"))


def _secret_base(scalar: bytes) -> bytes:
    """[k]B for a secret 32-byte k below 2^255, in libsodium (constant time). Only a
    multiple of L (probability 2^-252) gives the identity, which libsodium refuses."""
    try:
        return _sodium.crypto_scalarmult_ed25519_base_noclamp(scalar)
    except _nacl_exc.RuntimeError:
        return _IDENTITY


def _times8(point: bytes) -> bytes:
    """[8]P for any on-curve encoding; nacl's RuntimeError if P is off the curve."""
    for _ in range(3):
        point = _sodium.crypto_core_ed25519_add(point, point)
    return point


def _signature(signature: Buffer) -> tuple[bytes, int]:
    if not isinstance(signature, bytes | bytearray | memoryview):
        raise InvalidParameterError(f"a signature must be bytes, not {type(signature).__name__}")
    sig = bytes(signature)
    if len(sig) != EDDSA_SIGNATURE_SIZE:
        raise InvalidSignatureError(
            f"an EdDSA signature must be 64 bytes, got {len(sig)}; check it was not truncated"
        )
    return sig[:32], int.from_bytes(sig[32:], "little")


class EdDsaBlake2bPublicKey(_RawPublicKey):
    """An EdDSA-BLAKE2b verification key (32 bytes, Monocypher's format).

    Raises :class:`InvalidPublicKeyError` for a wrong length, a point off the curve or a
    point of small order. :meth:`verify` raises :class:`InvalidSignatureError`.
    """

    __slots__ = ("_a8",)

    def __init__(self, data: Buffer) -> None:
        raw = point_bytes(data, "an EdDSA public key")
        try:
            a8 = _times8(raw)
        except _nacl_exc.RuntimeError:
            raise InvalidPublicKeyError(
                "not an EdDSA public key: the point is off the curve"
            ) from None
        if a8 == _IDENTITY:
            raise InvalidPublicKeyError(
                "EdDSA public key is of small order: any signature (R = [S]B) would verify"
            )
        self._raw = raw
        self._a8 = a8

    def _accepts(self, r: bytes, s: int, h: int) -> bool:
        if s >= L:
            return False
        try:
            lhs = _times8(_sodium.crypto_core_ed25519_sub(_base(s), r))
        except _nacl_exc.RuntimeError:  # R is off the curve
            return False
        rhs = (
            _sodium.crypto_scalarmult_ed25519_noclamp(h.to_bytes(32, "little"), self._a8)
            if h
            else _IDENTITY
        )
        return lhs == rhs

    def verify(self, message: Buffer, signature: Buffer) -> None:
        """Check ``signature`` over ``message``; raises :class:`InvalidSignatureError`."""
        verifier = self.verifier(signature)
        verifier.update(message)
        verifier.finalize()

    def verifier(self, signature: Buffer) -> EdDsaBlake2bVerifier:
        """A tap that checks ``signature`` over the stream that passes through it."""
        return EdDsaBlake2bVerifier(self, signature)


class EdDsaBlake2bPrivateKey(HoldsSecrets):
    """An EdDSA-BLAKE2b signing key from its 32-byte seed (``crypto_eddsa_key_pair``).

    Monocypher's 64-byte secret key is ``seed || public key``. ``repr`` shows only the
    public key. Needs the ``monocypher`` extra (signing runs in C Monocypher). Raises
    :class:`InvalidKeySizeError` for a seed that is not 32 bytes.
    """

    __slots__ = ("_prefix", "_public", "_scalar", "_seed")

    _pickle_advice = "store its seed deliberately"

    def __init__(self, seed: Buffer | SecretKey) -> None:
        raw = key_bytes(seed, "an EdDSA seed", 32)
        expanded = hashlib.blake2b(raw, digest_size=64).digest()
        self._seed = SecretKey(raw)
        self._scalar = native("crypto_eddsa_trim_scalar", 32, expanded[:32])
        self._prefix = expanded[32:]
        self._public = EdDsaBlake2bPublicKey(_secret_base(self._scalar))

    @classmethod
    def generate(cls) -> EdDsaBlake2bPrivateKey:
        """A fresh random signing key."""
        return cls(random_bytes(32))

    def public_key(self) -> EdDsaBlake2bPublicKey:
        return self._public

    def public_bytes(self) -> bytes:
        return self._public.public_bytes()

    def secret_bytes(self) -> bytes:
        """The 32-byte seed. Handle with care."""
        return self._seed.secret_bytes()

    def sign(self, message: Buffer) -> bytes:
        """The 64-byte signature of ``message`` (deterministic, ``crypto_eddsa_sign``)."""
        return self.sign_chunks(lambda: (message,))

    def sign_chunks(self, reopen: Callable[[], Iterable[Buffer]]) -> bytes:
        """Sign a message too large to hold, read twice through ``reopen()``.

        The signature equals :meth:`sign` of the concatenated chunks. ``reopen`` must give
        the same bytes both times (the nonce and the challenge hash each read it once).
        """
        nonce = _hash()
        nonce.update(self._prefix)
        for chunk in reopen():
            nonce.update(chunk)
        # R || S, natively: r = nonce mod L, R = [r]B, S = h a + r mod L.
        r = native("crypto_eddsa_reduce", 32, nonce.digest())
        big_r = _secret_base(r)
        hasher = _hash()
        hasher.update(big_r)
        hasher.update(self._public.public_bytes())
        for chunk in reopen():
            hasher.update(chunk)
        h = native("crypto_eddsa_reduce", 32, hasher.digest())
        return big_r + native("crypto_eddsa_mul_add", 32, h, self._scalar, r)

    def __repr__(self) -> str:
        return f"EdDsaBlake2bPrivateKey(<seed hidden>, public={self.public_bytes().hex()})"

    __str__ = __repr__


def eddsa_blake2b_verify(
    public_key: EdDsaBlake2bPublicKey | Buffer, message: Buffer, signature: Buffer
) -> None:
    """Check an EdDSA-BLAKE2b signature (``crypto_eddsa_check``).

    Raises :class:`InvalidSignatureError` and :class:`InvalidPublicKeyError`.
    """
    EdDsaBlake2bPublicKey._of(public_key).verify(message, signature)


class EdDsaBlake2bVerifier(Lifecycle):
    """A tap that checks an EdDSA-BLAKE2b signature over the stream passing through.

    ``update(data) -> data``; ``finalize()`` returns ``b""`` or raises
    :class:`InvalidSignatureError` (and leaves the verifier broken). Data passed on before
    ``finalize()`` is NOT authenticated yet: act on it only once ``finalize()`` returns.
    """

    __slots__ = ("_hasher", "_public", "_r", "_s")

    def __init__(self, public_key: EdDsaBlake2bPublicKey | Buffer, signature: Buffer) -> None:
        self._public = EdDsaBlake2bPublicKey._of(public_key)
        self._r, self._s = _signature(signature)
        self._hasher = _hash()
        self._hasher.update(self._r)
        self._hasher.update(self._public.public_bytes())
        self._init_lifecycle()

    def update(self, data: Buffer, /) -> bytes:
        """Hash ``data`` and return it unchanged."""
        self._check()
        self._hasher.update(data)
        return as_bytes(data, "data")

    def finalize(self) -> bytes:
        """Verify; returns ``b""``. Raises :class:`InvalidSignatureError`."""
        self._check()
        if not self._public._accepts(self._r, self._s, _reduce(self._hasher.digest())):
            raise self._break(
                InvalidSignatureError(
                    "EdDSA-BLAKE2b signature did not verify: wrong public key, altered "
                    "message or altered signature"
                )
            )
        self._finish()
        return b""

    def verified(self) -> bool:
        """True once ``finalize()`` has checked the signature."""
        return self._state is State.FINALIZED

    def digest(self) -> bytes:
        """The signature, once verified; raises :class:`NotFinalizedError` before."""
        if self._state is not State.FINALIZED:
            self._check()
            raise NotFinalizedError("call finalize() before relying on the signature")
        return self._r + self._s.to_bytes(32, "little")

    def hexdigest(self) -> str:
        return self.digest().hex()

    def __repr__(self) -> str:
        return f"EdDsaBlake2bVerifier(public={self._public.public_bytes().hex()}, state={self.state.value})"
