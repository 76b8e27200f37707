"""One-shot AEAD suites behind one small interface.

``seal(nonce, data, aad) -> ciphertext || tag`` and ``open(...)``, plus ``seal_into`` /
``open_into`` that write into a caller's buffer of exactly the output size (the zero-copy
path the engine uses). Every suite is a thin shell over a native kernel that releases the
GIL on large inputs (OpenSSL through ``cryptography``); XChaCha20-Poly1305 derives an
HChaCha20 subkey and runs the IETF ChaCha20-Poly1305 kernel. ``InvalidTag`` becomes
:class:`AuthenticationError`, the one authentication failure.
"""

from __future__ import annotations

from typing import ClassVar

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305

from .._state import Buffer
from ..errors import (
    AuthenticationError,
    InvalidKeySizeError,
    InvalidNonceSizeError,
    InvalidParameterError,
    UnsupportedFormatError,
)
from ..keys import SecretKey
from ._hchacha import hchacha20

__all__ = [
    "AES128GCM",
    "AES256GCM",
    "SUITES",
    "Aead",
    "AesGcm",
    "ChaCha20Poly1305Suite",
    "XChaCha20Poly1305",
    "aead_suite",
]

_TAG = 16


def _key_bytes(key: Buffer | SecretKey) -> bytes:
    return key.secret_bytes() if isinstance(key, SecretKey) else bytes(key)


def _auth_failed(suite: str) -> AuthenticationError:
    return AuthenticationError(
        f"{suite} tag did not verify: wrong key, wrong nonce or associated data, or tampered data"
    )


class Aead:
    """An AEAD keyed once, sealing and opening many messages.

    Class attributes describe the suite: ``name``, ``key_size``, ``nonce_size``,
    ``tag_size``. Construction raises :class:`InvalidKeySizeError`; ``open``/``open_into``
    raise :class:`AuthenticationError`; a wrong nonce length raises
    :class:`InvalidNonceSizeError`.
    """

    name: ClassVar[str]
    key_size: ClassVar[int] = 32
    nonce_size: ClassVar[int] = 12
    tag_size: ClassVar[int] = _TAG

    __slots__ = ("_kernel",)

    def __init__(self, key: Buffer | SecretKey) -> None:
        raw = _key_bytes(key)
        if len(raw) != self.key_size:
            raise InvalidKeySizeError(
                f"{self.name} key must be {self.key_size} bytes, got {len(raw)}"
            )
        self._kernel = self._make_kernel(raw)

    def _make_kernel(self, key: bytes) -> AESGCM | ChaCha20Poly1305:
        raise NotImplementedError

    def _nonce(self, nonce: Buffer) -> tuple[AESGCM | ChaCha20Poly1305, Buffer]:
        """The kernel and kernel nonce for ``nonce`` (XChaCha20 derives a subkey here)."""
        if len(nonce) != self.nonce_size:
            raise InvalidNonceSizeError(
                f"{self.name} nonce must be {self.nonce_size} bytes, got {len(nonce)}"
            )
        return self._kernel, nonce

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
        """Seal into ``out``, which must be exactly ``len(data) + tag_size`` bytes."""
        kernel, n = self._nonce(nonce)
        return kernel.encrypt_into(n, data, aad, out)

    def open_into(
        self, nonce: Buffer, data: Buffer, out: bytearray | memoryview, aad: Buffer = b""
    ) -> int:
        """Open into ``out`` of exactly ``len(data) - tag_size`` bytes; nothing is valid on failure."""
        if len(data) < self.tag_size:
            raise _auth_failed(self.name)
        kernel, n = self._nonce(nonce)
        try:
            return kernel.decrypt_into(n, data, aad, out)
        except InvalidTag:
            raise _auth_failed(self.name) from None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(<key hidden>)"


class AesGcm(Aead):
    """AES-GCM with a 128/192/256-bit key and a 96-bit nonce (NIST SP 800-38D)."""

    name = "aes-gcm"
    key_size = 32

    __slots__ = ()

    def __init__(self, key: Buffer | SecretKey) -> None:
        raw = _key_bytes(key)
        if type(self) is AesGcm:
            if len(raw) not in (16, 24, 32):
                raise InvalidKeySizeError(f"AES-GCM key must be 16, 24 or 32 bytes, got {len(raw)}")
            self._kernel = AESGCM(raw)
        else:
            super().__init__(raw)

    def _make_kernel(self, key: bytes) -> AESGCM:
        return AESGCM(key)


class AES256GCM(AesGcm):
    name = "aes-256-gcm"
    key_size = 32
    __slots__ = ()


class AES128GCM(AesGcm):
    name = "aes-128-gcm"
    key_size = 16
    __slots__ = ()


class ChaCha20Poly1305Suite(Aead):
    """ChaCha20-Poly1305 of RFC 8439 (96-bit nonce)."""

    name = "chacha20-poly1305"
    __slots__ = ()

    def _make_kernel(self, key: bytes) -> ChaCha20Poly1305:
        return ChaCha20Poly1305(key)


class XChaCha20Poly1305(Aead):
    """XChaCha20-Poly1305 (draft-irtf-cfrg-xchacha): 192-bit nonces, safe to pick at random."""

    name = "xchacha20-poly1305"
    nonce_size = 24
    __slots__ = ("_key",)

    def __init__(self, key: Buffer | SecretKey) -> None:
        raw = _key_bytes(key)
        if len(raw) != 32:
            raise InvalidKeySizeError(f"{self.name} key must be 32 bytes, got {len(raw)}")
        self._key = raw

    def _nonce(self, nonce: Buffer) -> tuple[ChaCha20Poly1305, Buffer]:
        if len(nonce) != 24:
            raise InvalidNonceSizeError(f"{self.name} nonce must be 24 bytes, got {len(nonce)}")
        n = bytes(nonce)
        return ChaCha20Poly1305(hchacha20(self._key, n[:16])), b"\0\0\0\0" + n[16:]


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
