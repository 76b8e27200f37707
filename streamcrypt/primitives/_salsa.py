"""Salsa20 and XSalsa20 as seekable transforms, and their NaCl secretbox AEADs.

Theory of operation
-------------------
Salsa20 (Snuffle 2005) takes a 16 or 32-byte key, an 8-byte nonce and a 64-bit block
counter; the keystream is XORed in, so one class serves both directions. Neither OpenSSL
nor PyNaCl's bindings offer it, so the kernel is pycryptodome's native Salsa20 (the
``legacy`` extra), which also seeks to any byte of the 2^70-byte keystream.

XSalsa20 (NaCl) takes a 24-byte nonce: the key becomes HSalsa20(key, nonce[:16]) and the
keystream is Salsa20's under that key with nonce[16:]. HSalsa20 is the Salsa20 core
without its final addition, read at words 0, 5, 10, 15, 6, 7, 8, 9; the 16-byte input sits
in the nonce and counter words, so one native Salsa20 block (nonce = input[:8], counter =
input[8:]) minus the known input words gives it, as :mod:`._hchacha` does for ChaCha.

The AEADs are NaCl's ``crypto_secretbox`` construction: the Poly1305 key is the first 32
bytes of keystream, the message is XORed with the keystream from byte 32 on, and the tag
is Poly1305 of the ciphertext. The output is ``tag || ciphertext`` (NaCl's "easy" layout,
tag first). :class:`~._secretbox.XSalsa20Poly1305` *is* ``crypto_secretbox_easy`` on libsodium
(PyNaCl, no extra needed, in :mod:`._secretbox`); :class:`Salsa20Poly1305` is the same
construction over Salsa20
with an 8-byte nonce (pycryptodome, OpenSSL's Poly1305). Secretbox has no associated data:
both refuse a non-empty ``aad``.
"""

from __future__ import annotations

import struct
from typing import Any, ClassVar

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import poly1305

from .._lazy import import_extra
from ..abc import Buffer, as_bytes
from ..errors import (
    AuthenticationError,
    InvalidNonceSizeError,
    InvalidParameterError,
    LimitExceededError,
)
from ..keys import HoldsSecrets, SecretKey, key_bytes
from ._secretbox import no_aad as _no_aad
from ._transform import KernelTransform

BLOCK = 64
#: Bytes of keystream a (key, nonce) pair gives: 2^64 blocks.
KEYSTREAM_LIMIT = BLOCK << 64
_TAG = 16
_SIGMA = struct.unpack("<4I", b"expand 32-byte k")
_MASK = 0xFFFFFFFF


def _nonce(nonce: Buffer, size: int, what: str) -> bytes:
    if len(nonce) != size:
        raise InvalidNonceSizeError(f"a {what} nonce must be {size} bytes, got {len(nonce)}")
    return as_bytes(nonce, "nonce")


def _stream(key: bytes, nonce8: bytes, position: int) -> Any:
    kernel = import_extra(
        "Crypto.Cipher.Salsa20", "Salsa20 and XSalsa20 need pycryptodome's native kernel", "legacy"
    )
    cipher = kernel.new(key=key, nonce=nonce8)
    if position:
        cipher.seek(position)
    return cipher


def hsalsa20(key: Buffer, input16: Buffer) -> bytes:
    """The 32-byte HSalsa20 subkey of a 32-byte key and a 16-byte input (NaCl)."""
    raw = key_bytes(key, "an HSalsa20 key", 32)
    data = _nonce(input16, 16, "HSalsa20 input")
    counter = int.from_bytes(data[8:], "little")
    block = _stream(raw, data[:8], counter * BLOCK).encrypt(bytes(BLOCK))
    w = struct.unpack("<16I", block)
    inp = struct.unpack("<4I", data)
    words = (
        w[0] - _SIGMA[0],
        w[5] - _SIGMA[1],
        w[10] - _SIGMA[2],
        w[15] - _SIGMA[3],
        w[6] - inp[0],
        w[7] - inp[1],
        w[8] - inp[2],
        w[9] - inp[3],
    )
    return struct.pack("<8I", *(x & _MASK for x in words))


class Salsa20(HoldsSecrets, KernelTransform):
    """The Salsa20 keystream XOR (both directions), seekable.

    ``key`` is 16 or 32 bytes, ``nonce`` 8 bytes, ``counter`` the first 64-byte block
    (0 by default). :meth:`seek` moves to any byte offset from that block. Raises
    :class:`InvalidKeySizeError`, :class:`InvalidNonceSizeError`,
    :class:`InvalidParameterError` (counter or offset out of range) and
    :class:`LimitExceededError` past the 2^70-byte keystream. Never reuse a (key, nonce).
    """

    variant: ClassVar[str] = "Salsa20"
    key_sizes: ClassVar[tuple[int, ...]] = (16, 32)
    nonce_size: ClassVar[int] = 8

    __slots__ = ("_base", "_cipher", "_key", "_nonce8", "_position")

    def __init__(self, key: Buffer | SecretKey, nonce: Buffer, *, counter: int = 0) -> None:
        raw = key_bytes(key, f"a {self.variant} key", self.key_sizes)
        n = _nonce(nonce, self.nonce_size, self.variant)
        if not isinstance(counter, int) or not 0 <= counter < 1 << 64:
            raise InvalidParameterError(
                f"{self.variant} counter must be 0..2**64-1, got {counter!r}"
            )
        self._key, self._nonce8 = self._derive(raw, n)
        self._base = counter * BLOCK
        self._position = self._base
        self._cipher = _stream(self._key, self._nonce8, self._position)
        self._init_lifecycle()

    def _derive(self, key: bytes, nonce: bytes) -> tuple[bytes, bytes]:
        return key, nonce

    @property
    def name(self) -> str:
        return self.variant

    def _reserve(self, n: int) -> None:
        if self._position + n > KEYSTREAM_LIMIT:
            raise LimitExceededError(
                f"{self.variant} keystream exhausted: the 64-bit block counter would wrap; "
                "use a new nonce"
            )
        self._position += n

    def _update(self, data: Buffer) -> bytes:
        self._reserve(len(data))
        out: bytes = self._cipher.encrypt(data)
        return out

    def _update_into(self, data: Buffer, out: bytearray | memoryview) -> int:
        n = len(data)
        self._reserve(n)
        self._cipher.encrypt(data, output=memoryview(out)[:n])
        return n

    def seek(self, offset: int) -> None:
        """Continue at byte ``offset`` of the keystream (counted from ``counter``)."""
        self._check()
        if not isinstance(offset, int) or not 0 <= offset <= KEYSTREAM_LIMIT - self._base:
            raise InvalidParameterError(
                f"{self.variant} offset must be 0..{KEYSTREAM_LIMIT - self._base}, got {offset!r}"
            )
        self._position = self._base + offset
        self._cipher = _stream(self._key, self._nonce8, self._position)


class XSalsa20(Salsa20):
    """XSalsa20 (NaCl): a 32-byte key and a 24-byte nonce, safe to pick at random.

    Seekable and raising as :class:`Salsa20`.
    """

    variant = "XSalsa20"
    key_sizes = (32,)
    nonce_size = 24
    __slots__ = ()

    def _derive(self, key: bytes, nonce: bytes) -> tuple[bytes, bytes]:
        return hsalsa20(key, nonce[:16]), nonce[16:]


def _failed(name: str) -> AuthenticationError:
    return AuthenticationError(f"{name} tag did not verify: wrong key or nonce, or tampered data")


class Salsa20Poly1305(HoldsSecrets):
    """NaCl's secretbox construction over Salsa20 (8-byte nonce): ``tag || ciphertext``.

    ``key`` is 16 or 32 bytes. :meth:`open` raises :class:`AuthenticationError` (also for
    input shorter than a tag); a non-empty ``aad`` raises :class:`InvalidParameterError`.
    Needs the ``legacy`` extra.
    """

    name: ClassVar[str] = "salsa20-poly1305"
    key_sizes: ClassVar[tuple[int, ...]] = (16, 32)
    nonce_size: ClassVar[int] = 8
    tag_size: ClassVar[int] = _TAG

    __slots__ = ("_key",)

    def __init__(self, key: Buffer | SecretKey) -> None:
        self._key = key_bytes(key, f"a {self.name} key", self.key_sizes)

    def _stream(self, nonce: Buffer) -> Any:
        return _stream(self._key, _nonce(nonce, self.nonce_size, self.name), 0)

    def seal(self, nonce: Buffer, data: Buffer, aad: Buffer = b"") -> bytes:
        """Encrypt and authenticate: ``tag || ciphertext``."""
        _no_aad(aad, self.name)
        stream = self._stream(nonce)
        mac_key = stream.encrypt(bytes(32))
        ct: bytes = stream.encrypt(data)
        return poly1305.Poly1305.generate_tag(mac_key, ct) + ct

    def open(self, nonce: Buffer, data: Buffer, aad: Buffer = b"") -> bytes:
        """Verify and decrypt ``tag || ciphertext``; raises :class:`AuthenticationError`."""
        _no_aad(aad, self.name)
        stream = self._stream(nonce)
        if len(data) < _TAG:
            raise _failed(self.name)
        view = memoryview(data)
        mac_key = stream.encrypt(bytes(32))
        try:
            poly1305.Poly1305.verify_tag(mac_key, view[_TAG:], bytes(view[:_TAG]))
        except InvalidSignature:
            raise _failed(self.name) from None
        plain: bytes = stream.encrypt(view[_TAG:])
        return plain

    def __repr__(self) -> str:
        return f"{type(self).__name__}(<key hidden>)"
