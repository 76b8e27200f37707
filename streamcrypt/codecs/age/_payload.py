"""age's payload: 64 KiB ChaCha20-Poly1305 chunks under a key derived from the file key
and the payload nonce, and the sans-I/O encryptor and decryptor around header and
payload."""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from typing import ClassVar

from cryptography.exceptions import InvalidTag

from ...abc import Buffer
from ...errors import AuthenticationError, FormatError, TruncatedStreamError
from ...keys import hkdf, random_bytes
from ...primitives import ChaCha20Poly1305Suite
from .. import _stanza
from .._segmented import (
    CounterCodec,
    SegmentCodec,
    SegmentedDecryptor,
    SegmentedEncryptor,
    SegmentLayout,
)
from .._stanza import Identity, IdentityLike, RecipientLike
from ._header import (
    CHUNK_SIZE,
    DEFAULT_MAX_HEADER_SIZE,
    FILE_KEY_SIZE,
    NONCE_SIZE,
    TAG_SIZE,
    AgeHeader,
    _build_header,
    _HeaderScan,
    _parse_complete,
)
from ._plugin_process import wrap_all
from ._recipients import (
    _identity_list,
    _open_file_key,
    _recipient_list,
)
from ._scrypt import DEFAULT_MAX_WORK_FACTOR, DEFAULT_WORK_FACTOR

_ZERO_NONCE = bytes(12)


class AgeCodec(CounterCodec):
    """The age payload: 64 KiB ChaCha20-Poly1305 chunks, nonce ``uint88_be(i) || last``.

    The chunk rule is :class:`CounterCodec`'s batch loop; one chunk is a batch of one.
    The counter is written as three zero bytes and a ``uint64``: a stream stops at
    2**64 chunks (2**80 bytes) with :class:`LimitExceededError`, never reached in practice.
    Opening, a final empty chunk after data is a :class:`FormatError`, a full final chunk
    that opens only as a non-final one :class:`TruncatedStreamError` (chunks are missing
    at the end), any other failure :class:`AuthenticationError`.
    """

    __slots__ = ("_decrypt", "_encrypt", "_nonce", "first_segment_size", "segment_size")

    overhead: ClassVar[int] = TAG_SIZE
    final_may_be_full: ClassVar[bool] = True
    max_segments: int = 1 << 64
    _suffix = struct.Struct(">Q?")
    _suffix_at = 3

    def __init__(self, payload_key: bytes) -> None:
        kernel = ChaCha20Poly1305Suite(payload_key).native(_ZERO_NONCE)[0]
        self._encrypt = kernel.encrypt_into
        self._decrypt = kernel.decrypt_into
        self._nonce = _ZERO_NONCE
        self.segment_size = self.first_segment_size = CHUNK_SIZE

    def _check_last(self, index: int, size: int, final: bool) -> None:
        if final and index > 0 and size == TAG_SIZE:
            raise FormatError("age payload ends with an empty chunk after data (not allowed)")

    def _failed(self, index: int, final: bool, segment: memoryview, out: memoryview) -> Exception:
        if final and len(segment) == CHUNK_SIZE + TAG_SIZE:
            nonce = bytearray(_ZERO_NONCE)
            self._suffix.pack_into(nonce, self._suffix_at, index, False)
            try:  # does it open as a middle chunk?
                self._decrypt(nonce, segment, None, out[:CHUNK_SIZE])
            except InvalidTag:
                pass
            else:
                return TruncatedStreamError(
                    f"age payload ends after chunk {index}, which is not the final chunk: "
                    "the file is truncated"
                )
        return AuthenticationError(
            f"age payload chunk {index} did not verify: tampered, reordered, or cut inside a chunk"
        )


def _payload_codec(file_key: bytes, nonce: bytes) -> AgeCodec:
    return AgeCodec(hkdf(file_key, salt=nonce, info=b"payload"))


class AgeEncryptor(SegmentedEncryptor):
    """Encrypt to age v1 (sans-I/O transform): header first, then the payload chunks.

    Give ``recipients`` (``age1...`` strings or recipient objects) or a ``passphrase``.
    Raises :class:`InvalidParameterError` (no recipient, a passphrase mixed with
    recipients, classic mixed with post-quantum) and :class:`FormatError` (bad key string)
    here; the header (scrypt for a passphrase) is built on the first ``feed``/``finish``,
    which the engine runs on a worker thread.
    """

    __slots__ = ()

    def __init__(
        self,
        *,
        recipients: Iterable[RecipientLike] | RecipientLike = (),
        passphrase: str | Buffer | None = None,
        work_factor: int = DEFAULT_WORK_FACTOR,
    ) -> None:
        targets = _recipient_list(recipients, passphrase, work_factor)

        def build() -> tuple[SegmentCodec, bytes]:
            file_key = random_bytes(FILE_KEY_SIZE)
            nonce = random_bytes(NONCE_SIZE)
            header = _build_header(file_key, wrap_all(targets, file_key))
            return _payload_codec(file_key, nonce), header + nonce

        super().__init__(build=build)


class _HeaderReader(_stanza.StanzaHeaderReader[AgeHeader]):
    """Parses the header once complete, unwraps the file key once, then waits for the nonce."""

    __slots__ = ("_file_key", "_identities", "_scan")

    def __init__(self, identities: Sequence[Identity], max_header_size: int) -> None:
        super().__init__()
        self._identities = identities
        self._scan = _HeaderScan(max_header_size)
        self._file_key = b""

    def _parse(self, data: bytes | bytearray) -> AgeHeader | None:
        size = self._scan(data)
        return None if size is None else _parse_complete(bytes(data[:size]))

    def _open(self, header: AgeHeader) -> None:
        self._file_key = _open_file_key(header, self._identities)

    def _payload(
        self, header: AgeHeader, data: bytes | bytearray
    ) -> tuple[SegmentCodec, int] | int:
        end = header.size + NONCE_SIZE
        if len(data) < end:
            return end
        codec = _payload_codec(self._file_key, bytes(data[header.size : end]))
        self._file_key = b""
        return codec, end


class AgeDecryptor(SegmentedDecryptor):
    """Decrypt age v1 (sans-I/O transform), releasing only chunks that verified.

    Give ``identities`` (``AGE-SECRET-KEY-...`` strings or identity objects) or a
    ``passphrase``. Binary input only: put an :class:`~streamcrypt.codecs.armor.ArmorDecoder`
    in front for armored files. Raises :class:`FormatError`, :class:`UnknownKeyError`,
    :class:`AuthenticationError`, :class:`TruncatedStreamError`,
    :class:`LimitExceededError` (see the module docstring).
    """

    __slots__ = ("_reader",)

    def __init__(
        self,
        *,
        identities: Iterable[IdentityLike] | IdentityLike = (),
        passphrase: str | Buffer | None = None,
        max_work_factor: int = DEFAULT_MAX_WORK_FACTOR,
        max_header_size: int = DEFAULT_MAX_HEADER_SIZE,
    ) -> None:
        self._reader = _HeaderReader(
            _identity_list(identities, passphrase, max_work_factor), max_header_size
        )
        super().__init__(self._reader)

    @property
    def header(self) -> AgeHeader | None:
        """The parsed header once it authenticated (``None`` before)."""
        return self._reader.header if self.codec is not None else None


def layout(
    head: Buffer,
    stream_size: int,
    *,
    identities: Iterable[IdentityLike] | IdentityLike = (),
    passphrase: str | Buffer | None = None,
    max_work_factor: int = DEFAULT_MAX_WORK_FACTOR,
    max_header_size: int = DEFAULT_MAX_HEADER_SIZE,
) -> SegmentLayout:
    """Authenticate the header at the start of ``head`` and map a binary age file of
    ``stream_size`` bytes for random access (``SegmentLayout.read``)."""
    reader = _HeaderReader(_identity_list(identities, passphrase, max_work_factor), max_header_size)
    opened = reader(bytes(head))
    if opened is None or isinstance(opened, int):
        raise TruncatedStreamError("the data is shorter than the age header and payload nonce")
    codec, size = opened
    return SegmentLayout(codec, size, stream_size)
