"""Tink streaming AEAD: byte-for-byte interop with the ``tink`` package, keysets, errors."""

from __future__ import annotations

import base64
import io
import json
import random
from typing import Any

import pytest
import tink
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from support import random_splits
from tink import aead as tink_aead
from tink import secret_key_access, streaming_aead
from tink.proto import aes_ctr_hmac_streaming_pb2, aes_gcm_hkdf_streaming_pb2, common_pb2, tink_pb2

import streamcrypt
from streamcrypt.abc import State
from streamcrypt.codecs import FormatOptions
from streamcrypt.codecs import tink as T
from streamcrypt.errors import (
    AlreadyFinalizedError,
    AuthenticationError,
    BrokenTransformError,
    FormatError,
    InvalidKeySizeError,
    InvalidParameterError,
    TruncatedStreamError,
    UnsupportedFormatError,
)

streaming_aead.register()
tink_aead.register()

TEMPLATE_NAMES = list(T.TEMPLATES)
AD = b"associated data \x00\xff"


class _Sink(io.BytesIO):
    """A BytesIO that keeps its bytes after tink's encrypting stream closes it."""

    data = b""

    def close(self) -> None:
        self.data = self.getvalue()
        super().close()


def tink_handle(template: Any) -> tink.KeysetHandle:
    return tink.new_keyset_handle(template)


def to_ours(handle: tink.KeysetHandle) -> T.TinkKeyset:
    return T.load_keyset(tink.json_proto_keyset_format.serialize(handle, secret_key_access.TOKEN))


def from_json(text: str) -> tink.KeysetHandle:
    return tink.json_proto_keyset_format.parse(text, secret_key_access.TOKEN)


def tink_encrypt(handle: tink.KeysetHandle, plaintext: bytes, aad: bytes) -> bytes:
    primitive = handle.primitive(streaming_aead.StreamingAead)
    sink = _Sink()
    with primitive.new_encrypting_stream(sink, aad) as stream:
        stream.write(plaintext)
    return sink.data


def tink_decrypt(handle: tink.KeysetHandle, ciphertext: bytes, aad: bytes) -> bytes:
    primitive = handle.primitive(streaming_aead.StreamingAead)
    with primitive.new_decrypting_stream(io.BytesIO(ciphertext), aad) as stream:
        data: bytes = stream.read()
    return data


def plaintext(n: int, seed: int = 0) -> bytes:
    return random.Random(seed).randbytes(n)


def boundary_sizes(params: T.TinkStreamingParams, many: bool) -> list[int]:
    """0, 1 and each of the first two segment boundaries +-1 (plus a longer one if ``many``)."""
    seg = params.ciphertext_segment_size - params.tag_size
    first = seg - params.header_length
    sizes = [0, 1, first - 1, first, first + 1, first + seg - 1, first + seg, first + seg + 1]
    if many:
        sizes.append(first + 4 * seg + 17)
    return sizes


def decrypt_chunked(key: T.TinkKeyLike, ct: bytes, aad: bytes, rng: random.Random) -> bytes:
    dec = T.TinkStreamDecryptor(key, aad=aad)
    out = bytearray()
    pos = 0
    while pos < len(ct):
        n = rng.randint(0, 70000)
        out += dec.update(ct[pos : pos + n])
        pos += n
    return bytes(out + dec.finalize())


# ------------------------------------------------------------------------ keys & templates


@pytest.mark.parametrize("name", TEMPLATE_NAMES)
def test_template_params_match_tink(name: str) -> None:
    template = getattr(streaming_aead.streaming_aead_key_templates, name)
    ours = T.TEMPLATES[name]
    if template.type_url == T.AES_GCM_HKDF_TYPE_URL:
        fmt = aes_gcm_hkdf_streaming_pb2.AesGcmHkdfStreamingKeyFormat.FromString(template.value)
        assert isinstance(ours, T.AesGcmHkdfStreamingParams)
    else:
        fmt = aes_ctr_hmac_streaming_pb2.AesCtrHmacStreamingKeyFormat.FromString(template.value)
        assert isinstance(ours, T.AesCtrHmacStreamingParams)
        assert fmt.params.hmac_params.tag_size == ours.tag_size
        assert fmt.params.hmac_params.hash == common_pb2.SHA256 and ours.hmac_hash == "sha256"
    assert template.type_url == ours.type_url
    assert fmt.params.ciphertext_segment_size == ours.ciphertext_segment_size
    assert fmt.params.derived_key_size == ours.derived_key_size
    assert fmt.params.hkdf_hash_type == common_pb2.SHA256 and ours.hkdf_hash == "sha256"
    # The keyset tink makes from the template parses to the same parameters and key value.
    keyset = to_ours(tink_handle(template))
    assert keyset.primary.params == ours
    assert len(keyset.primary.value) == fmt.key_size


def test_keyset_forms_and_key_value() -> None:
    handle = tink_handle(streaming_aead.streaming_aead_key_templates.AES256_CTR_HMAC_SHA256_4KB)
    binary = tink.proto_keyset_format.serialize(handle, secret_key_access.TOKEN)
    text = tink.json_proto_keyset_format.serialize(handle, secret_key_access.TOKEN)
    from_bin, from_text, from_bytes = (
        T.load_keyset(binary),
        T.load_keyset(text),
        T.load_keyset(text.encode()),
    )
    assert from_bin.keys == from_text.keys == from_bytes.keys
    assert from_bin.primary_key_id == json.loads(text)["primaryKeyId"]
    # The key value is the protobuf's key_value field, and we serialize it back identically.
    entry = json.loads(text)["key"][0]["keyData"]["value"]

    proto = aes_ctr_hmac_streaming_pb2.AesCtrHmacStreamingKey.FromString(base64.b64decode(entry))
    assert from_bin.primary.value.secret_bytes() == proto.key_value
    assert from_bin.primary.key_data_value() == base64.b64decode(entry)


def test_key_repr_hides_value() -> None:
    key = T.TinkStreamingKey.raw(b"\x42" * 32, "AES256_GCM_HKDF_4KB", key_id=7)
    text = repr(key) + repr(T.TinkKeyset.of(key))
    assert "B" * 8 not in text and "42424242" not in text and "\\x42" not in text
    assert "key_id=7" in text


# ---------------------------------------------------------------------------- interop


@pytest.mark.parametrize("name", TEMPLATE_NAMES)
def test_interop_both_directions(name: str) -> None:
    template = getattr(streaming_aead.streaming_aead_key_templates, name)
    handle = tink_handle(template)
    keyset = to_ours(handle)
    params = keyset.primary.params
    many = params.ciphertext_segment_size < 100_000
    rng = random.Random(name)
    for i, n in enumerate(boundary_sizes(params, many)):
        pt = plaintext(n, i)
        aad = AD if i % 2 else b""
        theirs = tink_encrypt(handle, pt, aad)
        # tink -> streamcrypt (one shot and in random chunks)
        assert streamcrypt.decrypt_bytes(theirs, keyset, aad=aad, format="tink") == pt, (name, n)
        assert decrypt_chunked(keyset, theirs, aad, rng) == pt, (name, n)
        # streamcrypt -> tink: same length, tink opens it
        ours = streamcrypt.encrypt_bytes(pt, keyset, aad=aad, format="tink")
        assert len(ours) == len(theirs), (name, n)
        assert tink_decrypt(handle, ours, aad) == pt, (name, n)
        # The wrong associated data fails on both sides.
        with pytest.raises(AuthenticationError):
            streamcrypt.decrypt_bytes(theirs, keyset, aad=aad + b"x", format="tink")


def test_ciphertext_lengths_follow_tinks_layout() -> None:
    """Header || segment 0 (ciphertext_segment_size - header) || full segments || last."""
    params = T.TEMPLATES["AES128_GCM_HKDF_4KB"]  # header 24, tag 16
    key = T.TinkStreamingKey.generate(params)
    for n, expected in [(0, 40), (1, 41), (4055, 4095), (4056, 4096), (4057, 4113), (8136, 8192)]:
        assert len(streamcrypt.encrypt_bytes(b"\0" * n, key, format="tink")) == expected


def test_streaming_encryptor_in_small_pieces_matches_tink() -> None:
    handle = tink_handle(streaming_aead.streaming_aead_key_templates.AES256_CTR_HMAC_SHA256_4KB)
    keyset = to_ours(handle)
    pt = plaintext(30_000, 5)
    enc = T.TinkStreamEncryptor(keyset, aad=AD)
    ct = b"".join(enc.update(piece) for piece in random_splits(pt, random.Random(1), 500))
    ct += enc.finalize()
    assert tink_decrypt(handle, ct, AD) == pt
    dec = T.TinkStreamDecryptor(keyset, aad=AD)
    back = b"".join(dec.update(piece) for piece in random_splits(ct, random.Random(2), 300))
    assert back + dec.finalize() == pt


def test_segment_jobs_run_out_of_order() -> None:
    """The engine may run jobs on threads in any order: outputs joined in order must match."""
    handle = tink_handle(streaming_aead.streaming_aead_key_templates.AES128_GCM_HKDF_4KB)
    keyset = to_ours(handle)
    pt = plaintext(50_000, 9)
    enc = T.TinkStreamEncryptor(keyset)
    jobs = [*enc.feed(pt[:20_000]), *enc.feed(pt[20_000:]), *enc.finish()]
    outs = {id(job): bytes(job.run()) for job in reversed(jobs)}
    ct = enc.take_header() + b"".join(outs[id(job)] for job in jobs)
    assert tink_decrypt(handle, ct, b"") == pt
    dec = T.TinkStreamDecryptor(keyset)
    djobs = [*dec.feed(ct), *dec.finish()]
    douts = {id(job): bytes(job.run()) for job in reversed(djobs)}
    assert b"".join(douts[id(job)] for job in djobs) == pt


@pytest.mark.parametrize(
    ("kind", "hkdf_hash", "dks", "segment", "mac_hash", "tag"),
    [
        ("gcm", common_pb2.SHA1, 16, 64, None, None),
        ("gcm", common_pb2.SHA512, 32, 1000, None, None),
        ("ctr", common_pb2.SHA1, 16, 100, common_pb2.SHA1, 20),
        ("ctr", common_pb2.SHA512, 32, 777, common_pb2.SHA512, 64),
        ("ctr", common_pb2.SHA256, 16, 300, common_pb2.SHA256, 10),
    ],
)
def test_interop_non_template_parameters(
    kind: str, hkdf_hash: int, dks: int, segment: int, mac_hash: int | None, tag: int | None
) -> None:
    """Other hashes, tag sizes and small odd segment sizes, through tink's own key manager."""
    fmt: Any
    if kind == "gcm":
        fmt = aes_gcm_hkdf_streaming_pb2.AesGcmHkdfStreamingKeyFormat()
        url = T.AES_GCM_HKDF_TYPE_URL
    else:
        fmt = aes_ctr_hmac_streaming_pb2.AesCtrHmacStreamingKeyFormat()
        fmt.params.hmac_params.hash = mac_hash
        fmt.params.hmac_params.tag_size = tag
        url = T.AES_CTR_HMAC_TYPE_URL
    fmt.key_size = dks
    fmt.params.hkdf_hash_type = hkdf_hash
    fmt.params.derived_key_size = dks
    fmt.params.ciphertext_segment_size = segment
    template = tink_pb2.KeyTemplate(
        type_url=url, value=fmt.SerializeToString(), output_prefix_type=tink_pb2.RAW
    )
    handle = tink_handle(template)
    keyset = to_ours(handle)
    assert keyset.primary.params.ciphertext_segment_size == segment
    for i, n in enumerate(boundary_sizes(keyset.primary.params, True)):
        pt = plaintext(n, i)
        assert (
            streamcrypt.decrypt_bytes(tink_encrypt(handle, pt, AD), keyset, aad=AD, format="tink")
            == pt
        )
        assert (
            tink_decrypt(handle, streamcrypt.encrypt_bytes(pt, keyset, aad=AD, format="tink"), AD)
            == pt
        )


def test_exported_keyset_is_read_by_tink() -> None:
    keyset = T.TinkKeyset.of(
        T.TinkStreamingKey.generate("AES256_CTR_HMAC_SHA256_4KB"),
        T.TinkStreamingKey.generate("AES256_GCM_HKDF_1MB"),
    )
    handle = from_json(keyset.to_json())
    pt = plaintext(10_000, 3)
    assert (
        tink_decrypt(handle, streamcrypt.encrypt_bytes(pt, keyset, aad=AD, format="tink"), AD) == pt
    )
    assert (
        streamcrypt.decrypt_bytes(tink_encrypt(handle, pt, AD), keyset, aad=AD, format="tink") == pt
    )
    # and a raw key (value + params) gives the same stream as the keyset's key
    raw = T.TinkStreamingKey.raw(keyset.primary.value.secret_bytes(), keyset.primary.params)
    assert streamcrypt.decrypt_bytes(tink_encrypt(handle, pt, b""), raw, format="tink") == pt


def test_known_answer_from_the_written_spec() -> None:
    """Header and segments recomputed with cryptography's HKDF and AES-GCM directly."""
    value, salt, prefix = bytes(range(32)), bytes(range(100, 132)), b"\x07" * 7
    key = T.TinkStreamingKey.raw(value, T.AesGcmHkdfStreamingParams(32, 256, "sha256"))
    enc = T.TinkStreamEncryptor(key, aad=b"ad", salt=salt, nonce_prefix=prefix)
    pt = plaintext(600, 1)
    ct = enc.update(pt) + enc.finalize()
    assert ct[:40] == bytes([40]) + salt + prefix
    derived = HKDF(hashes.SHA256(), 32, salt, b"ad").derive(value)
    gcm = AESGCM(derived)
    first = 256 - 40 - 16  # 200 plaintext bytes in segment 0, 240 in the others
    expected = bytes([40]) + salt + prefix
    expected += gcm.encrypt(prefix + b"\0\0\0\0\0", pt[:first], None)
    expected += gcm.encrypt(prefix + b"\0\0\0\1\0", pt[first : first + 240], None)
    expected += gcm.encrypt(prefix + b"\0\0\0\2\1", pt[first + 240 :], None)
    assert ct == expected
    handle = from_json(T.TinkKeyset.of(key).to_json())
    assert tink_decrypt(handle, ct, b"ad") == pt


# ----------------------------------------------------------------------------- keysets


def _merged(*handles: tink.KeysetHandle, primary: int = 0) -> tuple[tink.KeysetHandle, str]:
    docs = [
        json.loads(tink.json_proto_keyset_format.serialize(h, secret_key_access.TOKEN))
        for h in handles
    ]
    keys = [k for d in docs for k in d["key"]]
    text = json.dumps({"primaryKeyId": docs[primary]["primaryKeyId"], "key": keys})
    return from_json(text), text


def test_keyset_of_several_keys_tries_each_key() -> None:
    templates = streaming_aead.streaming_aead_key_templates
    # Same header length (16-byte derived keys) so both are candidates; different formats.
    a = tink_handle(templates.AES128_GCM_HKDF_4KB)
    b = tink_handle(templates.AES128_CTR_HMAC_SHA256_1MB)
    c = tink_handle(templates.AES256_GCM_HKDF_4KB)
    handle, text = _merged(a, b, c, primary=0)
    keyset = T.load_keyset(text)
    assert len(keyset.keys) == 3 and keyset.primary.params == T.TEMPLATES["AES128_GCM_HKDF_4KB"]
    rng = random.Random(4)
    for source in (b, c, a):
        for n in (0, 5, 4056, 5000, 1_100_000):
            pt = plaintext(n, n)
            ct = tink_encrypt(source, pt, AD)
            assert streamcrypt.decrypt_bytes(ct, keyset, aad=AD, format="tink") == pt
            assert decrypt_chunked(keyset, ct, AD, rng) == pt
    # Our encryption uses the primary key; tink's keyset handle opens it.
    pt = plaintext(9000, 1)
    ours = streamcrypt.encrypt_bytes(pt, keyset, aad=AD, format="tink")
    assert tink_decrypt(a, ours, AD) == pt and tink_decrypt(handle, ours, AD) == pt
    # No key opens a stream from an unrelated key.
    stranger = tink_encrypt(tink_handle(templates.AES128_GCM_HKDF_4KB), pt, AD)
    with pytest.raises(AuthenticationError, match="no key of the keyset"):
        streamcrypt.decrypt_bytes(stranger, keyset, aad=AD, format="tink")
    with pytest.raises(AuthenticationError):
        streamcrypt.decrypt_bytes(stranger[:100], keyset, aad=AD, format="tink")


def test_disabled_keys_are_ignored() -> None:
    a = tink_handle(streaming_aead.streaming_aead_key_templates.AES128_GCM_HKDF_4KB)
    b = tink_handle(streaming_aead.streaming_aead_key_templates.AES128_GCM_HKDF_4KB)
    _, text = _merged(a, b, primary=0)
    doc = json.loads(text)
    doc["key"][1]["status"] = "DISABLED"
    keyset = T.load_keyset(json.dumps(doc))
    assert len(keyset.keys) == 1
    with pytest.raises(AuthenticationError):
        streamcrypt.decrypt_bytes(tink_encrypt(b, b"hello", b""), keyset, format="tink")


def test_keyset_errors() -> None:
    with pytest.raises(FormatError):
        T.load_keyset("{not json")
    with pytest.raises(FormatError):
        T.load_keyset('{"primaryKeyId": 1, "key": [{"keyData": {"value": "@@"}}]}')
    with pytest.raises(FormatError):
        T.load_keyset(b"\x12\xff\x01")  # binary keyset with a truncated field
    aead_keyset = tink.json_proto_keyset_format.serialize(
        tink_handle(tink_aead.aead_key_templates.AES128_GCM), secret_key_access.TOKEN
    )
    with pytest.raises(UnsupportedFormatError, match="not a Tink streaming AEAD key"):
        T.load_keyset(aead_keyset)
    # A streaming key whose HKDF hash is SHA384 (Tink refuses it too).
    bad = T.TinkKeyset.of(T.TinkStreamingKey.generate("AES128_GCM_HKDF_4KB"))
    doc = json.loads(bad.to_json())

    proto = aes_gcm_hkdf_streaming_pb2.AesGcmHkdfStreamingKey.FromString(
        base64.b64decode(doc["key"][0]["keyData"]["value"])
    )
    proto.params.hkdf_hash_type = common_pb2.SHA384
    doc["key"][0]["keyData"]["value"] = base64.b64encode(proto.SerializeToString()).decode()
    with pytest.raises(UnsupportedFormatError):
        T.load_keyset(json.dumps(doc))
    # A key value shorter than the derived key.
    proto.params.hkdf_hash_type = common_pb2.SHA256
    proto.params.derived_key_size = 32
    doc["key"][0]["keyData"]["value"] = base64.b64encode(proto.SerializeToString()).decode()
    with pytest.raises(InvalidKeySizeError):
        T.load_keyset(json.dumps(doc))


def test_wrong_key_sizes_and_parameters() -> None:
    with pytest.raises(InvalidKeySizeError):
        T.TinkStreamingKey.raw(b"k" * 15, "AES128_GCM_HKDF_4KB")
    with pytest.raises(InvalidKeySizeError):
        T.TinkStreamingKey.raw(b"k" * 16, "AES256_CTR_HMAC_SHA256_4KB")
    with pytest.raises(InvalidKeySizeError):
        T.TinkStreamingKey.raw(b"", "AES128_GCM_HKDF_4KB")
    with pytest.raises(InvalidKeySizeError):
        T.TinkStreamingKey.raw(b"k" * 32, T.AesGcmHkdfStreamingParams(24, 4096))
    with pytest.raises(InvalidParameterError):
        T.TinkStreamingKey.raw(b"k" * 16, T.AesGcmHkdfStreamingParams(16, 40))  # too small
    with pytest.raises(InvalidParameterError):
        T.TinkStreamingKey.raw(b"k" * 16, T.AesCtrHmacStreamingParams(16, 4096, tag_size=9))
    with pytest.raises(InvalidParameterError):
        T.TinkStreamingKey.raw(b"k" * 16, T.AesCtrHmacStreamingParams(16, 4096, "sha1", "sha1", 21))
    with pytest.raises(InvalidParameterError):
        T.TinkStreamingKey.raw(b"k" * 16, "AES512_GCM")
    # A longer key value than the derived key is fine (Tink allows it).
    key = T.TinkStreamingKey.raw(b"k" * 40, "AES128_GCM_HKDF_4KB")
    assert (
        streamcrypt.decrypt_bytes(
            streamcrypt.encrypt_bytes(b"abc", key, format="tink"), key, format="tink"
        )
        == b"abc"
    )


# ------------------------------------------------------------------------- bad input


@pytest.fixture(scope="module")
def sample() -> tuple[tink.KeysetHandle, T.TinkKeyset, bytes, bytes]:
    handle = tink_handle(streaming_aead.streaming_aead_key_templates.AES128_CTR_HMAC_SHA256_4KB)
    pt = plaintext(4 * 4064 + 100, 8)
    return handle, to_ours(handle), pt, tink_encrypt(handle, pt, AD)


def test_tampered_segment_releases_only_verified_segments(sample: Any) -> None:
    _, keyset, pt, ct = sample
    hl = 24
    bad = bytearray(ct)
    bad[hl + 4096 - hl + 10] ^= 1  # inside segment 1
    dec = T.TinkStreamDecryptor(keyset, aad=AD)
    assert dec.update(bad[:4096]) == b""  # segment 0 might still be the final one
    assert dec.update(bad[4096:4097]) == pt[: 4096 - hl - 32]  # now it is verified, non-final
    assert dec.update(bad[4097:8192]) == b""
    with pytest.raises(AuthenticationError):
        dec.update(bad[8192:])  # segment 1 fails; nothing of it is released
    assert dec.state is State.BROKEN
    with pytest.raises(BrokenTransformError):
        dec.finalize()
    for flip in (1, 30, len(ct) - 1):  # salt, prefix-free segment 0, last tag byte
        bad = bytearray(ct)
        bad[flip] ^= 0x80
        with pytest.raises(AuthenticationError):
            streamcrypt.decrypt_bytes(bad, keyset, aad=AD, format="tink")


def test_reordered_duplicated_extended(sample: Any) -> None:
    _, keyset, _, ct = sample
    s0, s1, s2 = ct[:4096], ct[4096:8192], ct[8192:12288]
    rest = ct[12288:]
    for bad in (s0 + s2 + s1 + rest, s0 + s1 + s1 + s2 + rest, ct + ct[-50:], ct + b"\0"):
        with pytest.raises(AuthenticationError):
            streamcrypt.decrypt_bytes(bad, keyset, aad=AD, format="tink")


def test_truncation(sample: Any) -> None:
    handle, keyset, _, ct = sample
    # Cut at a segment boundary: the last segment present was sealed non-final.
    for cut in (4096, 8192, 12288):
        with pytest.raises(AuthenticationError):
            streamcrypt.decrypt_bytes(ct[:cut], keyset, aad=AD, format="tink")
    # Cut so that less than a tag of the final segment remains.
    with pytest.raises(TruncatedStreamError):
        streamcrypt.decrypt_bytes(ct[: 4096 + 31], keyset, aad=AD, format="tink")
    # Cut inside the final segment, past its tag length: the tag fails.
    with pytest.raises(AuthenticationError):
        streamcrypt.decrypt_bytes(ct[:-1], keyset, aad=AD, format="tink")
    # Cut inside the header, and nothing at all.
    for cut in (0, 1, 23):
        with pytest.raises(TruncatedStreamError):
            streamcrypt.decrypt_bytes(ct[:cut], keyset, aad=AD, format="tink")
    # The empty stream's ciphertext is header + one tag; a tag shorter fails as truncated.
    empty = tink_encrypt(handle, b"", AD)
    assert (
        len(empty) == 24 + 32
        and streamcrypt.decrypt_bytes(empty, keyset, aad=AD, format="tink") == b""
    )
    with pytest.raises(TruncatedStreamError):
        streamcrypt.decrypt_bytes(empty[:-1], keyset, aad=AD, format="tink")


def test_wrong_key_and_aad(sample: Any) -> None:
    _, keyset, _, ct = sample
    other = T.TinkStreamingKey.generate("AES128_CTR_HMAC_SHA256_4KB")
    with pytest.raises(AuthenticationError):
        streamcrypt.decrypt_bytes(ct, other, aad=AD, format="tink")
    with pytest.raises(AuthenticationError):
        streamcrypt.decrypt_bytes(ct, keyset, aad=b"", format="tink")
    # Same key value, other parameters (GCM vs CTR-HMAC): still an authentication failure.
    same_value = T.TinkStreamingKey.raw(keyset.primary.value, "AES128_GCM_HKDF_4KB")
    with pytest.raises(AuthenticationError):
        streamcrypt.decrypt_bytes(ct, same_value, aad=AD, format="tink")


def test_bad_header_length_byte(sample: Any) -> None:
    _, keyset, _, ct = sample
    for byte in (0, 23, 25, 40, 255):
        with pytest.raises(FormatError, match="header length byte"):
            streamcrypt.decrypt_bytes(bytes([byte]) + ct[1:], keyset, aad=AD, format="tink")
    # A 32-byte-derived-key stream given to a 16-byte key: header length 40 vs 24.
    other = streamcrypt.encrypt_bytes(
        b"x", T.TinkStreamingKey.generate("AES256_GCM_HKDF_4KB"), format="tink"
    )
    with pytest.raises(FormatError):
        streamcrypt.decrypt_bytes(other, keyset, format="tink")


def test_lifecycle() -> None:
    key = T.TinkStreamingKey.generate("AES256_GCM_HKDF_4KB")
    enc = T.TinkStreamEncryptor(key)
    ct = enc.update(b"abc") + enc.finalize()
    with pytest.raises(AlreadyFinalizedError):
        enc.update(b"more")
    dec = T.TinkStreamDecryptor(key)
    assert dec.update(ct) == b""  # the final segment waits for finalize
    assert dec.finalize() == b"abc"
    with pytest.raises(AlreadyFinalizedError):
        dec.finalize()
    with pytest.raises(InvalidParameterError):
        T.TinkStreamEncryptor(key, salt=b"short")
    with pytest.raises(InvalidParameterError):
        T.TinkStreamDecryptor([])


# ----------------------------------------------------------------------- random access


@pytest.mark.parametrize(
    "name", ["AES128_GCM_HKDF_4KB", "AES256_CTR_HMAC_SHA256_4KB", "AES256_GCM_HKDF_1MB"]
)
def test_random_access_ranges(name: str) -> None:
    handle = tink_handle(getattr(streaming_aead.streaming_aead_key_templates, name))
    keyset = to_ours(handle)
    params = keyset.primary.params
    seg = params.ciphertext_segment_size - params.tag_size
    first = seg - params.header_length
    pt = plaintext(first + 3 * seg + 123, 11)
    rng = random.Random(name)
    for ct in (
        tink_encrypt(handle, pt, AD),
        streamcrypt.encrypt_bytes(pt, keyset, aad=AD, format="tink"),
    ):
        ranges = [
            (0, 0),
            (0, 1),
            (0, len(pt)),
            (first - 1, first + 1),
            (first, first + seg),
            (first + seg - 1, first + 2 * seg + 1),
            (len(pt) - 1, len(pt)),
            (len(pt) - 200, len(pt) + 500),  # past the end: clipped
            (len(pt), len(pt) + 5),
        ]
        for _ in range(10):
            a, b = sorted(rng.sample(range(len(pt) + 1), 2))
            ranges.append((a, b))
        lay = T.layout(keyset, ct[: params.ciphertext_segment_size], len(ct), aad=AD)
        assert lay.plaintext_size == len(pt) and lay.segment_count == 5
        reads: list[tuple[int, int]] = []

        def read_at(
            offset: int, length: int, ct: bytes = ct, reads: list[tuple[int, int]] = reads
        ) -> bytes:
            reads.append((offset, length))
            return ct[offset : offset + length]

        for start, stop in ranges:
            assert _range(ct, keyset, start, stop, aad=AD) == pt[start:stop]
            reads.clear()
            got = T.FORMAT.read_range(
                FormatOptions(key=keyset, aad=AD), read_at, len(ct), start, stop
            )
            assert got == pt[start:stop]
            # Only the header read plus the segments covering the range were read.
            if stop > start and start < len(pt):
                covered = sum(n for _, n in reads[1:])
                touched = (min(stop, len(pt)) - start) // seg + 2
                assert covered <= touched * params.ciphertext_segment_size
            assert lay.read(read_at, start, stop) == pt[start:stop]


def _range(ct: bytes, key: Any, start: int, stop: int, *, aad: bytes) -> bytes:
    options = FormatOptions(key=key, aad=aad)
    return T.FORMAT.read_range(options, lambda o, n: ct[o : o + n], len(ct), start, stop)


def test_random_access_errors(sample: Any) -> None:
    handle, keyset, pt, ct = sample
    bad = bytearray(ct)
    bad[5000] ^= 1  # segment 1
    assert _range(bytes(bad), keyset, 0, 100, aad=AD) == pt[:100]
    with pytest.raises(AuthenticationError):
        _range(bytes(bad), keyset, 4100, 4200, aad=AD)
    # Truncated at a boundary: a read of the (apparent) last segment fails.
    with pytest.raises(AuthenticationError):
        _range(ct[:12288], keyset, 12000, 12100, aad=AD)
    # A stream length that cannot hold the final segment's tag: cut after a whole segment.
    with pytest.raises(TruncatedStreamError):
        _range(ct[: 8192 + 10], keyset, 0, 10, aad=AD)
    with pytest.raises(AuthenticationError):
        _range(ct, keyset, 0, 10, aad=b"wrong")
    # Several keys and a single-segment stream: the key is picked from the whole stream.
    other = T.TinkStreamingKey.generate("AES128_CTR_HMAC_SHA256_4KB", key_id=99)
    both = T.TinkKeyset((other, keyset.primary), other.key_id)
    short = tink_encrypt(handle, pt[:300], AD)
    assert _range(short, both, 100, 200, aad=AD) == pt[100:200]
    with pytest.raises(TruncatedStreamError):
        T.layout(both, short[:100], len(short), aad=AD)
    # ... and a long stream: the head holds header + segment 0, enough to pick the key.
    for keys in (both, [keyset.primary, other]):
        for start, stop in ((0, 10), (4000, 9000), (len(pt) - 7, len(pt))):
            assert _range(ct, keys, start, stop, aad=AD) == pt[start:stop]
        lay = T.layout(keys, ct[:4096], len(ct), aad=AD)
        assert lay.read(lambda o, n: ct[o : o + n], 5, 50) == pt[5:50]
    with pytest.raises(TruncatedStreamError):
        T.layout(both, ct[:4095], len(ct), aad=AD)
