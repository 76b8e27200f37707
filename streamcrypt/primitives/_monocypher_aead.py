"""Monocypher 4's AEAD: ``crypto_aead_lock``/``unlock`` and the incremental interface.

Theory of operation
-------------------
Every Monocypher message is RFC 8439 ChaCha20-Poly1305: the Poly1305 key is the first 32
bytes of ChaCha20 block 0, the text is XORed from block 1, and the tag covers
``ad || pad16 || ciphertext || pad16 || le64(len(ad)) || le64(len(ciphertext))``. What
differs is how key and nonce feed ChaCha20 (Monocypher's ``crypto_aead_init_*``):

- ``x`` (24-byte nonce): key HChaCha20(key, nonce[:16]), 8-byte nonce nonce[16:];
- ``djb`` (8-byte nonce): the key and nonce as given, 64-bit block counter;
- ``ietf`` (12-byte nonce): RFC 8439 exactly (nonce[:4] is the counter's high word).

In all three, ChaCha20 state words 13..15 hold ``(0 or nonce[:4]) || nonce8``, so each
message is one call of OpenSSL's RFC 8439 kernel with the 12-byte nonce
``(bytes(4) or nonce[:4]) || nonce8`` (``djb`` messages are limited to the 32-bit block
counter, 256 GiB). ``crypto_aead_lock`` is the ``x`` variant's first message: the same bytes
as XChaCha20-Poly1305 (libsodium's ``_ietf``), with the tag given separately.

The incremental interface (``crypto_aead_write``/``read``) keeps the nonce and, after each
message, replaces the key with bytes 32..63 of that message's block 0 (the key
*ratchet*): a later message cannot be read before the earlier ones, and a key stolen later
does not open earlier messages. :class:`MonocypherAead` is that context, message by message.

:class:`MonocypherAeadEncryptor` / :class:`MonocypherAeadDecryptor` make a byte stream of it
for pipelines: the plaintext is cut into ``chunk_size`` messages, each sent as
``mac (16) || ciphertext``; every record but the last holds exactly ``chunk_size`` bytes
of ciphertext and the last holds fewer (possibly none), so the end is authenticated: a
stream cut at a record boundary lacks its short last record (:class:`TruncatedStreamError`),
a record cut short or extended fails its tag, and the ratchet makes reordering fail.
Each record is released only after its tag verified. A peer using Monocypher reads the
stream by splitting it the same way and calling ``crypto_aead_read`` on each record.
"""

from __future__ import annotations

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

from ..abc import Buffer, Lifecycle, as_bytes
from ..errors import (
    AuthenticationError,
    InvalidNonceSizeError,
    InvalidParameterError,
    InvalidTagSizeError,
    TruncatedStreamError,
)
from ..keys import HoldsSecrets, SecretKey, as_secret_key
from ._hchacha import hchacha20

#: Bytes of a Monocypher AEAD tag.
MONOCYPHER_MAC_SIZE = 16
#: Default plaintext bytes per message of the streaming transforms.
DEFAULT_CHUNK_SIZE = 64 * 1024
_VARIANTS = {24: "x", 8: "djb", 12: "ietf"}


def _mac(mac: Buffer) -> bytes:
    if len(mac) != MONOCYPHER_MAC_SIZE:
        raise InvalidTagSizeError(f"a Monocypher AEAD mac must be 16 bytes, got {len(mac)}")
    return as_bytes(mac, "mac")


class MonocypherAead(HoldsSecrets, Lifecycle):
    """Monocypher's ``crypto_aead_ctx``: messages written or read in order, key ratcheted.

    The nonce length picks the variant: 24 bytes ``crypto_aead_init_x`` (safe to pick at
    random), 8 bytes ``_djb``, 12 bytes ``_ietf``. :meth:`write` returns ``(mac,
    ciphertext)``; :meth:`read` returns the plaintext or raises
    :class:`AuthenticationError`, after which the context is broken (Monocypher would
    leave it unchanged; a failure here is final, as everywhere in streamcrypt). Raises
    :class:`InvalidKeySizeError`, :class:`InvalidNonceSizeError`,
    :class:`InvalidTagSizeError`. Never reuse a (key, nonce) pair.
    """

    __slots__ = ("_kernel", "_key", "_nonce12", "_spent", "variant")

    def __init__(self, key: Buffer | SecretKey, nonce: Buffer) -> None:
        raw = as_secret_key(key, 32, what="a Monocypher AEAD key").secret_bytes()
        n = as_bytes(nonce, "nonce")
        variant = _VARIANTS.get(len(n))
        if variant is None:
            raise InvalidNonceSizeError(
                f"a Monocypher AEAD nonce is 24 (x), 8 (djb) or 12 (ietf) bytes, got {len(n)}"
            )
        self.variant = variant
        if variant == "x":
            raw, n = hchacha20(raw, n[:16]), n[16:]
        self._nonce12 = n if variant == "ietf" else bytes(4) + n
        self._key = raw
        self._kernel = ChaCha20Poly1305(raw)
        self._spent = False  # the key served a message: ratchet before the next one
        self._init_lifecycle()

    def _current(self) -> ChaCha20Poly1305:
        """The kernel for the next message, ratcheting lazily (a single message never pays)."""
        if self._spent:
            # ChaCha20 block 0 under the spent key: bytes 32..63 are the next key.
            block0 = Cipher(algorithms.ChaCha20(self._key, bytes(4) + self._nonce12), None)
            self._key = block0.encryptor().update(bytes(64))[32:]
            self._kernel = ChaCha20Poly1305(self._key)
            self._spent = False
        return self._kernel

    @property
    def name(self) -> str:
        return f"Monocypher AEAD ({self.variant})"

    def write(self, plaintext: Buffer, ad: Buffer = b"") -> tuple[bytes, bytes]:
        """Encrypt one message: ``(mac, ciphertext)`` (``crypto_aead_write``)."""
        self._check()
        try:
            sealed = self._current().encrypt(self._nonce12, plaintext, ad)
        except Exception as exc:
            raise self._break_kernel(exc, self.name) from exc
        self._spent = True
        return sealed[-MONOCYPHER_MAC_SIZE:], sealed[:-MONOCYPHER_MAC_SIZE]

    def read(self, mac: Buffer, ciphertext: Buffer, ad: Buffer = b"") -> bytes:
        """Verify and decrypt one message (``crypto_aead_read``)."""
        self._check()
        try:
            plain = self._current().decrypt(
                self._nonce12, as_bytes(ciphertext, "ciphertext") + _mac(mac), ad
            )
        except InvalidTag:
            raise self._break(
                AuthenticationError(
                    "Monocypher AEAD tag did not verify: wrong key, nonce or associated data, a "
                    "message out of order, or tampered data"
                )
            ) from None
        except Exception as exc:
            raise self._break_kernel(exc, self.name) from exc
        self._spent = True
        return plain

    def __repr__(self) -> str:
        return f"<MonocypherAead {self.variant} state={self._state.value}>"


def aead_lock(
    key: Buffer | SecretKey, nonce: Buffer, plaintext: Buffer, ad: Buffer = b""
) -> tuple[bytes, bytes]:
    """``crypto_aead_lock``: ``(mac, ciphertext)`` under a 24-byte nonce.

    Byte-compatible with XChaCha20-Poly1305 (``ciphertext || mac``). Raises
    :class:`InvalidKeySizeError`, :class:`InvalidNonceSizeError`.
    """
    if len(nonce) != 24:
        raise InvalidNonceSizeError(f"crypto_aead_lock takes a 24-byte nonce, got {len(nonce)}")
    return MonocypherAead(key, nonce).write(plaintext, ad)


def aead_unlock(
    key: Buffer | SecretKey, nonce: Buffer, mac: Buffer, ciphertext: Buffer, ad: Buffer = b""
) -> bytes:
    """``crypto_aead_unlock``: the plaintext, or :class:`AuthenticationError`."""
    if len(nonce) != 24:
        raise InvalidNonceSizeError(f"crypto_aead_unlock takes a 24-byte nonce, got {len(nonce)}")
    return MonocypherAead(key, nonce).read(mac, ciphertext, ad)


class _Stream(HoldsSecrets, Lifecycle):
    __slots__ = ("_ad", "_buf", "_chunk", "_ctx")

    def __init__(
        self,
        key: Buffer | SecretKey,
        nonce: Buffer,
        *,
        ad: Buffer = b"",
        chunk_size: int = DEFAULT_CHUNK_SIZE,
    ) -> None:
        if not isinstance(chunk_size, int) or isinstance(chunk_size, bool) or chunk_size < 1:
            raise InvalidParameterError(
                f"chunk_size must be a positive integer, got {chunk_size!r}"
            )
        self._chunk = chunk_size
        self._ctx = MonocypherAead(key, nonce)
        self._ad = as_bytes(ad, "ad")
        self._buf = bytearray()
        self._init_lifecycle()

    def _record(self, piece: memoryview) -> bytes:
        raise NotImplementedError

    def _record_size(self) -> int:
        raise NotImplementedError

    def update(self, data: Buffer, /) -> bytes:
        """Buffer ``data``; return the output of every whole record it completes."""
        self._check()
        self._buf += data
        size = self._record_size()
        out: list[bytes] = []
        start = 0
        try:
            with memoryview(self._buf) as view:
                while len(view) - start >= size:
                    out.append(self._record(view[start : start + size]))
                    start += size
        except Exception as exc:
            raise self._break(exc) from exc
        del self._buf[:start]
        return b"".join(out)

    def finalize(self) -> bytes:
        """The last record: sealed, it holds fewer than ``chunk_size`` bytes (maybe none);
        opened, its plaintext, once the stream's end is authenticated."""
        self._check()
        try:
            with memoryview(self._buf) as view:
                out = self._record(view)
        except Exception as exc:
            raise self._break(exc) from exc
        self._buf.clear()
        self._finish()
        return out

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} {self._ctx.variant} chunk_size={self._chunk} "
            f"state={self._state.value}>"
        )


class MonocypherAeadEncryptor(_Stream):
    """Monocypher's incremental AEAD as a sans-I/O transform (see the module docstring).

    ``update`` returns the records its input completes; ``finalize()`` the short last one.
    The receiver needs the same key, nonce, ``ad`` (bound to every record) and
    ``chunk_size``.
    """

    __slots__ = ()

    def _record_size(self) -> int:
        return self._chunk

    def _record(self, piece: memoryview) -> bytes:
        mac, ct = self._ctx.write(piece, self._ad)
        return mac + ct


class MonocypherAeadDecryptor(_Stream):
    """The receiving side: releases each record's plaintext only after its tag verified.

    Raises :class:`AuthenticationError` (wrong key, nonce, ad or chunk size, tampering,
    reordering, a record cut short or extended) and :class:`TruncatedStreamError` at
    ``finalize()`` when the short last record never came. Any failure is final.
    """

    __slots__ = ()

    def _record_size(self) -> int:
        return MONOCYPHER_MAC_SIZE + self._chunk

    def _record(self, piece: memoryview) -> bytes:
        if len(piece) < MONOCYPHER_MAC_SIZE:  # only the last record can be short
            raise TruncatedStreamError(
                f"Monocypher AEAD stream ended with {len(piece)} bytes where its last "
                "record (16-byte mac, then fewer than chunk_size bytes) should be: "
                "the stream was truncated"
            )
        return self._ctx.read(piece[:MONOCYPHER_MAC_SIZE], piece[MONOCYPHER_MAC_SIZE:], self._ad)
