"""One-shot AEAD suites behind one small interface.

``seal(nonce, data, aad) -> ciphertext || tag`` and ``open(...)``, plus ``seal_into`` /
``open_into`` that write into a caller's buffer of exactly the output size (the zero-copy
path the engine uses). Every suite is a thin shell over a native kernel that releases the
GIL on large inputs (OpenSSL through ``cryptography``); XChaCha20-Poly1305 derives an
HChaCha20 subkey and runs the IETF ChaCha20-Poly1305 kernel. ``InvalidTag`` becomes
:class:`AuthenticationError`, the one authentication failure.

:class:`AesGcm` (the general AES-GCM of SP 800-38D) also takes IVs the native kernel
refuses (1..7 bytes and more than 128 bytes); those go through :class:`_GcmAnyIv`, a
small documented fallback with native AES-CTR and a table-driven GHASH in Python.
"""

from __future__ import annotations

import hmac
from typing import ClassVar

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305

from ..abc import Buffer, as_bytes
from ..errors import (
    AuthenticationError,
    InvalidNonceSizeError,
    InvalidParameterError,
    LimitExceededError,
    UnsupportedFormatError,
)
from ..keys import HoldsSecrets, SecretKey, key_bytes
from ._hchacha import hchacha20

_TAG = 16
#: IV lengths OpenSSL's AES-GCM (through ``cryptography``) takes; others use the fallback.
_NATIVE_IV_MIN = 8
_NATIVE_IV_MAX = 128
#: SP 800-38D: at most 2**39 - 256 bits of plaintext per invocation.
_GCM_MAX_DATA = (1 << 36) - 32


def _nbytes(buf: Buffer) -> int:
    return buf.nbytes if isinstance(buf, memoryview) else len(buf)


def _out_view(out: bytearray | memoryview, size: int, suite: str) -> memoryview:
    """``out`` as a writable byte view of exactly ``size`` bytes, or InvalidParameterError."""
    try:
        view = memoryview(out)
    except TypeError:
        raise InvalidParameterError(
            f"{suite} output must be a bytearray or writable memoryview, not {type(out).__name__}"
        ) from None
    if view.readonly:
        raise InvalidParameterError(
            f"{suite} output buffer is read-only; pass a bytearray or writable memoryview"
        )
    if view.nbytes != size:
        raise InvalidParameterError(
            f"{suite} output buffer must be exactly {size} bytes, got {view.nbytes}"
        )
    if view.format != "B" or view.ndim != 1:
        if not view.c_contiguous:
            raise InvalidParameterError(f"{suite} output buffer must be contiguous")
        view = view.cast("B")
    return view


def _auth_failed(suite: str) -> AuthenticationError:
    return AuthenticationError(
        f"{suite} tag did not verify: wrong key, wrong nonce or associated data, or tampered data"
    )


class Aead(HoldsSecrets):
    """An AEAD keyed once, sealing and opening many messages.

    Class attributes describe the suite: ``name``, ``key_size``, ``nonce_size``,
    ``tag_size``. Construction raises :class:`InvalidKeySizeError`; ``open``/``open_into``
    raise :class:`AuthenticationError`; a wrong nonce length raises
    :class:`InvalidNonceSizeError`; an ``out`` buffer of the wrong size (or read-only)
    raises :class:`InvalidParameterError`.
    """

    name: ClassVar[str]
    #: The native kernel's class (set by each suite over one).
    _native: ClassVar[type[AESGCM] | type[ChaCha20Poly1305]]
    key_size: ClassVar[int] = 32
    nonce_size: ClassVar[int] = 12
    tag_size: ClassVar[int] = _TAG

    __slots__ = ("_kernel",)

    def __init__(self, key: Buffer | SecretKey) -> None:
        self._kernel = self._native(key_bytes(key, f"{self.name} key", self.key_size))

    @classmethod
    def bind(cls, key: bytes, nonce: bytes) -> tuple[AESGCM | ChaCha20Poly1305, bytes]:
        """``cls(key).native(nonce)`` without the suite object: for a key made per stream
        (the native container derives one per message), where the object's checks and
        copies cost as much as the kernel's set-up. Raises as the object would (anything
        but ``bytes`` of ``key_size`` and ``nonce_size`` takes its path: a
        :class:`SecretKey` or a ``str`` is checked there, :class:`InvalidParameterError`)."""
        if (
            type(key) is not bytes
            or type(nonce) is not bytes
            or len(key) != cls.key_size
            or len(nonce) != cls.nonce_size
        ):
            return cls(key).native(nonce)
        return cls._native(key), nonce

    def _nonce(self, nonce: Buffer) -> tuple[AESGCM | ChaCha20Poly1305 | _GcmAnyIv, Buffer]:
        """The kernel and kernel nonce for ``nonce`` (XChaCha20 derives a subkey here)."""
        if len(nonce) != self.nonce_size:
            raise InvalidNonceSizeError(
                f"{self.name} nonce must be {self.nonce_size} bytes, got {len(nonce)}"
            )
        return self._kernel, nonce

    def native(self, nonce: Buffer) -> tuple[AESGCM | ChaCha20Poly1305, bytes]:
        """The native kernel and the nonce it takes for ``nonce``, for hot loops.

        Segmented codecs bind these once per stream (XChaCha20 derives its subkey from the
        first 16 nonce bytes, so a fixed prefix means one subkey) and call the kernel's
        ``encrypt_into``/``decrypt_into`` directly; ``InvalidTag`` is theirs to translate.
        Raises :class:`InvalidNonceSizeError` for an IV only :class:`AesGcm`'s fallback takes.
        """
        kernel, n = self._nonce(nonce)
        if isinstance(kernel, _GcmAnyIv):
            raise InvalidNonceSizeError(f"{self.name} has no native kernel for a {len(n)}-byte IV")
        return kernel, bytes(n)

    def seal(self, nonce: Buffer, data: Buffer, aad: Buffer = b"") -> bytes:
        """Encrypt and authenticate: ``ciphertext || tag``."""
        kernel, n = self._nonce(nonce)
        return kernel.encrypt(n, data, aad)

    def open(self, nonce: Buffer, data: Buffer, aad: Buffer = b"") -> bytes:
        """Verify and decrypt ``ciphertext || tag``; raises :class:`AuthenticationError`."""
        kernel, n = self._nonce(nonce)
        try:
            return kernel.decrypt(n, data, aad)
        except InvalidTag:
            raise _auth_failed(self.name) from None

    def seal_into(
        self, nonce: Buffer, data: Buffer, out: bytearray | memoryview, aad: Buffer = b""
    ) -> int:
        """Seal into ``out``, which must be exactly ``len(data) + tag_size`` bytes.

        Returns the number of bytes written. A wrong-size or read-only ``out`` raises
        :class:`InvalidParameterError` before anything is written.
        """
        kernel, n = self._nonce(nonce)
        view = _out_view(out, _nbytes(data) + self.tag_size, self.name)
        return kernel.encrypt_into(n, data, aad, view)

    def open_into(
        self, nonce: Buffer, data: Buffer, out: bytearray | memoryview, aad: Buffer = b""
    ) -> int:
        """Open into ``out`` of exactly ``len(data) - tag_size`` bytes; nothing is valid on failure.

        Raises :class:`AuthenticationError` (also for input shorter than a tag) and
        :class:`InvalidParameterError` for a wrong-size or read-only ``out``.
        """
        kernel, n = self._nonce(nonce)
        size = _nbytes(data)
        if size < self.tag_size:
            raise _auth_failed(self.name)
        view = _out_view(out, size - self.tag_size, self.name)
        try:
            return kernel.decrypt_into(n, data, aad, view)
        except InvalidTag:
            raise _auth_failed(self.name) from None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(<key hidden>)"


# ---------------------------------------------------------------------------------------
# AES-GCM for IV lengths OpenSSL refuses (NIST SP 800-38D, section 7.1).
#
#   H  = E_K(0^128)
#   J0 = GHASH_H(IV || 0^s || 0^64 || [len(IV)]_64)      (IV || 0^31 || 1 for 96-bit IVs)
#   C  = GCTR_K(inc32(J0), P)                            (only the low 32 bits count up)
#   T  = E_K(J0) XOR GHASH_H(A || 0^v || C || 0^u || [len(A)]_64 || [len(C)]_64)
#
# J0 is GHASH over "no AAD, ciphertext = IV", so one GHASH routine serves both. AES runs
# natively (ECB for single blocks, CTR for the keystream, split where the 32-bit counter
# wraps). GHASH runs in Python with Shoup-style 8-bit tables: 16 tables of 256 multiples
# of H, one lookup per input byte. That is fast enough for interop with odd IVs, not for
# bulk data: use 12-byte nonces for anything large.
# ---------------------------------------------------------------------------------------

_GF_R = 0xE1 << 120  # x^128 = x^7 + x^2 + x + 1 in GCM's reflected bit order


def _ghash_tables(h: int) -> list[list[int]]:
    """16 x 256 table: ``T[i][b]`` is (byte ``b`` at position ``i``) * H in GF(2^128).

    A block is an integer read big-endian; its most significant bit is the coefficient of
    x^0, so multiplying by x is a right shift, reduced by ``_GF_R`` when x^127 falls off.
    """
    powers: list[int] = []  # powers[j] = H * x^j
    v = h
    for _ in range(128):
        powers.append(v)
        v = (v >> 1) ^ _GF_R if v & 1 else v >> 1
    tables: list[list[int]] = []
    for i in range(16):
        t = [0] * 256
        for b in range(1, 256):
            low = b & -b  # lowest set bit: bit 0x80 >> k is the coefficient of x^(8i + k)
            t[b] = t[b ^ low] ^ powers[8 * i + 8 - low.bit_length()]
        tables.append(t)
    return tables


def _pad16(data: bytes) -> bytes:
    return data + bytes(-len(data) % 16)


class _GcmAnyIv:
    """AES-GCM with an IV of any length >= 1 byte (see the comment above), called as the
    native kernel is (a bad tag raises ``InvalidTag``, checked before decrypting)."""

    __slots__ = ("_aes", "_tables")

    def __init__(self, aes: algorithms.AES) -> None:
        self._aes = aes
        self._tables = _ghash_tables(int.from_bytes(self._block(bytes(16)), "big"))

    def _block(self, block: bytes) -> bytes:
        """E_K(block) for one 16-byte block."""
        enc = Cipher(self._aes, modes.ECB()).encryptor()
        return enc.update(block) + enc.finalize()

    def _ghash(self, aad: bytes, ct: bytes) -> bytes:
        data = (
            _pad16(aad)
            + _pad16(ct)
            + (8 * len(aad)).to_bytes(8, "big")
            + (8 * len(ct)).to_bytes(8, "big")
        )
        tables = self._tables
        y = 0
        for off in range(0, len(data), 16):
            y ^= int.from_bytes(data[off : off + 16], "big")
            acc = 0
            for table, byte in zip(tables, y.to_bytes(16, "big"), strict=True):
                acc ^= table[byte]
            y = acc
        return y.to_bytes(16, "big")

    def _gctr(self, j0: bytes, data: bytes) -> bytes:
        """AES-CTR from inc32(J0), wrapping the low 32 bits as GCM requires."""
        low = (int.from_bytes(j0[12:], "big") + 1) & 0xFFFFFFFF
        room = ((1 << 32) - low) * 16  # bytes before the 32-bit counter wraps
        first = Cipher(self._aes, modes.CTR(j0[:12] + low.to_bytes(4, "big"))).encryptor()
        out = first.update(data[:room])
        if len(data) > room:
            rest = Cipher(self._aes, modes.CTR(j0[:12] + bytes(4))).encryptor()
            out += rest.update(data[room:])
        return out

    def _tag(self, j0: bytes, aad: bytes, ct: bytes) -> bytes:
        s = int.from_bytes(self._ghash(aad, ct), "big")
        return (s ^ int.from_bytes(self._block(j0), "big")).to_bytes(16, "big")

    def _check(self, size: int) -> None:
        if size > _GCM_MAX_DATA:
            raise LimitExceededError(
                f"AES-GCM takes at most {_GCM_MAX_DATA} bytes per message, got {size}"
            )

    def _j0(self, iv: bytes) -> bytes:
        if len(iv) == 12:  # the 96-bit special case (never routed here, kept for completeness)
            return iv + b"\0\0\0\1"
        return self._ghash(b"", iv)

    def encrypt(self, iv: Buffer, data: Buffer, aad: Buffer) -> bytes:
        self._check(len(data))
        j0 = self._j0(as_bytes(iv, "iv"))
        ct = self._gctr(j0, as_bytes(data, "data"))
        return ct + self._tag(j0, as_bytes(aad, "aad"), ct)

    def decrypt(self, iv: Buffer, data: Buffer, aad: Buffer) -> bytes:
        if len(data) < _TAG:
            raise InvalidTag
        ct, tag = bytes(data[:-_TAG]), bytes(data[-_TAG:])
        self._check(len(ct))
        j0 = self._j0(as_bytes(iv, "iv"))
        if not hmac.compare_digest(self._tag(j0, as_bytes(aad, "aad"), ct), tag):
            raise InvalidTag
        return self._gctr(j0, ct)

    def encrypt_into(self, iv: Buffer, data: Buffer, aad: Buffer, out: memoryview) -> int:
        sealed = self.encrypt(iv, data, aad)
        out[:] = sealed
        return len(sealed)

    def decrypt_into(self, iv: Buffer, data: Buffer, aad: Buffer, out: memoryview) -> int:
        plain = self.decrypt(iv, data, aad)
        out[:] = plain
        return len(plain)


class AesGcm(Aead):
    """AES-GCM (NIST SP 800-38D) with a 128, 192 or 256-bit key and an IV of any length.

    ``AesGcm`` takes a 16, 24 or 32-byte key and an IV of at least 1 byte (``nonce_size``,
    12, is the recommended length; other lengths are hashed into the counter block, which
    raises the collision risk of random IVs). IVs of 8..128 bytes run in OpenSSL; 1..7 and
    over 128 bytes use a slow, documented Python-GHASH fallback meant for interop only.
    The named suites :class:`AES256GCM` and :class:`AES128GCM` take exactly 12 bytes.

    Raises :class:`InvalidKeySizeError`, :class:`InvalidNonceSizeError` (empty IV, or a
    named suite's IV not 12 bytes), :class:`AuthenticationError`,
    :class:`InvalidParameterError` (``out`` size) and :class:`LimitExceededError` (over
    SP 800-38D's message limit on the fallback path).
    """

    name = "aes-gcm"
    key_size = 32
    #: False: any IV of >= 1 byte; True (the named suites): exactly ``nonce_size`` bytes.
    _fixed_nonce: ClassVar[bool] = False

    __slots__ = ("_aes", "_slow")

    def __init__(self, key: Buffer | SecretKey) -> None:
        self._aes: algorithms.AES | None = None
        self._slow: _GcmAnyIv | None = None
        if self._fixed_nonce:
            super().__init__(key)
            return
        raw = key_bytes(key, "AES-GCM key", (16, 24, 32))
        self._kernel = AESGCM(raw)
        self._aes = algorithms.AES(raw)

    _native = AESGCM

    def _nonce(self, nonce: Buffer) -> tuple[AESGCM | ChaCha20Poly1305 | _GcmAnyIv, Buffer]:
        """The native kernel for an IV OpenSSL takes, the fallback for any other."""
        if self._fixed_nonce:
            return super()._nonce(nonce)
        n = len(nonce)
        if n == 0:
            raise InvalidNonceSizeError(
                f"{self.name} IV must be at least 1 byte (12 recommended), got 0"
            )
        if _NATIVE_IV_MIN <= n <= _NATIVE_IV_MAX:
            return self._kernel, nonce
        if self._slow is None:
            assert self._aes is not None
            self._slow = _GcmAnyIv(self._aes)
        return self._slow, nonce


class AES256GCM(AesGcm):
    """AES-256-GCM with a 32-byte key and a 12-byte nonce."""

    name = "aes-256-gcm"
    key_size = 32
    _fixed_nonce = True
    __slots__ = ()


class AES128GCM(AesGcm):
    """AES-128-GCM with a 16-byte key and a 12-byte nonce."""

    name = "aes-128-gcm"
    key_size = 16
    _fixed_nonce = True
    __slots__ = ()


class ChaCha20Poly1305Suite(Aead):
    """ChaCha20-Poly1305 of RFC 8439 (96-bit nonce)."""

    name = "chacha20-poly1305"
    __slots__ = ()

    _native = ChaCha20Poly1305


class XChaCha20Poly1305(Aead):
    """XChaCha20-Poly1305 (draft-irtf-cfrg-xchacha): 192-bit nonces, safe to pick at random."""

    name = "xchacha20-poly1305"
    nonce_size = 24
    __slots__ = ("_key",)

    def __init__(self, key: Buffer | SecretKey) -> None:
        self._key = key_bytes(key, f"{self.name} key", 32)

    def _nonce(self, nonce: Buffer) -> tuple[ChaCha20Poly1305, Buffer]:
        if len(nonce) != 24:
            raise InvalidNonceSizeError(f"{self.name} nonce must be 24 bytes, got {len(nonce)}")
        return self.bind(self._key, as_bytes(nonce, "nonce"))

    @classmethod
    def bind(cls, key: bytes, nonce: bytes) -> tuple[ChaCha20Poly1305, bytes]:
        """The IETF kernel under the HChaCha20 subkey of the nonce's first 16 bytes, and
        its nonce (four zero bytes, then the last 8); raises as :meth:`Aead.bind`."""
        if type(key) is not bytes or type(nonce) is not bytes or len(key) != 32 or len(nonce) != 24:
            return cls(key).native(nonce)  # type: ignore[return-value]
        return ChaCha20Poly1305(hchacha20(key, nonce[:16])), b"\0\0\0\0" + nonce[16:]


#: Every AEAD suite by name (``aes-256-gcm``, ``aes-128-gcm``, ``chacha20-poly1305``,
#: ``xchacha20-poly1305``).
SUITES: dict[str, type[Aead]] = {
    cls.name: cls for cls in (AES256GCM, AES128GCM, ChaCha20Poly1305Suite, XChaCha20Poly1305)
}


def aead_suite(name: str) -> type[Aead]:
    """The suite class for a name such as ``"aes-256-gcm"``.

    Raises :class:`UnsupportedFormatError` for an unknown name.
    """
    if not isinstance(name, str):
        raise InvalidParameterError(f"suite must be a name such as 'aes-256-gcm', got {name!r}")
    try:
        return SUITES[name.lower()]
    except KeyError:
        raise UnsupportedFormatError(
            f"unknown AEAD suite {name!r}; supported: {', '.join(SUITES)}"
        ) from None
