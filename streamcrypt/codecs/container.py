"""The native streamcrypt container, version 1 (specified in docs/FORMAT.md).

Theory of operation
-------------------
``header || segment_0 || ... || segment_n``. The header names the suite, the plaintext
segment size, a random salt and nonce prefix, and the id of the master key; it ends with
an HMAC-SHA256 tag over itself and the stream's associated data. Two HMAC-SHA256 calls
keyed by the master key, each over its own label and the whole header body (salt
included), give the segment key and the header tag (so the tag commits to the master key
and is checked before any segment is opened). Segment *i* is sealed with nonce
``prefix || uint32_be(i) || last_flag``. The final segment is always shorter than a full
one (possibly empty), so neither side needs read-ahead: a full segment is never final.

Version 2 is the same container for a key that stays in a PKCS#11 token
(:class:`~streamcrypt.keys.Pkcs11Key`): the writer makes a fresh 32-byte data key, the
token wraps it (AES-256-GCM), the header carries the wrapped key after the key id, and the
data key stands where the master key stands in version 1. A reader unwraps it in the
token and goes on as in version 1.
"""

from __future__ import annotations

import hmac
import operator
import struct
from dataclasses import dataclass
from typing import Any, NamedTuple, cast

from ..abc import Buffer
from ..errors import (
    AuthenticationError,
    FormatError,
    InvalidParameterError,
    TruncatedStreamError,
    UnknownKeyError,
    UnsupportedFormatError,
)
from ..keys import KeyRing, Pkcs11Key, SecretKey, as_secret_key, hmac_digests, random_bytes
from ..primitives import (
    AES256GCM,
    Aead,
    ChaCha20Poly1305Suite,
    XChaCha20Poly1305,
)
from ._format import FormatOptions, ReadAt, SegmentedFormat, or_default
from ._segmented import (
    CounterCodec,
    SegmentCodec,
    SegmentedDecryptor,
    SegmentedEncryptor,
    SegmentLayout,
)

__all__ = [
    "DEFAULT_SEGMENT_SIZE",
    "FORMAT",
    "MAGIC",
    "MAX_SEGMENT_SIZE",
    "MIN_SEGMENT_SIZE",
    "SUITE_IDS",
    "ContainerCodec",
    "ContainerHeader",
    "KeyLike",
    "StreamDecryptor",
    "StreamEncryptor",
    "layout",
    "read_header",
    "sealing_layout",
]

#: The four bytes that start a native container.
MAGIC = b"SCRY"
VERSION = 1
#: The version of a header that carries a token-wrapped data key (docs/FORMAT.md).
WRAPPED_VERSION = 2
#: Plaintext bytes per segment unless ``segment_size=`` says otherwise.
DEFAULT_SEGMENT_SIZE = 65536
#: Smallest ``segment_size`` a container may declare.
MIN_SEGMENT_SIZE = 256
#: Largest ``segment_size`` a container may declare (16 MiB).
MAX_SEGMENT_SIZE = 1 << 24
SALT_SIZE = 32
TAG_SIZE = 32
#: The labels in front of the header body in the two HMACs of the key schedule
#: (docs/FORMAT.md, "Keys"): they differ at their 26th byte, so neither is a prefix of the
#: other and no segment-key input is ever a header-tag input.
_SEGMENT_KEY = b"streamcrypt container v1 segment key"
_HEADER_TAG = b"streamcrypt container v1 header tag"
#: The associated data of a token's wrap of a version-2 data key: a blob wrapped for a
#: container opens for nothing else the token key wraps.
_WRAP_AAD = b"streamcrypt container v2 data key"
#: A wrapped data key's smallest size: GCM's IV and tag (around the 32-byte key: 60).
_MIN_WRAPPED = 28

#: Suite ids on the wire.
SUITE_IDS: dict[str, int] = {
    "aes-256-gcm": 1,
    "chacha20-poly1305": 2,
    "xchacha20-poly1305": 3,
}
_SUITES: dict[int, type[Aead]] = {1: AES256GCM, 2: ChaCha20Poly1305Suite, 3: XChaCha20Poly1305}
#: Each suite's id, class and nonce prefix length by name, as a writer looks them up.
_WRITES: dict[str, tuple[int, type[Aead], int]] = {
    name: (i, _SUITES[i], _SUITES[i].nonce_size - 5) for name, i in SUITE_IDS.items()
}
_FIXED = struct.Struct(">4sBBI")  # magic, version, suite id, segment size
_pack_fixed, _unpack_fixed = _FIXED.pack, _FIXED.unpack_from
#: Where a header's salt and nonce prefix start.
_SALT_AT = _FIXED.size
_PREFIX_AT = _SALT_AT + SALT_SIZE
#: Each suite id's class and where a header of it has its key id's length byte.
_READS: dict[int, tuple[type[Aead], int]] = {
    i: (cls, _PREFIX_AT + cls.nonce_size - 5) for i, cls in _SUITES.items()
}
#: Segment 0's non-final nonce suffix (uint32 segment counter, last-segment flag).
_NO_SUFFIX = bytes(5)
MAX_HEADER_SIZE = _FIXED.size + SALT_SIZE + 19 + 1 + 255 + 1 + 255 + TAG_SIZE

#: A native-container key: 32 bytes, a :class:`SecretKey`, a token-held
#: :class:`Pkcs11Key`, or a :class:`KeyRing` of them (by key id).
KeyLike = Buffer | SecretKey | Pkcs11Key | KeyRing


@dataclass(frozen=True, slots=True)
class ContainerHeader:
    """A parsed (not yet authenticated) container header."""

    suite: str
    segment_size: int
    salt: bytes
    nonce_prefix: bytes
    key_id: str
    #: The token-wrapped data key of a version-2 header; empty in version 1.
    wrapped: bytes = b""

    def body(self) -> bytes:
        """The header bytes that precede the tag."""
        return _body(
            SUITE_IDS[self.suite],
            self.segment_size,
            self.salt + self.nonce_prefix,
            self.key_id,
            self.wrapped,
        )


def _body(
    suite_id: int, segment_size: int, salt_prefix: bytes, key_id: str, wrapped: bytes
) -> bytes:
    """The header bytes that precede the tag (docs/FORMAT.md), written once: version 2
    when there is a wrapped data key, which follows the key id. ``salt_prefix``: the salt
    and the nonce prefix, one after the other (as a writer draws them, in one call)."""
    fixed = _pack_fixed(MAGIC, WRAPPED_VERSION if wrapped else VERSION, suite_id, segment_size)
    if not key_id and not wrapped:  # a bare key's header: an empty key id (0.2 us less)
        return fixed + salt_prefix + b"\x00"
    kid = key_id.encode()
    tail = bytes((len(wrapped),)) + wrapped if wrapped else b""
    return b"".join((fixed, salt_prefix, bytes((len(kid),)), kid, tail))


class ContainerCodec(CounterCodec):
    """Seals and opens the segments of one container stream under nonce
    ``prefix || uint32_be(i) || last_flag``, no associated data (docs/FORMAT.md): the
    format's segment rule is :class:`CounterCodec`'s batch loop; one segment alone (a job
    of one segment, and the one-shot path's segment 0) is the same rule through the
    kernel's own call (:meth:`CounterCodec.run_one`).

    The native kernel is bound once per stream (``Aead.bind``: from the suite class and
    the derived key, no suite object); XChaCha20's subkey depends only on the fixed
    prefix, so it is derived once too. Opening, a segment shorter than its tag is a
    :class:`TruncatedStreamError`, any other failure :class:`AuthenticationError`.
    """

    __slots__ = ("_decrypt", "_encrypt", "_name", "_nonce", "first_segment_size", "segment_size")

    _suffix = struct.Struct(">IB")
    #: Where the suffix starts in the kernel's 12-byte nonce: the 7-byte prefix (for
    #: XChaCha20, the prefix's last 3 bytes after the 4 zero bytes of the subkey's nonce).
    _suffix_at = 7

    def __init__(self, suite: type[Aead], key: bytes, prefix: bytes, segment_size: int) -> None:
        kernel, self._nonce = suite.bind(key, prefix + _NO_SUFFIX)  # the kernel's
        self._encrypt = kernel.encrypt_into
        self._decrypt = kernel.decrypt_into
        self._name = suite.name
        self.segment_size = self.first_segment_size = segment_size

    def _check_last(self, index: int, size: int, final: bool) -> None:
        if size < 16:
            raise TruncatedStreamError("a segment is shorter than its tag")

    def _failed(self, index: int, final: bool, segment: memoryview, out: memoryview) -> Exception:
        return AuthenticationError(
            f"segment {index} did not verify ({self._name}): tampered, reordered, "
            "truncated or extended stream"
        )


def _derive(master: bytes | SecretKey, body: bytes, aad: Buffer) -> list[bytes]:
    """The segment key and the header tag of the header ``body`` (docs/FORMAT.md,
    "Keys"), for versions 1 and 2 alike: two HMAC-SHA256 keyed by the 32-byte master
    (or data) key, each over its label and the body, which holds the stream's salt. The
    segment key's is HKDF-Expand's one block (its counter byte 0x01 last). Returns
    ``[segment key, tag]``."""
    return hmac_digests(master, (_SEGMENT_KEY + body + b"\x01", _HEADER_TAG + body + aad))


#: What ``key=`` may be, as error messages say it.
_KEY_KINDS = "bytes-like (bytes, bytearray, memoryview), a SecretKey, a Pkcs11Key or a KeyRing"


def _master_key(key: KeyLike, header: _Header | None = None) -> tuple[bytes | SecretKey, str]:
    """The 32-byte key the header's derivation takes: for a writer (``header`` None)
    ``key`` itself or a :class:`KeyRing`'s active key, for a reader the key the header
    names; for a token key, the data key the header's wrapped key opens to in the token.
    The one place key material becomes a container key, so every path checks its size
    (:class:`InvalidKeySizeError`) and a ring cannot pass a short key; raises
    :class:`UnknownKeyError` for an id the ring lacks, :class:`AuthenticationError` for a
    wrapped key that does not open or a header whose version does not fit the key.
    Returns the key (the caller's :class:`SecretKey` itself, which keeps the HMAC
    context it keys for its next message, else bytes) and its id (what a writer's header
    names). A bare key of 32 bytes or a :class:`SecretKey` of 32 is taken at once (no
    :class:`SecretKey` made and no type checked twice per message)."""
    if header is None or not header.wrapped:
        if type(key) is bytes and len(key) == 32:
            return key, ""
        if type(key) is SecretKey and len(key) == 32:
            return key, key.key_id
    what = "a container key"
    if isinstance(key, KeyRing):
        if header is not None and header.key_id == "":
            raise UnknownKeyError("the stream names no key id, so a KeyRing cannot pick a key")
        entry = key.active if header is None else key.get(header.key_id)
        what = f"the container key {entry.key_id!r} of the KeyRing"
        chosen: Buffer | SecretKey | Pkcs11Key = entry
    else:
        chosen = key
    if isinstance(chosen, Pkcs11Key):
        if header is None or not header.wrapped:
            raise AuthenticationError(
                "container header did not authenticate: a token key reads only headers "
                "with a wrapped data key (version 2)"
            )
        data_key = chosen.unwrap(header.wrapped, aad=_WRAP_AAD)
        unwrapped = as_secret_key(data_key, 32, what="an unwrapped data key", kinds=_KEY_KINDS)
        return unwrapped.secret_bytes(), ""
    if header is not None and header.wrapped:
        raise AuthenticationError(
            "container header did not authenticate: it carries a token-wrapped data key "
            "(version 2), so it opens only with the token key it names"
        )
    master = as_secret_key(chosen, 32, what=what, kinds=_KEY_KINDS)
    # a SecretKey made here of other bytes-like would keep a context for nothing
    return master if master is chosen else master.secret_bytes(), master.key_id


def _reader_key(key: KeyLike) -> SecretKey | bytes | Pkcs11Key | KeyRing:
    """A reader's key, checked at once, before any data (a wrong type or size): a ring,
    a token key, or 32 bytes as ``bytes`` or a :class:`SecretKey` as it is, else as the
    :class:`SecretKey` the header's key derivation takes."""
    if (type(key) is bytes or type(key) is SecretKey) and len(key) == 32:
        return key
    if isinstance(key, KeyRing | Pkcs11Key):
        return key
    return as_secret_key(key, 32, kinds=_KEY_KINDS)


class _Header(NamedTuple):
    """A header as :func:`_parse` reads it: what a reader needs, and ``end``, the offset
    of its tag (a named tuple: 0.3 us to make, where the frozen :class:`ContainerHeader`
    that :func:`read_header` returns takes 0.9)."""

    suite: type[Aead]
    segment_size: int
    nonce_prefix: bytes
    key_id: str
    wrapped: bytes
    end: int


#: The constant-time comparison of a header tag.
_equal = hmac.compare_digest

#: Makes a tuple of a class: a :class:`_Header` positionally, 0.15 us less than its
#: ``__new__``.
_new_tuple = tuple.__new__


def read_header(data: bytes) -> tuple[ContainerHeader, int] | None:
    """Parse a header from the start of ``data``: ``None`` if more bytes are needed.

    Returns the header and the offset of its tag. Raises :class:`FormatError` for bad
    magic, :class:`UnsupportedFormatError` for an unknown version or suite.
    """
    found = _parse(data)
    if found is None:
        return None
    suite, size, prefix, key_id, wrapped, end = found
    salt = data[_SALT_AT:_PREFIX_AT]  # what a reader's keys take in the body, not alone
    return ContainerHeader(suite.name, size, salt, prefix, key_id, wrapped), end


def _parse(data: bytes) -> _Header | None:
    """The header rule of a reader (docs/FORMAT.md, "Reading", step 1), written once: as
    :func:`read_header`."""
    if len(data) < _SALT_AT:  # the fixed part's size
        if not MAGIC.startswith(data[:4]):
            raise FormatError("not a streamcrypt container (bad magic)")
        return None
    magic, version, suite_id, segment_size = _unpack_fixed(data)
    if magic != MAGIC:
        raise FormatError("not a streamcrypt container (bad magic)")
    if version != VERSION and version != WRAPPED_VERSION:
        raise UnsupportedFormatError(f"unsupported container version {version}; this reads 1 and 2")
    found = _READS.get(suite_id)
    if found is None:
        raise UnsupportedFormatError(f"unknown container suite id {suite_id}")
    suite, pos = found  # pos: where the key id's length byte is
    if not MIN_SEGMENT_SIZE <= segment_size <= MAX_SEGMENT_SIZE:
        raise FormatError(
            f"header segment size {segment_size} is outside "
            f"{MIN_SEGMENT_SIZE}..{MAX_SEGMENT_SIZE}: corrupt or hostile header"
        )
    if len(data) <= pos:
        return None
    prefix = data[_PREFIX_AT:pos]
    kid_len = data[pos]
    pos += 1
    if len(data) < pos + kid_len:
        return None
    key_id = ""
    if kid_len:
        try:
            key_id = data[pos : pos + kid_len].decode()
        except UnicodeDecodeError:
            raise FormatError("header key id is not valid UTF-8") from None
        pos += kid_len
    wrapped = b""
    if version == WRAPPED_VERSION:
        if len(data) < pos + 1:
            return None
        wrapped_len = data[pos]
        if wrapped_len < _MIN_WRAPPED:
            raise FormatError(
                f"header wrapped key of {wrapped_len} bytes is shorter than any wrapped key"
            )
        pos += 1
        if len(data) < pos + wrapped_len:
            return None
        wrapped = bytes(data[pos : pos + wrapped_len])
        pos += wrapped_len
    return _new_tuple(_Header, (suite, segment_size, prefix, key_id, wrapped, pos))


def _open_header(key: KeyLike, aad: Buffer, head: bytes) -> tuple[ContainerCodec, int] | None:
    """The keyed codec of the header at the start of ``head`` and the header's length,
    its tag checked (:class:`AuthenticationError`); ``None`` while ``head`` is short.
    ``key`` as :func:`_reader_key` gives it."""
    header = _parse(head)
    if header is None or len(head) < header.end + TAG_SIZE:
        return None
    return _keyed(key, aad, head, header), header.end + TAG_SIZE


def _keyed(key: KeyLike, aad: Buffer, head: bytes, header: _Header) -> ContainerCodec:
    """The codec of a parsed ``header`` whose tag lies at ``head[header.end:]``, once the
    tag checked: the one place a reader turns a header into keys. ``key`` as
    :func:`_reader_key` gives it."""
    pos = header.end
    body = head[:pos]
    seg_key, tag = _derive(_master_key(key, header)[0], body, aad)
    if not _equal(tag, head[pos : pos + TAG_SIZE]):
        raise AuthenticationError(
            "container header did not authenticate: wrong key, wrong associated data, "
            "or a tampered header"
        )
    return ContainerCodec(header.suite, seg_key, header.nonce_prefix, header.segment_size)


def _start(
    key: KeyLike,
    suite: str,
    segment_size: int,
    aad: Buffer,
    salt: bytes | None = None,
    nonce_prefix: bytes | None = None,
) -> tuple[ContainerCodec, bytes]:
    """A new stream's codec and header bytes (body and tag): the one place a writer
    makes a header. Raises as :class:`StreamEncryptor`."""
    found = _WRITES.get(suite)
    if found is None:
        raise UnsupportedFormatError(
            f"unknown suite {suite!r}; the container supports {', '.join(SUITE_IDS)}"
        )
    suite_id, aead_cls, prefix_len = found
    if type(segment_size) is not int or not MIN_SEGMENT_SIZE <= segment_size <= MAX_SEGMENT_SIZE:
        raise InvalidParameterError(
            f"segment size must be an int of {MIN_SEGMENT_SIZE}..{MAX_SEGMENT_SIZE} bytes, "
            f"got {segment_size!r}"
        )
    # the master key (as _master_key gives it), the id the header names, and the wrapped
    # data key: empty unless the key, or the ring's active key, is a token's (then the
    # master key is a fresh data key, wrapped in the token)
    master: bytes | SecretKey
    chosen = key.active if isinstance(key, KeyRing) else key
    if isinstance(chosen, Pkcs11Key):
        master = random_bytes(32)
        key_id, wrapped = chosen.key_id, chosen.wrap(master, aad=_WRAP_AAD)
    else:
        (master, key_id), wrapped = _master_key(key), b""
    if salt is None and nonce_prefix is None:
        fresh = random_bytes(SALT_SIZE + prefix_len)  # one system call for both
        prefix = fresh[SALT_SIZE:]
    else:
        salt = random_bytes(SALT_SIZE) if salt is None else salt
        prefix = random_bytes(prefix_len) if nonce_prefix is None else nonce_prefix
        if len(salt) != SALT_SIZE or len(prefix) != prefix_len:
            raise InvalidParameterError(
                f"salt must be {SALT_SIZE} bytes and nonce prefix {prefix_len} bytes"
            )
        fresh = salt + prefix
    body = _body(suite_id, segment_size, fresh, key_id, wrapped)
    seg_key, tag = _derive(master, body, aad)
    return ContainerCodec(aead_cls, seg_key, prefix, segment_size), body + tag


def _seal_message(options: FormatOptions, plaintext: Buffer) -> bytes | None:
    """A message shorter than one segment, sealed at once: the header, then segment 0
    as the final segment (the codec's rule, as the engine runs a job of one segment).
    ``None`` for a longer message (the engine's path). ``plaintext`` is bytes-like of
    single bytes (the one-shot call's ``as_buffer``)."""
    size = options.segment_size
    if size is None:
        size = DEFAULT_SEGMENT_SIZE
    if len(plaintext) >= size:
        return None
    key: KeyLike = options.key  # type: ignore[assignment]  # _check: there is one
    codec, header = _start(key, options.suite or "aes-256-gcm", size, options.aad)
    # as the engine runs a job of one segment: the kernel makes the output, a failure
    # is judged by the batch loop (CounterCodec.run_one)
    sealed, error = codec.run_one(True, 0, plaintext, True)
    if error is not None:
        raise error
    return header + sealed


def _open_message(options: FormatOptions, ciphertext: Buffer) -> bytes | None:
    """A message of one segment, opened at once (all or nothing, as the batch path):
    ``None`` for anything else, a short or malformed one included, which the engine's
    path then refuses with its typed error. ``ciphertext`` as :func:`_seal_message`'s
    ``plaintext``."""
    key = _reader_key(options.key)  # type: ignore[arg-type]  # _check: there is one
    # _parse reads slices as bytes: bytes as they are, else the header's bytes (a copy)
    head = ciphertext if type(ciphertext) is bytes else bytes(ciphertext[:MAX_HEADER_SIZE])
    header = _parse(head)
    if header is None:
        return None
    start = header.end + TAG_SIZE
    if not start + 16 <= len(ciphertext) < start + header.segment_size + 16:
        return None
    codec = _keyed(key, options.aad, head, header)
    opened, error = codec.run_one(False, 0, memoryview(ciphertext)[start:], True)
    if error is not None:
        raise error
    return opened


class StreamEncryptor(SegmentedEncryptor):
    """Encrypt a stream into the native container (sans-I/O transform).

    ``key`` is 32 raw bytes, a :class:`SecretKey` (its ``key_id`` goes into the header) or
    a :class:`KeyRing` (its active key). Raises :class:`InvalidKeySizeError`,
    :class:`InvalidParameterError`, :class:`UnsupportedFormatError`.
    """

    __slots__ = ("header",)

    def __init__(
        self,
        key: KeyLike,
        *,
        suite: str = "aes-256-gcm",
        segment_size: int = DEFAULT_SEGMENT_SIZE,
        aad: Buffer = b"",
        salt: bytes | None = None,
        nonce_prefix: bytes | None = None,
    ) -> None:
        codec, header = _start(key, suite, segment_size, aad, salt, nonce_prefix)
        parsed = read_header(header)
        assert parsed is not None
        self.header = parsed[0]
        super().__init__(codec, header)


class StreamDecryptor(SegmentedDecryptor):
    """Decrypt a native container stream, releasing only verified segments.

    The header tag is checked before any segment is opened. Raises
    :class:`AuthenticationError`, :class:`TruncatedStreamError`, :class:`FormatError`,
    :class:`UnsupportedFormatError`, :class:`UnknownKeyError`.
    """

    __slots__ = ()

    def __init__(self, key: KeyLike, *, aad: Buffer = b"") -> None:
        checked = _reader_key(key)

        def reader(data: bytearray) -> tuple[SegmentCodec, int] | None:
            head = bytes(data[:MAX_HEADER_SIZE])  # bounded: a header fits in it
            if len(data) > MAX_HEADER_SIZE and read_header(head) is None:
                raise FormatError("container header is longer than any valid header")
            return _open_header(checked, aad, head)

        super().__init__(reader)


def layout(key: KeyLike, head: bytes, stream_size: int, *, aad: Buffer = b"") -> SegmentLayout:
    """Authenticate the header at the start of ``head`` and map a stream of ``stream_size`` bytes.

    ``head`` must hold at least the whole header (:data:`MAX_HEADER_SIZE` bytes suffice).
    """
    opened = _open_header(_reader_key(key), aad, head[:MAX_HEADER_SIZE])
    if opened is None:
        raise FormatError("the data is shorter than a container header")
    codec, size = opened
    return SegmentLayout(codec, size, stream_size)


def sealing_layout(
    key: KeyLike, header: bytes, plaintext_size: int, *, aad: Buffer = b""
) -> SegmentLayout:
    """Authenticate an encryptor's ``header`` and map the stream it starts once
    ``plaintext_size`` bytes are sealed behind it: with :meth:`SegmentLayout.seal_plan`,
    any worker holding the key can seal any range of segments of that stream.

    Raises :class:`AuthenticationError` (wrong key or associated data),
    :class:`FormatError`, :class:`UnknownKeyError`.
    """
    opened = _open_header(_reader_key(key), aad, header[:MAX_HEADER_SIZE])
    if opened is None:
        raise FormatError("the data is shorter than a container header")
    codec, size = opened
    return SegmentLayout.for_plaintext(codec, size, plaintext_size)


def _check(options: FormatOptions, mode: str) -> None:
    """At the call (``streamcrypt.open`` makes its file's encryptor later): a missing
    ``key=``, in the codec's own words for what a key must be."""
    if options.key is None:
        missing: Any = None
        try:
            as_secret_key(missing, 32, kinds=_KEY_KINDS)
        except InvalidParameterError as exc:
            raise InvalidParameterError(f'format="native" needs key=: {exc}') from None


def _header_size(head: bytes) -> int | None:
    parsed = read_header(head[:MAX_HEADER_SIZE])
    return None if parsed is None else parsed[1] + TAG_SIZE


def _layout(options: FormatOptions, read_at: ReadAt, stream_size: int) -> SegmentLayout:
    head = read_at(0, min(stream_size, MAX_HEADER_SIZE))
    return layout(cast("KeyLike", options.key), head, stream_size, aad=options.aad)


#: The native container's format descriptor (``format="native"``).
FORMAT = SegmentedFormat(
    "native",
    encryptor=lambda o: StreamEncryptor(
        cast("KeyLike", o.key),
        suite=o.suite or "aes-256-gcm",
        segment_size=or_default(o.segment_size, DEFAULT_SEGMENT_SIZE),
        aad=o.aad,
    ),
    decryptor=lambda o: StreamDecryptor(cast("KeyLike", o.key), aad=o.aad),
    writes=frozenset({"key", "suite", "segment_size", "aad"}),
    reads=frozenset({"key", "aad"}),
    check=_check,
    detect=operator.methodcaller("startswith", MAGIC),  # no Python frame a detection
    header_size=_header_size,
    max_header_size=MAX_HEADER_SIZE,
    layout=_layout,
    opens_files=True,
    seal_message=_seal_message,
    open_message=_open_message,
)
