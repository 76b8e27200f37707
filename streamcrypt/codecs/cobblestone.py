"""C2SP chunked encryption ("Cobblestone", https://c2sp.org/chunked-encryption), v1.

Theory of operation
-------------------
``salt (24) || commitment (32) || chunk_0 || ... || chunk_n``. From the input key (as long
as the AEAD key: 16 bytes for Cobblestone-128, 32 for Cobblestone-256), HKDF-Expand with
SHA-512 (no Extract step; the input key is the PRK) derives::

    key || base nonce || commitment = HKDF-Expand(input key,
        "c2sp.org/chunked-encryption@v1+" || aead name || 0x00 || salt || context)

with the IANA AEAD name (``AEAD_AES_128_GCM`` / ``AEAD_AES_256_GCM``), a 12-byte base
nonce and a 32-byte commitment that the decryptor checks (in constant time) before it
opens any chunk. The plaintext is cut into 16 KiB chunks; chunk *i* is sealed with
AES-GCM under ``key``, nonce ``base nonce XOR uint96_be(i)``, and empty AAD. There is no
final flag: the final chunk is *always* shorter than 16 KiB (possibly empty), so a
message of exactly k * 16 KiB ends with an empty chunk, and a ciphertext whose payload
ends on a full chunk is truncated. This is the shared core's ``final_may_be_full =
False`` mode as is: a full chunk is never final, so no read-ahead either way. The core's
``final`` argument therefore changes no nonce here; ``open_segment`` only re-checks the
length rule. At most 2**38 chunks (4 PiB) per message; chunk 2**38 raises
:class:`LimitExceededError`.

Chunks are independent, so the engine may seal and open them in parallel, and a byte
range can be read on its own (:func:`layout`, :func:`read_range`). Note that a range that
does not reach the final chunk does not authenticate the message length; pass
``authenticate_length=True`` to :func:`read_range` to open the final chunk as well.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, cast

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand

from ..abc import Buffer, as_bytes
from ..errors import (
    AuthenticationError,
    FormatError,
    InvalidKeySizeError,
    InvalidParameterError,
    LimitExceededError,
    TruncatedStreamError,
)
from ..keys import SecretKey, key_bytes, random_bytes
from ..primitives import AES128GCM, AES256GCM, AesGcm
from ._format import FormatOptions, ReadAt, SegmentedFormat
from ._segmented import SegmentCodec, SegmentedDecryptor, SegmentedEncryptor, SegmentLayout

__all__ = [
    "CHUNK_SIZE",
    "COMMITMENT_SIZE",
    "FORMAT",
    "HEADER_SIZE",
    "MAX_CHUNKS",
    "NONCE_SIZE",
    "SALT_SIZE",
    "TAG_SIZE",
    "CobblestoneCodec",
    "CobblestoneDecryptor",
    "CobblestoneEncryptor",
    "CobblestoneHeader",
    "Suite",
    "derive_keys",
    "layout",
    "read_range",
]

#: Plaintext bytes per chunk (the final chunk holds 0 to 16384).
CHUNK_SIZE = 16384
#: Bytes of the random salt that starts the header.
SALT_SIZE = 24
#: Bytes of the key commitment that follows the salt.
COMMITMENT_SIZE = 32
#: Bytes of the header: salt and commitment.
HEADER_SIZE = SALT_SIZE + COMMITMENT_SIZE
#: Bytes of an AES-GCM chunk nonce.
NONCE_SIZE = 12
#: Bytes of the AES-GCM tag after each chunk.
TAG_SIZE = 16
#: Most chunks in one message (the chunk counter's range).
MAX_CHUNKS = 1 << 38
_LABEL = b"c2sp.org/chunked-encryption@v1+"

#: The AEAD, spelled as the library's other suites: ``"aes-128-gcm"`` (Cobblestone-128)
#: or ``"aes-256-gcm"`` (Cobblestone-256).
Suite = Literal["aes-128-gcm", "aes-256-gcm"]
_KEY_SIZES: dict[str, int] = {"aes-128-gcm": 16, "aes-256-gcm": 32}

_AEADS: dict[int, tuple[bytes, type[AesGcm]]] = {
    16: (b"AEAD_AES_128_GCM", AES128GCM),
    32: (b"AEAD_AES_256_GCM", AES256GCM),
}

KeyLike = Buffer | SecretKey


@dataclass(frozen=True, slots=True)
class CobblestoneHeader:
    """The 56-byte prefix: the salt and the key commitment (not yet checked)."""

    salt: bytes
    commitment: bytes

    @classmethod
    def parse(cls, data: Buffer) -> CobblestoneHeader:
        """Parse the first 56 bytes; :class:`TruncatedStreamError` if fewer are given."""
        if len(data) < HEADER_SIZE:
            raise TruncatedStreamError(
                f"a Cobblestone header is {HEADER_SIZE} bytes, got {len(data)}: truncated input"
            )
        raw = bytes(data[:HEADER_SIZE])
        return cls(raw[:SALT_SIZE], raw[SALT_SIZE:])

    def to_bytes(self) -> bytes:
        return self.salt + self.commitment


def _input_key(key: KeyLike, suite: Suite | None) -> bytes:
    raw = key_bytes(key, "a Cobblestone input key")
    if suite is not None:
        want = _KEY_SIZES.get(suite)
        if want is None:
            raise InvalidParameterError(
                f"Cobblestone's suite is 'aes-128-gcm' or 'aes-256-gcm', not {suite!r}"
            )
        if len(raw) != want:
            raise InvalidKeySizeError(
                f"a Cobblestone {suite} input key must be {want} bytes, got {len(raw)}"
            )
    elif len(raw) not in _AEADS:
        raise InvalidKeySizeError(
            f"a Cobblestone input key must be 16 bytes (Cobblestone-128) or "
            f"32 bytes (Cobblestone-256), got {len(raw)}"
        )
    return raw


def derive_keys(key: KeyLike, salt: Buffer, context: Buffer = b"") -> tuple[bytes, bytes, bytes]:
    """``(aead key, base nonce, commitment)`` for ``key``, ``salt`` and ``context`` (hazmat).

    Raises :class:`InvalidKeySizeError` and :class:`InvalidParameterError` (salt length).
    """
    raw = _input_key(key, None)
    if len(salt) != SALT_SIZE:
        raise InvalidParameterError(f"a Cobblestone salt is {SALT_SIZE} bytes, got {len(salt)}")
    name, _ = _AEADS[len(raw)]
    info = _LABEL + name + b"\x00" + as_bytes(salt, "salt") + as_bytes(context, "context")
    # HKDF-Expand-SHA-512 (RFC 5869 section 2.3). The C2SP PRK is the 16- or 32-byte input
    # key, shorter than SHA-512's 64 bytes, which keys.hkdf_expand refuses; HMAC takes any key.
    length = len(raw) + NONCE_SIZE + COMMITMENT_SIZE
    okm = HKDFExpand(hashes.SHA512(), length, info).derive(raw)
    k = len(raw)
    return okm[:k], okm[k : k + NONCE_SIZE], okm[k + NONCE_SIZE :]


class CobblestoneCodec(SegmentCodec):
    """Seals and opens the chunks of one message, keyed with the *derived* key and base nonce.

    This is the spec's "raw mode" building block; applications use
    :class:`CobblestoneEncryptor` / :class:`CobblestoneDecryptor`, which derive these
    from an input key and check the commitment.
    """

    __slots__ = ("_aead", "_base", "_decrypt", "_encrypt", "first_segment_size", "segment_size")

    max_segments = MAX_CHUNKS

    def __init__(self, aead_key: Buffer, base_nonce: Buffer) -> None:
        entry = _AEADS.get(len(aead_key))
        if entry is None:
            raise InvalidKeySizeError(
                f"a Cobblestone AEAD key must be 16 or 32 bytes, got {len(aead_key)}"
            )
        if len(base_nonce) != NONCE_SIZE:
            raise InvalidParameterError(
                f"a Cobblestone base nonce is {NONCE_SIZE} bytes, got {len(base_nonce)}"
            )
        self._aead = entry[1](bytes(aead_key))
        kernel, _ = self._aead.native(bytes(NONCE_SIZE))  # bound once: 16 KiB chunks are hot
        self._encrypt = kernel.encrypt_into
        self._decrypt = kernel.decrypt_into
        self._base = int.from_bytes(base_nonce, "big")
        self.segment_size = self.first_segment_size = CHUNK_SIZE

    def _nonce(self, index: int) -> bytes:
        if not 0 <= index < MAX_CHUNKS:
            raise LimitExceededError(
                f"Cobblestone chunk index {index} is outside 0..2**38-1: a message holds at "
                "most 2**38 chunks (4 PiB); split the data into several messages"
            )
        return (self._base ^ index).to_bytes(NONCE_SIZE, "big")

    def seal_segment(self, index: int, plaintext: Buffer, final: bool, out: memoryview) -> int:
        n = len(plaintext)
        if (n >= CHUNK_SIZE) if final else (n != CHUNK_SIZE):
            raise InvalidParameterError(
                f"Cobblestone chunk {index} of {n} bytes breaks the chunking rule "
                "(full chunks are 16384 bytes, the final chunk is shorter)"
            )
        return self._encrypt(self._nonce(index), plaintext, None, out)

    def open_segment(self, index: int, ciphertext: Buffer, final: bool, out: memoryview) -> int:
        n = len(ciphertext)
        full = CHUNK_SIZE + TAG_SIZE
        if final and not TAG_SIZE <= n < full:
            raise TruncatedStreamError(
                f"the final Cobblestone chunk has {n} ciphertext bytes, not {TAG_SIZE}.."
                f"{full - 1}: the message is truncated"
            )
        if not final and n != full:
            raise FormatError(f"Cobblestone chunk {index} is {n} bytes, not {full}")
        try:
            return self._decrypt(self._nonce(index), ciphertext, None, out)
        except InvalidTag:
            raise AuthenticationError(
                f"Cobblestone chunk {index} did not verify ({self._aead.name}): wrong key "
                "or context, or a tampered, reordered or truncated message"
            ) from None

    def __repr__(self) -> str:
        return f"CobblestoneCodec({self._aead.name}, <key hidden>)"


class CobblestoneEncryptor(SegmentedEncryptor):
    """Encrypt one message (sans-I/O transform): ``update(data)``, ``finalize()``.

    ``key`` is 16 bytes (Cobblestone-128) or 32 bytes (Cobblestone-256), raw or a
    :class:`SecretKey`; ``suite`` (``"aes-128-gcm"`` or ``"aes-256-gcm"``) pins the size. ``salt`` is for tests only
    (it must never repeat under one key); by default it is random. Raises
    :class:`InvalidKeySizeError`, :class:`InvalidParameterError`,
    :class:`LimitExceededError` past 2**38 chunks.
    """

    __slots__ = ("header",)

    def __init__(
        self,
        key: KeyLike,
        *,
        aad: Buffer = b"",
        suite: Suite | None = None,
        salt: bytes | None = None,
    ) -> None:
        raw = _input_key(key, suite)
        salt = random_bytes(SALT_SIZE) if salt is None else as_bytes(salt, "salt")
        aead_key, base, commitment = derive_keys(raw, salt, aad)
        self.header = CobblestoneHeader(salt, commitment)
        super().__init__(CobblestoneCodec(aead_key, base), self.header.to_bytes())


def _open_header(raw: bytes, context: Buffer, data: Buffer) -> CobblestoneCodec:
    header = CobblestoneHeader.parse(data)
    aead_key, base, commitment = derive_keys(raw, header.salt, context)
    if not hmac.compare_digest(commitment, header.commitment):
        raise AuthenticationError(
            "Cobblestone key commitment did not match: wrong key, wrong context, "
            "or a tampered salt or commitment"
        )
    return CobblestoneCodec(aead_key, base)


class CobblestoneDecryptor(SegmentedDecryptor):
    """Decrypt one message, releasing each 16 KiB chunk only after it verified.

    The commitment is checked before any chunk is opened. Raises
    :class:`InvalidKeySizeError` (at construction), :class:`AuthenticationError`
    (commitment or chunk tag: wrong key or context, tampering, reordering, trailing data),
    :class:`TruncatedStreamError` (the input ended inside the header or without the short
    final chunk), :class:`LimitExceededError`; later calls raise
    :class:`BrokenTransformError`.
    """

    __slots__ = ()

    def __init__(
        self,
        key: KeyLike,
        *,
        aad: Buffer = b"",
        suite: Suite | None = None,
    ) -> None:
        raw = _input_key(key, suite)
        ctx = as_bytes(aad, "aad")

        def reader(data: bytearray) -> tuple[SegmentCodec, int] | None:
            if len(data) < HEADER_SIZE:
                return None
            return _open_header(raw, ctx, bytes(data[:HEADER_SIZE])), HEADER_SIZE

        super().__init__(reader)


def _check_length(stream_size: int) -> None:
    payload = stream_size - HEADER_SIZE
    if payload < 0:
        raise TruncatedStreamError(
            f"{stream_size} bytes cannot hold the {HEADER_SIZE}-byte Cobblestone header"
        )
    if payload % (CHUNK_SIZE + TAG_SIZE) < TAG_SIZE:
        raise TruncatedStreamError(
            f"a Cobblestone message of {stream_size} bytes lacks its short final chunk: "
            "truncated (or followed by stray bytes)"
        )


def layout(
    key: KeyLike,
    head: Buffer,
    stream_size: int,
    *,
    aad: Buffer = b"",
    suite: Suite | None = None,
) -> SegmentLayout:
    """Check the commitment at the start of ``head`` and map a message of ``stream_size`` bytes.

    ``head`` needs the first 56 bytes. Raises :class:`AuthenticationError`,
    :class:`TruncatedStreamError` (a length no message can have), :class:`InvalidKeySizeError`.
    """
    raw = _input_key(key, suite)
    codec = _open_header(raw, aad, head)
    _check_length(stream_size)
    return SegmentLayout(codec, HEADER_SIZE, stream_size)


def read_range(
    key: KeyLike,
    read_at: Callable[[int, int], bytes],
    stream_size: int,
    start: int,
    stop: int,
    *,
    aad: Buffer = b"",
    suite: Suite | None = None,
    authenticate_length: bool = False,
) -> bytes:
    """Decrypt plaintext bytes ``[start, stop)`` reading only the chunks that cover them.

    ``read_at(offset, length)`` returns ciphertext bytes. A range that reaches the end of
    the message always opens the final chunk. With ``authenticate_length`` the final chunk
    is opened whatever the range, which proves the message length (do this before
    trusting an offset measured from the end). Raises :class:`AuthenticationError`,
    :class:`TruncatedStreamError`, :class:`InvalidKeySizeError`.
    """
    lay = layout(key, read_at(0, HEADER_SIZE), stream_size, aad=aad, suite=suite)
    if authenticate_length:
        lay.verify_end(read_at)
    return lay.read(read_at, start, stop)


def _suite(options: FormatOptions) -> Suite | None:
    """``suite=`` of a format call (checked where the key is)."""
    return cast("Suite | None", options.suite)


def _layout(options: FormatOptions, read_at: ReadAt, stream_size: int) -> SegmentLayout:
    head = read_at(0, HEADER_SIZE)
    return layout(
        cast("KeyLike", options.key), head, stream_size, aad=options.aad, suite=_suite(options)
    )


#: C2SP chunked encryption's format descriptor (``aad`` is the spec's context; ``suite``
#: ``"aes-128-gcm"`` or ``"aes-256-gcm"`` pins the key size; 16 KiB chunks).
FORMAT = SegmentedFormat(
    "cobblestone",
    encryptor=lambda o: CobblestoneEncryptor(cast("KeyLike", o.key), aad=o.aad, suite=_suite(o)),
    decryptor=lambda o: CobblestoneDecryptor(cast("KeyLike", o.key), aad=o.aad, suite=_suite(o)),
    writes=frozenset({"key", "aad", "suite"}),
    reads=frozenset({"key", "aad"}),
    layout=_layout,
)
