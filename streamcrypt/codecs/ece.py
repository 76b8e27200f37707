"""RFC 8188 "Encrypted Content-Encoding for HTTP": the ``aes128gcm`` content coding.

Theory of operation
-------------------
A body is ``header || record_0 || ... || record_n``. The header is
``salt (16) || rs (uint32 BE) || idlen (1) || keyid (idlen)``. From the 16-byte salt and
the input keying material (IKM), HKDF-SHA256 derives the content-encryption key
(info ``"Content-Encoding: aes128gcm" || 0x00``, 16 bytes) and a nonce base (info
``"Content-Encoding: nonce" || 0x00``, 12 bytes); record *i* is sealed with
AEAD_AES_128_GCM, empty associated data, under ``nonce_base XOR uint96_be(i)``.

``rs`` is the ciphertext size of every record but the last. A record's plaintext is
``data || delimiter || 0x00 * k``: the delimiter is 0x02 in the last record and 0x01 in
every other, so each record is at most ``rs - 17`` data bytes plus 17 bytes of overhead
(delimiter and tag). The last record may be shorter than ``rs`` or exactly ``rs`` long,
so the decoder reads one record ahead (``final_may_be_full``) and learns that a record is
the last from the end of the input; the authenticated delimiter then confirms it. The
decoder strips padding by finding the last non-zero octet of each record.

Which typed error for which fault (decoding):

* the body ends inside the header, right after it (no record), at a record boundary
  (the last record received carries delimiter 0x01), or with fewer than 17 bytes of a
  record left: :class:`TruncatedStreamError`;
* the body ends inside a record with 17 or more of its bytes left (the partial record
  cannot authenticate), a record was altered, reordered or sealed under another key:
  :class:`AuthenticationError`;
* a record holds no delimiter, a wrong one (0x02 before the end, i.e. data after the
  last record, or any value other than 0x01 and 0x02), or ``rs`` is below 18:
  :class:`FormatError`;
* ``rs`` above the decoder's ``max_record_size``: :class:`LimitExceededError`;
* the key id names no known key: :class:`UnknownKeyError`.

The encoder writes no padding unless asked; ``padding`` zero octets go into the first
record (the RFC 8188 section 3.2 example is ``padding=1``), which keeps the geometry the
shared segmented core needs: the padding is fed as leading plaintext and moved behind the
delimiter by :meth:`EceCodec.run_segments`.

``http_ece`` (the Python reference) encodes an empty body as a header with no record at
all; such a body cannot be told apart from one whose records were all cut off, so the
decoder refuses it unless ``allow_no_records=True``.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from math import isqrt
from typing import Any, TypeAlias, cast

from cryptography.exceptions import InvalidTag

from ..abc import Buffer, as_bytes
from ..errors import (
    AuthenticationError,
    FormatError,
    InvalidParameterError,
    LimitExceededError,
    TruncatedStreamError,
    UnknownKeyError,
)
from ..keys import KeyRing, Pkcs11Key, SecretKey, as_secret_key, hkdf, random_bytes
from ..primitives import AES128GCM
from ._format import SegmentedFormat, or_default
from ._segmented import BatchCodec, SegmentCodec, SegmentedDecryptor, SegmentedEncryptor, SegmentJob

__all__ = [
    "CONTENT_ENCODING",
    "DEFAULT_MAX_RECORD_SIZE",
    "DEFAULT_RECORD_SIZE",
    "DEFAULT_SEGMENT_SIZE",
    "FORMAT",
    "HEADER_SIZE",
    "KEY_SIZE",
    "MAX_HEADER_SIZE",
    "MAX_RECORD_SIZE",
    "MIN_RECORD_SIZE",
    "OVERHEAD",
    "SALT_SIZE",
    "TAG_SIZE",
    "EceCodec",
    "EceDecryptor",
    "EceEncryptor",
    "EceHeader",
    "EceKey",
    "EceKeySource",
    "encrypted_length",
    "read_header",
]

#: The HTTP ``Content-Encoding`` token.
CONTENT_ENCODING = "aes128gcm"
#: Bytes of the random salt in the header.
SALT_SIZE = 16
#: Size of the input keying material this codec takes.
KEY_SIZE = 16
#: Bytes of the AES-128-GCM tag of each record.
TAG_SIZE = 16
#: Ciphertext bytes each record adds: the padding delimiter and the GCM tag.
OVERHEAD = TAG_SIZE + 1
#: RFC 8188 section 2.1: "Values smaller than 18 are invalid."
MIN_RECORD_SIZE = OVERHEAD + 1
#: ``rs`` is an unsigned 32-bit field.
MAX_RECORD_SIZE = (1 << 32) - 1
#: Record size (``rs``, ciphertext bytes per record) unless ``record_size=`` or
#: ``segment_size=`` says otherwise.
DEFAULT_RECORD_SIZE = 4096
#: Plaintext bytes per full record by default (:data:`DEFAULT_RECORD_SIZE` less
#: :data:`OVERHEAD`).
DEFAULT_SEGMENT_SIZE = DEFAULT_RECORD_SIZE - OVERHEAD
#: What a decoder buffers at most for one record unless told otherwise (hostile ``rs``).
DEFAULT_MAX_RECORD_SIZE = 1 << 24
_FIXED = struct.Struct(">16sIB")  # salt, rs, idlen
#: Size of a header without key id; with one it is longer by ``len(keyid)``.
HEADER_SIZE = _FIXED.size
#: Longest header: a key id holds at most 255 bytes.
MAX_HEADER_SIZE = HEADER_SIZE + 255
_CEK_INFO = b"Content-Encoding: aes128gcm\x00"
_NONCE_INFO = b"Content-Encoding: nonce\x00"
#: RFC 8188 section 4.4: less than 2^44.5 blocks of 16 octets under one key and salt.
_MAX_BLOCKS = isqrt(1 << 89)

#: The input keying material: 16 raw bytes or a :class:`SecretKey`.
EceKey: TypeAlias = Buffer | SecretKey
#: How a decoder finds the IKM: one key (the header's key id is ignored), a KeyRing
#: (looked up by the key id as UTF-8), a mapping (by the key id bytes, then as UTF-8), or
#: a callable given the key id bytes that returns the key or None.
EceKeySource: TypeAlias = (
    EceKey
    | KeyRing
    | Mapping[bytes, EceKey]
    | Mapping[str, EceKey]
    | Callable[[bytes], EceKey | None]
)


@dataclass(frozen=True, slots=True)
class EceHeader:
    """A parsed ``aes128gcm`` header: salt, record size ``rs`` and key id."""

    salt: bytes
    record_size: int
    keyid: bytes = b""

    @property
    def size(self) -> int:
        """Length of the encoded header in bytes."""
        return HEADER_SIZE + len(self.keyid)

    def to_bytes(self) -> bytes:
        """The header as it goes on the wire."""
        return _FIXED.pack(self.salt, self.record_size, len(self.keyid)) + self.keyid


def read_header(data: Buffer) -> EceHeader | None:
    """Parse the header at the start of ``data``; ``None`` while more bytes are needed.

    Raises :class:`FormatError` for a record size below 18.
    """
    if len(data) < HEADER_SIZE:
        return None
    salt, rs, idlen = _FIXED.unpack_from(data)
    if rs < MIN_RECORD_SIZE:
        raise FormatError(
            f"aes128gcm header has record size {rs}; values below {MIN_RECORD_SIZE} are "
            "invalid (RFC 8188 section 2.1): not an aes128gcm body, or a corrupt header"
        )
    if len(data) < HEADER_SIZE + idlen:
        return None
    return EceHeader(salt, rs, bytes(data[HEADER_SIZE : HEADER_SIZE + idlen]))


def _check_record_size(record_size: int) -> None:
    if not isinstance(record_size, int) or not MIN_RECORD_SIZE <= record_size <= MAX_RECORD_SIZE:
        raise InvalidParameterError(
            f"record size must be an integer in {MIN_RECORD_SIZE}..{MAX_RECORD_SIZE}, "
            f"got {record_size!r}"
        )


def _record_size(segment_size: int | None, record_size: int | None) -> int:
    """The record size (``rs``) of ``segment_size=`` (plaintext bytes per full record, the
    vocabulary's term) or ``record_size=`` (the RFC's ciphertext unit), at most one given."""
    if segment_size is None:
        size = DEFAULT_RECORD_SIZE if record_size is None else record_size
    elif record_size is not None:
        raise InvalidParameterError(
            f"give segment_size= or record_size= (segment_size + {OVERHEAD}), not both"
        )
    elif not isinstance(segment_size, int) or isinstance(segment_size, bool):
        raise InvalidParameterError(f"segment size must be an integer, got {segment_size!r}")
    else:
        size = segment_size + OVERHEAD
    _check_record_size(size)
    return size


def _keyid_bytes(keyid: bytes | str) -> bytes:
    raw = keyid.encode() if isinstance(keyid, str) else as_bytes(keyid, "keyid")
    if len(raw) > 255:
        raise InvalidParameterError(f"a key id is at most 255 bytes, got {len(raw)}")
    return raw


def _ikm(key: EceKey) -> bytes:
    return as_secret_key(key, KEY_SIZE, what="aes128gcm input keying material").secret_bytes()


def _derive(ikm: bytes, salt: bytes) -> tuple[bytes, bytes]:
    """The content-encryption key and nonce base (RFC 8188 sections 2.2 and 2.3)."""
    cek = hkdf(ikm, salt=salt, info=_CEK_INFO, length=16)
    nonce = hkdf(ikm, salt=salt, info=_NONCE_INFO, length=12)
    return cek, nonce


_scratches = threading.local()


#: Records up to this size are opened in a buffer each thread keeps; larger ones (which
#: a sender may choose, up to the decoder's max_record_size) in a buffer of their own,
#: so that no thread holds on to more than this.
_KEPT_SCRATCH = 1 << 20


def _scratch(size: int) -> memoryview:
    """A buffer of ``size`` bytes where a record is laid out to be sealed, or where a
    record that has no room in its output is opened first (the last of a job): this
    thread's reused one when the record is not larger than :data:`_KEPT_SCRATCH` (a new
    buffer per record cost its allocation and zeroing, a tenth of the AES on a 64 KiB
    record)."""
    if size > _KEPT_SCRATCH:
        return memoryview(bytearray(size))
    buf: memoryview | None = getattr(_scratches, "buf", None)
    if buf is None or len(buf) < size:
        buf = _scratches.buf = memoryview(bytearray(size))
    return buf[:size]


def _forged(index: int) -> AuthenticationError:
    return AuthenticationError(
        f"aes128gcm record {index} did not verify: wrong key, or a tampered, reordered or "
        "truncated body"
    )


class EceCodec(BatchCodec):
    """Seals and opens the records of one ``aes128gcm`` body (a pure, keyed object).

    ``segment_size`` is ``rs - 17``, the data bytes of a full record. ``first_padding``
    (encoding only) is the number of leading plaintext bytes of record 0 that are
    padding: they are written behind the delimiter instead of before it.
    ``open_segment`` raises :class:`AuthenticationError`, :class:`FormatError` (no
    delimiter, or the wrong one) and :class:`TruncatedStreamError` (the final record
    says more records follow).
    """

    overhead = OVERHEAD
    final_may_be_full = True

    __slots__ = (
        "_decrypt",
        "_encrypt",
        "_first_padding",
        "_nonce_base",
        "first_segment_size",
        "segment_size",
    )

    def __init__(
        self, ikm: EceKey, salt: bytes, record_size: int, *, first_padding: int = 0
    ) -> None:
        _check_record_size(record_size)
        if len(salt) != SALT_SIZE:
            raise InvalidParameterError(f"salt must be {SALT_SIZE} bytes, got {len(salt)}")
        cek, nonce = _derive(_ikm(ikm), as_bytes(salt, "salt"))
        kernel, _ = AES128GCM(cek).native(bytes(12))  # bound once: records are hot
        self._encrypt = kernel.encrypt_into
        self._decrypt = kernel.decrypt_into
        self._nonce_base = int.from_bytes(nonce, "big")
        self._first_padding = first_padding
        self.segment_size = self.first_segment_size = record_size - OVERHEAD
        self.max_segments = _MAX_BLOCKS // -(-(record_size - TAG_SIZE) // 16)

    def run_segments(
        self, sealing: bool, first: int, count: int, data: Buffer, final: bool, out: memoryview
    ) -> tuple[int, Exception | None]:
        """Records ``first .. first + count - 1``, one tight loop each way: the record rule
        (nonce, delimiter, padding) is written here once; one record is a batch of one."""
        if sealing:
            return self._seal_run(first, count, memoryview(data), final, out)
        return self._open_run(first, count, memoryview(data), final, out)

    def run_one(
        self, sealing: bool, index: int, data: Buffer, final: bool
    ) -> tuple[bytes, Exception | None] | None:
        # One record alone (a job of one: what a body read or written in pieces of
        # about a record mostly gives), laid out or opened in this thread's scratch
        # buffer as the batch loop does it, without the engine's output memory (a
        # ``bytes`` made through the C API, its view: ~1.6 us of ctypes a record).
        # Sealing: the record (data, delimiter) laid out in scratch, one copy, and
        # sealed by the kernel's own ``encrypt``, which makes the output object; record
        # 0 of a padded body is the batch loop's. Opening: into scratch, and its data
        # copied out into a new ``bytes``, one copy (the kernel's own ``decrypt`` and a
        # slice of its object made two new objects a record: A/B, pipeline().stream()
        # of 64 KiB chunks, 1% more CPU). A record the copy cannot serve (padding, a
        # wrong delimiter, a failure) is judged by the batch loop, so a verdict and its
        # message are one whichever ran; scratch bytes are never handed out.
        nonce = (self._nonce_base ^ index).to_bytes(12, "big")
        if sealing:
            if index == 0 and self._first_padding:
                return None
            n = len(data)
            record = _scratch(n + 1)
            record[:n] = data
            record[n] = 2 if final else 1
            kernel: Any = self._encrypt.__self__  # type: ignore[attr-defined]  # the bound AEAD
            try:
                return kernel.encrypt(nonce, record, None), None
            except Exception:  # judged below, as the batch loop judges it
                return self.run_one_batched(True, index, data, final, n + OVERHEAD)
        n = len(data) - TAG_SIZE
        if n > 0:
            record = _scratch(n)
            try:
                self._decrypt(nonce, data, None, record)
            except Exception:  # judged below, as the batch loop judges it
                n = 0
            if n and record[-1] == (2 if final else 1):
                return bytes(record[:-1]), None
        return self.run_one_batched(False, index, data, final, len(data))

    def _seal_run(
        self, first: int, count: int, src: memoryview, final: bool, out: memoryview
    ) -> tuple[int, Exception | None]:
        # A record's plaintext is data || delimiter || pad zero octets, and the source's
        # bytes are not followed by the delimiter, so each record is laid out in this
        # thread's reused scratch buffer (one copy of its data, no allocation) and sealed
        # from there into ``out``: input and output never overlap (the native kernel's
        # binding takes them as two distinct buffers; the same memory as both is
        # undefined behaviour there). As fast as laying the record out in ``out`` and
        # sealing it in place (A/B, 1 MiB chunks); the copy itself, about 2.3 us of a
        # 64 KiB record, stays: the one-shot AEAD takes the plaintext as one buffer, and
        # a streaming GCM context per record costs more. The delimiter and padding of a
        # run of records alike are written once. Only record 0 has padding: its leading
        # ``pad`` plaintext bytes go behind the delimiter.
        encrypt, base = self._encrypt, self._nonce_base
        full, last = self.segment_size, first + count - 1
        pad = self._first_padding if first == 0 else 0
        # Runs of records alike: (first index, stop, data bytes, delimiter, padding).
        runs = [(first, first + 1, full, 1, pad)] if pad and count > 1 else []
        if len(runs) + 1 < count:
            runs.append((first + len(runs), last, full, 1, 0))
        n, delimiter = len(src) - full * (count - 1), 2 if final else 1
        runs.append((last, last + 1, n, delimiter, pad if count == 1 else 0))
        scratch = _scratch(full + 1 if count > 1 else n + 1)
        pos = written = 0
        try:
            for start, stop, n, delimiter, pad in runs:
                step, cut = n + OVERHEAD, n - pad
                record, data = scratch[: n + 1], scratch[:cut]
                record[cut] = delimiter
                if pad:
                    record[cut + 1 :] = bytes(pad)
                for index in range(start, stop):
                    data[:] = src[pos + pad : pos + n]
                    encrypt(
                        (base ^ index).to_bytes(12, "big"),
                        record,
                        None,
                        out[written : written + step],
                    )
                    pos += n
                    written += step
        except Exception as exc:
            return written, exc
        return written, None

    def _open_run(
        self, index: int, count: int, src: memoryview, final: bool, out: memoryview
    ) -> tuple[int, Exception | None]:
        # Each record is opened straight into ``out``: its plaintext (data, delimiter)
        # is one byte longer than the data, which the next record then overwrites. A
        # record with no room for that byte in ``out`` (the last of a job: a job's
        # out_size is its exact data length, so that the jobs of a batch fill their output
        # object end to end and it is handed out without a copy) is opened in a scratch
        # buffer. Only a record that is not data || 0x01 goes through _unpad.
        decrypt, base = self._decrypt, self._nonce_base
        step = self.segment_size + OVERHEAD
        room = len(out)
        size = len(src)
        pos = written = 0
        last = index + count - 1
        try:
            while True:
                is_last = index == last
                end = size if is_last else pos + step
                n = end - pos - TAG_SIZE  # the record's plaintext: data, delimiter, zeros
                if n < 1:
                    raise TruncatedStreamError(
                        f"aes128gcm record {index} is {end - pos} bytes, shorter than a "
                        f"delimiter and a tag ({OVERHEAD}): the body was truncated"
                    )
                scratch = written + n > room
                record = _scratch(n) if scratch else out[written : written + n]
                try:
                    decrypt((base ^ index).to_bytes(12, "big"), src[pos:end], None, record)
                except InvalidTag:
                    raise _forged(index) from None
                if is_last or record[-1] != 1:
                    n = self._unpad(index, record, final and is_last)
                else:
                    n -= 1
                if scratch:
                    out[written : written + n] = record[:n]
                written += n
                if is_last:
                    return written, None
                pos = end
                index += 1
        except Exception as exc:
            return written, exc

    @staticmethod
    def _unpad(index: int, record: memoryview, final: bool) -> int:
        """The data length of an opened record (its plaintext: data, delimiter, zeros)."""
        end = len(record)
        if end and not record[end - 1]:
            end = len(bytes(record).rstrip(b"\x00"))
        if end == 0:
            raise FormatError(
                f"aes128gcm record {index} holds no padding delimiter (all zero octets): "
                "the sender is broken"
            )
        delimiter = record[end - 1]
        if delimiter != (2 if final else 1):
            if final and delimiter == 1:
                raise TruncatedStreamError(
                    f"the aes128gcm body ended after record {index}, which says more "
                    "records follow: the body was truncated"
                )
            what = (
                "a record follows the last record (delimiter 2 before the end)"
                if delimiter == 2
                else "wrong padding delimiter (must be 1, or 2 in the last record)"
            )
            raise FormatError(f"aes128gcm record {index}: {what}")
        return end - 1


def encrypted_length(
    plaintext_length: int,
    record_size: int | None = None,
    *,
    segment_size: int | None = None,
    keyid: bytes | str = b"",
    padding: int = 0,
) -> int:
    """The exact length of the body :class:`EceEncryptor` writes for this much plaintext
    (the sizes as it takes them).

    Use it for ``Content-Length`` when the plaintext length is known. Raises
    :class:`InvalidParameterError`.
    """
    record_size = _record_size(segment_size, record_size)
    _check_padding(padding, record_size)
    if plaintext_length < 0:
        raise InvalidParameterError(f"plaintext length cannot be negative: {plaintext_length}")
    units = plaintext_length + padding
    records = max(1, -(-units // (record_size - OVERHEAD)))
    return HEADER_SIZE + len(_keyid_bytes(keyid)) + units + OVERHEAD * records


def _check_padding(padding: int, record_size: int) -> None:
    limit = record_size - MIN_RECORD_SIZE
    if not isinstance(padding, int) or not 0 <= padding <= limit:
        raise InvalidParameterError(
            f"padding goes into the first record and must be 0..{limit} bytes for record "
            f"size {record_size}, got {padding!r}"
        )


class EceEncryptor(SegmentedEncryptor):
    """Encrypt a body into the ``aes128gcm`` coding (sans-I/O transform).

    ``key`` is the 16-byte input keying material (bytes or :class:`SecretKey`) or a
    :class:`KeyRing` (its active key; the key id then defaults to that key's id).
    ``salt`` defaults to 16 random bytes and must never repeat under one key.
    ``segment_size`` is the plaintext bytes of a full record (the keyword every format
    shares); ``record_size`` is the same as RFC 8188's ``rs``, ciphertext bytes per record
    (``segment_size`` + :data:`OVERHEAD`): give one of them (default
    :data:`DEFAULT_RECORD_SIZE`). ``padding`` zero octets are added to the first record. The first ``update`` returns
    the header. Raises :class:`InvalidKeySizeError`, :class:`InvalidParameterError`,
    :class:`LimitExceededError`.
    """

    __slots__ = ("header",)

    def __init__(
        self,
        key: EceKey | KeyRing,
        *,
        salt: bytes | None = None,
        segment_size: int | None = None,
        record_size: int | None = None,
        keyid: bytes | str = b"",
        padding: int = 0,
    ) -> None:
        record_size = _record_size(segment_size, record_size)
        _check_padding(padding, record_size)
        kid = _keyid_bytes(keyid)
        if isinstance(key, KeyRing):
            ikm: EceKey = _in_memory(key.active)
            kid = kid or _keyid_bytes(key.active.key_id)
        else:
            ikm = key
        salt = random_bytes(SALT_SIZE) if salt is None else as_bytes(salt, "salt")
        codec = EceCodec(ikm, salt, record_size, first_padding=padding)
        self.header = EceHeader(salt, record_size, kid)
        super().__init__(codec, self.header.to_bytes())
        if padding:
            jobs = self.feed(bytes(padding))  # moved behind the delimiter by the codec
            assert not jobs


def _in_memory(key: SecretKey | Pkcs11Key) -> SecretKey:
    """A key ring's key for RFC 8188, which has no place for a token-wrapped data key:
    a :class:`Pkcs11Key` is refused with :class:`InvalidParameterError`."""
    if isinstance(key, Pkcs11Key):
        raise InvalidParameterError(
            f"aes128gcm (RFC 8188) has no place for a token-wrapped data key, so the token "
            f"key {key.key_id!r} cannot encrypt or decrypt it; use a key in memory"
        )
    return key


def _lookup(source: EceKeySource, keyid: bytes) -> EceKey:
    """The IKM for ``keyid``; raises :class:`UnknownKeyError`."""
    if isinstance(source, bytes | bytearray | memoryview | SecretKey):
        return source
    shown = keyid.decode("utf-8", "replace")[:64]
    try:
        text: str | None = keyid.decode()
    except UnicodeDecodeError:
        text = None
    found: EceKey | None = None
    if isinstance(source, KeyRing):
        if not keyid:
            raise UnknownKeyError("the aes128gcm body names no key id, so a KeyRing cannot pick")
        if text is None:
            raise UnknownKeyError("the aes128gcm key id is not UTF-8, so no KeyRing id matches")
        return _in_memory(source.get(text))
    if isinstance(source, Mapping):
        table: Mapping[Any, EceKey] = source
        found = table.get(keyid)
        if found is None and text is not None:
            found = table.get(text)
    elif callable(source):
        try:
            found = source(keyid)
        except UnknownKeyError:
            raise
        except KeyError:
            found = None
    else:
        raise InvalidParameterError(
            "key must be bytes, a SecretKey, a KeyRing, a mapping or a callable, "
            f"not {type(source).__name__}"
        )
    if found is None:
        raise UnknownKeyError(f"no key for aes128gcm key id {shown!r}")
    return found


class EceDecryptor(SegmentedDecryptor):
    """Decrypt an ``aes128gcm`` body, releasing each record only after it verified.

    ``key`` is the IKM itself (the header's key id is then ignored) or picks it by key
    id: a :class:`KeyRing`, a mapping, or a callable (see :data:`EceKeySource`).
    ``max_record_size`` bounds the memory a hostile header can demand. A record is
    released once the first byte after it arrives (the last record may be full-size).
    Raises :class:`AuthenticationError`, :class:`TruncatedStreamError`,
    :class:`FormatError`, :class:`UnknownKeyError`, :class:`InvalidKeySizeError`,
    :class:`LimitExceededError` (see the module docstring for which fault gives which).
    """

    __slots__ = ("_allow_no_records", "_header")

    def __init__(
        self,
        key: EceKeySource,
        *,
        max_record_size: int = DEFAULT_MAX_RECORD_SIZE,
        allow_no_records: bool = False,
    ) -> None:
        if isinstance(key, bytes | bytearray | memoryview | SecretKey):
            _ikm(key)  # a wrong key size fails here, not at the first record
        self._header: EceHeader | None = None
        self._allow_no_records = allow_no_records

        def reader(data: bytearray) -> tuple[SegmentCodec, int] | None:
            header = read_header(data)
            if header is None:
                return None
            if header.record_size > max_record_size:
                raise LimitExceededError(
                    f"aes128gcm record size {header.record_size} exceeds this decoder's "
                    f"limit of {max_record_size} bytes; raise max_record_size if the "
                    "sender is trusted"
                )
            codec = EceCodec(_lookup(key, header.keyid), header.salt, header.record_size)
            self._header = header
            return codec, header.size

        super().__init__(reader)

    @property
    def header(self) -> EceHeader | None:
        """The parsed header once it has arrived (not yet authenticated by a record)."""
        return self._header

    def finish(self) -> list[SegmentJob]:
        """The job opening the last record; raises :class:`TruncatedStreamError` if none."""
        if self._allow_no_records:
            self._check()
            try:
                self._last_look()
            except Exception as exc:
                raise self._break(exc) from None
            if self._header is not None and self._index == 0 and not self._held_len:
                self._finish()
                return []
        return super().finish()


#: RFC 8188 ``aes128gcm``'s format descriptor (``segment_size``: plaintext bytes per
#: record, the record size less its overhead).
FORMAT = SegmentedFormat(
    "ece",
    encryptor=lambda o: EceEncryptor(
        cast("EceKey | KeyRing", o.key),
        segment_size=o.segment_size,
        salt=o.salt,
        keyid=o.keyid,
        padding=o.padding,
    ),
    decryptor=lambda o: EceDecryptor(
        cast("EceKeySource", o.key),
        max_record_size=or_default(o.max_record_size, DEFAULT_MAX_RECORD_SIZE),
        allow_no_records=o.allow_no_records,
    ),
    writes=frozenset({"key", "segment_size", "salt", "keyid", "padding"}),
    reads=frozenset({"key", "max_record_size", "allow_no_records"}),
)
