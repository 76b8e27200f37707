"""NaCl ``crypto_secretbox``: XSalsa20-Poly1305 with a 24-byte nonce, tag first.

``seal(nonce, data) -> tag || ciphertext`` and ``open(nonce, box)``, plus ``seal_into`` /
``open_into`` writing into a caller's buffer of exactly the output size (the zero-copy
path segmented formats use). The kernel is libsodium's ``crypto_secretbox_easy`` /
``crypto_secretbox_open_easy`` called through PyNaCl's cffi module on the caller's buffers
(PyNaCl's public bindings return fresh ``bytes``, a copy per call); cffi releases the GIL
around the call, so boxes sealed on worker threads run on other cores. There is no
associated data in secretbox. A box that does not open raises
:class:`AuthenticationError`.
"""

from __future__ import annotations

from typing import Any

from nacl._sodium import ffi as _ffi
from nacl._sodium import lib as _lib

from ..abc import Buffer, as_bytes
from ..errors import (
    AuthenticationError,
    InvalidNonceSizeError,
    InvalidParameterError,
)
from ..keys import HoldsSecrets, SecretKey, key_bytes
from ._aead import _out_view

#: Bytes of a secretbox key.
SECRETBOX_KEY_SIZE = 32
#: Bytes of a secretbox nonce (random nonces are safe at this size).
SECRETBOX_NONCE_SIZE = 24
#: Bytes of the Poly1305 tag a secretbox puts first.
SECRETBOX_TAG_SIZE = 16


def no_aad(aad: Buffer, name: str) -> None:
    """Refuse associated data: NaCl's secretbox construction has none."""
    if len(aad):
        raise InvalidParameterError(
            f"{name} is NaCl's secretbox, which takes no associated data; authenticate it "
            "separately or use XChaCha20-Poly1305"
        )


def _view(buf: Buffer) -> memoryview:
    return memoryview(buf).cast("B")


class XSalsa20Poly1305(HoldsSecrets):
    """NaCl secretbox keyed once: seal and open many boxes (tag first, no AAD).

    Construction raises :class:`InvalidKeySizeError`; a nonce of the wrong length raises
    :class:`InvalidNonceSizeError`; ``open``/``open_into`` raise
    :class:`AuthenticationError`; an ``out`` buffer of the wrong size or read-only raises
    :class:`InvalidParameterError` before anything is written.
    """

    name = "xsalsa20-poly1305"
    key_size = SECRETBOX_KEY_SIZE
    key_sizes = (SECRETBOX_KEY_SIZE,)
    nonce_size = SECRETBOX_NONCE_SIZE
    tag_size = SECRETBOX_TAG_SIZE

    __slots__ = ("_key",)

    def __init__(self, key: Buffer | SecretKey) -> None:
        self._key = key_bytes(key, f"{self.name} key", SECRETBOX_KEY_SIZE)

    @staticmethod
    def _check_nonce(nonce: Buffer) -> None:
        if len(nonce) != SECRETBOX_NONCE_SIZE:
            raise InvalidNonceSizeError(
                f"secretbox nonce must be {SECRETBOX_NONCE_SIZE} bytes, got {len(nonce)}"
            )

    def _call(self, fn: Any, out: memoryview, src: memoryview, nonce: Buffer) -> int:
        # The cdata views are released before returning: a from_buffer object left in a
        # frame that a traceback keeps alive pins its memoryview, and the garbage
        # collector cannot clear such a cycle safely.
        with _ffi.from_buffer(out) as dst, _ffi.from_buffer(src) as inp:
            rc: int = fn(dst, inp, len(src), as_bytes(nonce, "nonce"), self._key)
        return rc

    def seal_into(self, nonce: Buffer, data: Buffer, out: bytearray | memoryview) -> int:
        """Seal ``data`` into ``out`` of exactly ``len(data) + 16`` bytes; returns that count."""
        self._check_nonce(nonce)
        src = _view(data)
        size = len(src) + SECRETBOX_TAG_SIZE
        self._call(_lib.crypto_secretbox_easy, _out_view(out, size, self.name), src, nonce)
        return size

    def open_into(self, nonce: Buffer, box: Buffer, out: bytearray | memoryview) -> int:
        """Open ``box`` (tag || ciphertext) into ``out`` of exactly ``len(box) - 16`` bytes.

        Raises :class:`AuthenticationError` (also for a box shorter than a tag); on failure
        nothing in ``out`` is valid.
        """
        self._check_nonce(nonce)
        src = _view(box)
        if len(src) < SECRETBOX_TAG_SIZE:
            raise AuthenticationError(f"{self.name} box is shorter than its tag")
        dst = _out_view(out, len(src) - SECRETBOX_TAG_SIZE, self.name)
        if self._call(_lib.crypto_secretbox_open_easy, dst, src, nonce) != 0:
            raise AuthenticationError(
                f"{self.name} box did not verify: wrong key or nonce, or tampered data"
            )
        return len(src) - SECRETBOX_TAG_SIZE

    def seal(self, nonce: Buffer, data: Buffer, aad: Buffer = b"") -> bytes:
        """``tag || ciphertext`` of ``data`` (PyNaCl's ``SecretBox`` output minus the nonce).

        A non-empty ``aad`` raises :class:`InvalidParameterError`: secretbox has none.
        """
        no_aad(aad, self.name)
        out = bytearray(len(data) + SECRETBOX_TAG_SIZE)
        self.seal_into(nonce, data, out)
        return bytes(out)

    def open(self, nonce: Buffer, box: Buffer, aad: Buffer = b"") -> bytes:
        """The plaintext of ``box``; raises :class:`AuthenticationError`."""
        no_aad(aad, self.name)
        size = max(len(box) - SECRETBOX_TAG_SIZE, 0)
        out = bytearray(size)
        self.open_into(nonce, box, out)
        return bytes(out)

    def __repr__(self) -> str:
        return "XSalsa20Poly1305(<key hidden>)"
