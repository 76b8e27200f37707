"""Tink streaming AEAD (AES-GCM-HKDF-Streaming and AES-CTR-HMAC-Streaming), byte for byte.

Theory of operation
-------------------
A Tink streaming ciphertext is ``header || segment_0 || ... || segment_n`` with

    header = header_length (1 byte) || salt (derived_key_size bytes) || nonce_prefix (7 bytes)

so ``header_length = derived_key_size + 8``. Nothing in it names the key: a keyset of
several keys is tried key by key, as Tink does. Per stream, HKDF (the key's hash) over the
key value with the header's salt and the *associated data as info* gives the segment key
material; a wrong key or wrong associated data therefore shows up as a failing segment 0.

- AES-GCM-HKDF-Streaming: ``HKDF(len = derived_key_size)`` is the AES-GCM key; segment
  *i* is sealed with nonce ``prefix || uint32_be(i) || last_flag`` (12 bytes), no AAD,
  16-byte tag.
- AES-CTR-HMAC-Streaming: ``HKDF(len = derived_key_size + 32)`` splits into the AES key
  and a 32-byte HMAC key; segment *i* is AES-CTR with the 16-byte initial counter block
  ``nonce = prefix || uint32_be(i) || last_flag || 0x00000000`` and ends with the first
  ``tag_size`` bytes of ``HMAC(hash, nonce || ciphertext)``.

Every ciphertext segment but the last is ``ciphertext_segment_size`` bytes, except that
segment 0 shares that size with the header (its plaintext is ``header_length`` bytes
smaller). The last segment may be full-size, so a decryptor reads one segment ahead; a
stream cut at a segment boundary fails as :class:`AuthenticationError` (the last segment
present was sealed as non-final), a stream cut inside the final segment's tag as
:class:`TruncatedStreamError`.

Keys come from a Tink keyset (the cleartext JSON form, or the binary protobuf form), read
by :mod:`streamcrypt.codecs.tink_keyset` exactly as Tink reads it, or from a raw key
value plus parameters. The key and keyset classes live there and are re-exported here.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from collections.abc import Sequence
from functools import cache
from typing import cast

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from ..abc import Buffer, as_bytes
from ..errors import (
    AuthenticationError,
    FormatError,
    InvalidParameterError,
    TruncatedStreamError,
)
from ..keys import constant_time_equal, hkdf, random_bytes
from ..primitives import AES128GCM, AES256GCM, AesGcm
from ._format import FormatOptions, ReadAt, SegmentedFormat
from ._segmented import (
    CounterCodec,
    SegmentCodec,
    SegmentedDecryptor,
    SegmentedEncryptor,
    SegmentJob,
    SegmentLayout,
)
from .tink_keyset import (
    AES_CTR_HMAC_TYPE_URL,
    AES_GCM_HKDF_TYPE_URL,
    GCM_TAG_SIZE,
    MAX_CIPHERTEXT_SEGMENT_SIZE,
    NONCE_PREFIX_SIZE,
    TEMPLATES,
    AesCtrHmacStreamingParams,
    AesGcmHkdfStreamingParams,
    TinkHash,
    TinkKeyLike,
    TinkKeyset,
    TinkStreamingKey,
    TinkStreamingParams,
    load_keyset,
)

__all__ = [
    "AES_CTR_HMAC_TYPE_URL",
    "AES_GCM_HKDF_TYPE_URL",
    "FORMAT",
    "GCM_TAG_SIZE",
    "HMAC_KEY_SIZE",
    "MAX_CIPHERTEXT_SEGMENT_SIZE",
    "NONCE_PREFIX_SIZE",
    "TEMPLATES",
    "AesCtrHmacCodec",
    "AesCtrHmacStreamingParams",
    "AesGcmHkdfCodec",
    "AesGcmHkdfStreamingParams",
    "TinkHash",
    "TinkKeyLike",
    "TinkKeyset",
    "TinkStreamDecryptor",
    "TinkStreamEncryptor",
    "TinkStreamingCodec",
    "TinkStreamingKey",
    "TinkStreamingParams",
    "layout",
    "load_keyset",
]

#: Bytes of the derived HMAC key of AES-CTR-HMAC.
HMAC_KEY_SIZE = 32


def _hkdf(hash_name: TinkHash, ikm: bytes, salt: bytes, info: bytes, length: int) -> bytes:
    """RFC 5869 HKDF; SHA-1 (allowed by Tink, not by keys.hkdf) uses the stdlib HMAC."""
    if hash_name != "sha1":
        return hkdf(ikm, salt=salt, info=info, length=length, algorithm=hash_name)
    prk = hmac.new(salt, ikm, hashlib.sha1).digest()
    okm = block = b""
    counter = 1
    while len(okm) < length:
        block = hmac.new(prk, block + info + bytes([counter]), hashlib.sha1).digest()
        okm += block
        counter += 1
    return okm[:length]


# ---------------------------------------------------------------------------------- codecs


#: The last five bytes of a segment nonce: ``uint32_be(i) || last_flag``.
_SUFFIX = struct.Struct(">I?")


class TinkStreamingCodec(SegmentCodec):
    """The segments of one Tink stream; ``header_length`` and the geometry come from the key."""

    final_may_be_full = True

    __slots__ = ("_prefix", "ciphertext_segment_size", "first_segment_size", "segment_size")

    def __init__(self, params: TinkStreamingParams, prefix: bytes) -> None:
        self._prefix = prefix
        self.ciphertext_segment_size = params.ciphertext_segment_size
        self.segment_size = params.ciphertext_segment_size - self.overhead
        self.first_segment_size = self.segment_size - params.header_length

    def _segment_nonce(self, index: int, final: bool) -> bytes:
        """AES-CTR-HMAC's initial counter block: the segment nonce, then a zero counter."""
        block = bytearray(self._prefix + bytes(9))
        _SUFFIX.pack_into(block, NONCE_PREFIX_SIZE, index, final)
        return bytes(block)


class AesGcmHkdfCodec(TinkStreamingCodec, CounterCodec):
    """AES-GCM-HKDF-Streaming segments: AES-GCM, nonce ``prefix || u32be(i) || last``;
    the segment rule is :class:`CounterCodec`'s batch loop (one segment is a batch of
    one). Opening raises :class:`AuthenticationError`."""

    overhead = GCM_TAG_SIZE
    _suffix = _SUFFIX
    _suffix_at = NONCE_PREFIX_SIZE

    __slots__ = ("_decrypt", "_encrypt", "_name", "_nonce")

    def __init__(self, params: AesGcmHkdfStreamingParams, key: bytes, prefix: bytes) -> None:
        super().__init__(params, prefix)
        aead: AesGcm = (AES128GCM if len(key) == 16 else AES256GCM)(key)
        kernel, self._nonce = aead.native(prefix + bytes(5))
        self._encrypt = kernel.encrypt_into
        self._decrypt = kernel.decrypt_into
        self._name = aead.name

    def _failed(self, index: int, final: bool, segment: memoryview, out: memoryview) -> Exception:
        return AuthenticationError(
            f"Tink segment {index} did not verify ({self._name}): wrong key or associated "
            "data, or a tampered, reordered or truncated stream"
        )


class AesCtrHmacCodec(TinkStreamingCodec):
    """AES-CTR-HMAC-Streaming segments: AES-CTR then a truncated HMAC over nonce || ciphertext.

    ``overhead`` (the tag size) is a class attribute, so :meth:`create` returns an instance
    of a cached subclass per tag size.
    """

    __slots__ = ("_aes", "_mac")

    def __init__(
        self, params: AesCtrHmacStreamingParams, aes_key: bytes, mac_key: bytes, prefix: bytes
    ) -> None:
        if params.tag_size != self.overhead:
            raise InvalidParameterError("use AesCtrHmacCodec.create() for this tag size")
        super().__init__(params, prefix)
        self._aes = algorithms.AES(aes_key)  # the key checked and held once a stream
        self._mac = hmac.new(mac_key, digestmod=params.hmac_hash)

    @staticmethod
    def create(
        params: AesCtrHmacStreamingParams, aes_key: bytes, mac_key: bytes, prefix: bytes
    ) -> AesCtrHmacCodec:
        return _ctr_codec_class(params.tag_size)(params, aes_key, mac_key, prefix)

    def _tag(self, nonce: bytes, ciphertext: Buffer) -> bytes:
        mac = self._mac.copy()
        mac.update(nonce)
        mac.update(ciphertext)
        return mac.digest()[: self.overhead]

    def _ctr(self, nonce: bytes, data: Buffer, out: memoryview) -> int:
        # A context per segment (its counter block is the segment's nonce), made straight
        # from cryptography's: the transform wrapper's checks cost 2-3 us a segment more.
        return Cipher(self._aes, modes.CTR(nonce)).encryptor().update_into(data, out)

    def seal_segment(self, index: int, plaintext: Buffer, final: bool, out: memoryview) -> int:
        nonce = self._segment_nonce(index, final)
        n = len(plaintext)
        if len(out) != n + self.overhead:
            raise InvalidParameterError(
                f"AES-CTR-HMAC segment output must be {n + self.overhead} bytes, got {len(out)}"
            )
        self._ctr(nonce, plaintext, out[:n])
        out[n:] = self._tag(nonce, out[:n])
        return n + self.overhead

    def open_segment(self, index: int, ciphertext: Buffer, final: bool, out: memoryview) -> int:
        nonce = self._segment_nonce(index, final)
        view = memoryview(ciphertext).cast("B")
        n = len(view) - self.overhead
        if n < 0 or not constant_time_equal(self._tag(nonce, view[:n]), view[n:]):
            raise AuthenticationError(
                "AES-CTR-HMAC segment tag did not verify: wrong key or associated data, "
                "or a tampered, reordered or truncated stream"
            )
        return self._ctr(nonce, view[:n], out[:n])


@cache
def _ctr_codec_class(tag_size: int) -> type[AesCtrHmacCodec]:
    return type(
        f"AesCtrHmacCodec{tag_size}",
        (AesCtrHmacCodec,),
        {"overhead": tag_size, "__slots__": (), "__module__": __name__},
    )


def _codec(key: TinkStreamingKey, salt: bytes, prefix: bytes, aad: bytes) -> TinkStreamingCodec:
    """The keyed codec of one stream: HKDF(key value, salt, info = associated data)."""
    p = key.params
    ikm = key.value.secret_bytes()
    if isinstance(p, AesGcmHkdfStreamingParams):
        return AesGcmHkdfCodec(p, _hkdf(p.hkdf_hash, ikm, salt, aad, p.derived_key_size), prefix)
    okm = _hkdf(p.hkdf_hash, ikm, salt, aad, p.derived_key_size + HMAC_KEY_SIZE)
    dks = p.derived_key_size
    return AesCtrHmacCodec.create(p, okm[:dks], okm[dks:], prefix)


# --------------------------------------------------------------------------- the header


def _encryption_key(key: TinkKeyLike) -> TinkStreamingKey:
    if isinstance(key, TinkKeyset):
        return key.primary
    if isinstance(key, TinkStreamingKey):
        return key
    raise InvalidParameterError(
        f"a Tink key must be a TinkStreamingKey or TinkKeyset, not {type(key).__name__}"
    )


def _decryption_keys(key: TinkKeyLike | Sequence[TinkStreamingKey]) -> tuple[TinkStreamingKey, ...]:
    if isinstance(key, TinkKeyset):
        return key.keys
    if isinstance(key, TinkStreamingKey):
        return (key,)
    keys = tuple(key)
    if not keys or not all(isinstance(k, TinkStreamingKey) for k in keys):
        raise InvalidParameterError(
            "a Tink key must be a TinkStreamingKey, a TinkKeyset or a sequence of keys"
        )
    return keys


def _open_header(
    keys: Sequence[TinkStreamingKey],
    aad: bytes,
    data: bytes | bytearray,
    *,
    at_end: bool,
    stream_size: int | None = None,
) -> tuple[TinkStreamingCodec, int] | None:
    """Pick the key and build the codec for the stream starting with ``data``.

    Returns ``None`` while more bytes are needed. With one key that matches the header
    length, only the header is read. With several, segment 0 is opened under each in turn,
    so segment 0 must be present and known final or not: from ``stream_size`` when given,
    else from ``at_end`` (``data`` is the whole stream), else by buffering one byte past
    the largest candidate's segment 0. The first key that opens it wins, as in Tink.
    """
    if not data:
        return None
    candidates = [k for k in keys if k.params.header_length == data[0]]
    if not candidates:
        expected = sorted({k.params.header_length for k in keys})
        raise FormatError(
            f"Tink stream header length byte is {data[0]}, expected "
            f"{' or '.join(map(str, expected))}: not a Tink streaming ciphertext for this key, "
            "or it is misaligned"
        )
    hl = data[0]
    if len(data) < hl:
        return None
    dks = hl - 1 - NONCE_PREFIX_SIZE
    salt, prefix = bytes(data[1 : 1 + dks]), bytes(data[1 + dks : hl])
    if len(candidates) == 1:
        return _codec(candidates[0], salt, prefix, aad), hl
    body = memoryview(data)[hl:]
    need = max(k.params.ciphertext_segment_size - hl for k in candidates)
    # ``total``: the length of everything after the header, or more than ``need`` if unknown.
    if stream_size is not None:
        total = stream_size - hl
        if len(body) < min(total, need):
            return None
    elif at_end:
        total = len(body)
    elif len(body) <= need:
        return None
    else:
        total = len(body)
    if total < min(k.params.tag_size for k in candidates):
        raise TruncatedStreamError("the stream ended before its first segment was complete")
    for key in candidates:
        codec = _codec(key, salt, prefix, aad)
        full = codec.full_ciphertext(0)
        final = total <= full
        segment = body[: total if final else full]
        if len(segment) < codec.overhead:
            continue
        try:
            scratch = memoryview(bytearray(len(segment) - codec.overhead))
            codec.open_segment(0, segment, final, scratch)
        except AuthenticationError:
            continue
        return codec, hl
    raise AuthenticationError(
        f"no key of the keyset ({len(candidates)} tried) opens the stream's first segment: "
        "wrong keyset or associated data, or a tampered stream"
    )


# ---------------------------------------------------------------------------- transforms


class TinkStreamEncryptor(SegmentedEncryptor):
    """Encrypt into a Tink streaming AEAD ciphertext (sans-I/O transform).

    ``key`` is a :class:`TinkStreamingKey` or a :class:`TinkKeyset` (its primary key);
    ``aad`` is Tink's associated data. ``salt`` and ``nonce_prefix`` are for test vectors
    only. Raises :class:`InvalidParameterError`, :class:`LimitExceededError` (2**32
    segments).
    """

    __slots__ = ("header",)

    def __init__(
        self,
        key: TinkKeyLike,
        *,
        aad: Buffer = b"",
        salt: bytes | None = None,
        nonce_prefix: bytes | None = None,
    ) -> None:
        k = _encryption_key(key)
        dks = k.params.derived_key_size
        salt = random_bytes(dks) if salt is None else as_bytes(salt, "salt")
        prefix = (
            random_bytes(NONCE_PREFIX_SIZE)
            if nonce_prefix is None
            else as_bytes(nonce_prefix, "nonce_prefix")
        )
        if len(salt) != dks or len(prefix) != NONCE_PREFIX_SIZE:
            raise InvalidParameterError(
                f"salt must be {dks} bytes and nonce prefix {NONCE_PREFIX_SIZE} bytes"
            )
        self.header = bytes([k.params.header_length]) + salt + prefix
        super().__init__(_codec(k, salt, prefix, as_bytes(aad, "aad")), self.header)


class TinkStreamDecryptor(SegmentedDecryptor):
    """Decrypt a Tink streaming AEAD ciphertext, releasing only verified segments.

    With a keyset of several keys each key is tried on the first segment (Tink ciphertexts
    name no key), so output starts one segment later. Raises :class:`FormatError` (bad
    header length byte), :class:`AuthenticationError` (wrong key or associated data,
    tampering, reordering, a stream cut at a segment boundary),
    :class:`TruncatedStreamError` (a stream cut inside its header or final segment).
    """

    __slots__ = ("_aad", "_keys")

    def __init__(self, key: TinkKeyLike | Sequence[TinkStreamingKey], *, aad: Buffer = b"") -> None:
        self._keys = _decryption_keys(key)
        self._aad = as_bytes(aad, "aad")
        keys, ad = self._keys, self._aad

        def reader(data: bytearray) -> tuple[SegmentCodec, int] | int | None:
            return _open_header(keys, ad, data, at_end=False)

        super().__init__(reader)

    def finish(self) -> list[SegmentJob]:
        """The job opening the final segment; see :class:`SegmentedDecryptor`."""
        self._check()
        jobs: list[SegmentJob] = []
        if self._codec is None:
            # Several keys, and the stream ended before the reader could pick one: pick now.
            try:
                seen = self._header_held()
                opened = _open_header(self._keys, self._aad, seen, at_end=True)
                if opened is not None:
                    self._codec, used = opened
                    self._head = bytearray()
                    jobs = self._cut(memoryview(seen)[used:])
            except Exception as exc:
                raise self._break(exc) from None
        return jobs + super().finish()


def layout(
    key: TinkKeyLike | Sequence[TinkStreamingKey],
    head: Buffer,
    stream_size: int,
    *,
    aad: Buffer = b"",
) -> SegmentLayout:
    """Map a Tink ciphertext of ``stream_size`` bytes for random access.

    ``head`` is the start of the stream: the header suffices for one key; for several keys
    pass the first ``min(stream_size, ciphertext_segment_size)`` bytes (header plus segment
    0), which are opened to pick the key. Only the segments a read touches are
    authenticated; the stream's end is checked only by a read of the last segment.
    """
    keys = _decryption_keys(key)
    head = bytes(head)
    opened = _open_header(keys, as_bytes(aad, "aad"), head, at_end=True, stream_size=stream_size)
    if opened is None:
        raise TruncatedStreamError(
            "head is too short: pass the header (one key) or the first ciphertext segment "
            "(several keys)"
        )
    codec, size = opened
    return SegmentLayout(codec, size, stream_size)


def _key(options: FormatOptions) -> TinkKeyLike | Sequence[TinkStreamingKey]:
    return cast("TinkKeyLike | Sequence[TinkStreamingKey]", options.key)


def _layout(options: FormatOptions, read_at: ReadAt, stream_size: int) -> SegmentLayout:
    # The header and segment 0: what picks the key out of a keyset.
    need = max(k.params.ciphertext_segment_size for k in _decryption_keys(_key(options)))
    return layout(_key(options), read_at(0, min(stream_size, need)), stream_size, aad=options.aad)


#: Tink streaming AEAD's format descriptor (``key``: a keyset or a streaming key; the
#: segment size is the key's).
FORMAT = SegmentedFormat(
    "tink",
    encryptor=lambda o: TinkStreamEncryptor(cast("TinkKeyLike", o.key), aad=o.aad),
    decryptor=lambda o: TinkStreamDecryptor(_key(o), aad=o.aad),
    writes=frozenset({"key", "aad"}),
    reads=frozenset({"key", "aad"}),
    layout=_layout,
)
