"""libsodium secretstream: framing, tags, rekeying, truncation; interop with PyNaCl's bindings."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nacl import bindings as b
from support import random_splits

from streamcrypt.codecs import secretstream as ss
from streamcrypt.codecs.secretstream import Tag
from streamcrypt.errors import (
    AlreadyFinalizedError,
    AuthenticationError,
    BrokenTransformError,
    FormatError,
    InvalidKeySizeError,
    InvalidParameterError,
    TruncatedStreamError,
)

KEY = bytes(range(32))
A = ss.ABYTES


def _msg(n: int, seed: int = 1) -> bytes:
    return random.Random(seed).randbytes(n)


def _encrypt(data: bytes, chunk: int, pieces: list[bytes] | None = None) -> bytes:
    enc = ss.SecretStreamEncryptor(KEY, segment_size=chunk)
    parts = pieces if pieces is not None else [data]
    return b"".join(enc.update(p) for p in parts) + enc.finalize()


def _decrypt(ct: bytes, chunk: int, pieces: list[bytes] | None = None) -> bytes:
    dec = ss.SecretStreamDecryptor(KEY, segment_size=chunk)
    parts = pieces if pieces is not None else [ct]
    return b"".join(dec.update(p) for p in parts) + dec.finalize()


# --- peer: PyNaCl's raw bindings, driven directly -----------------------------------------


def peer_encrypt(
    data: bytes, chunk: int, tags: dict[int, int] | None = None, *, read_ahead: bool = False
) -> tuple[bytes, list[int]]:
    """libsodium's file example: ``chunk``-byte messages, the last tagged FINAL.

    ``read_ahead`` marks a full last chunk FINAL (no empty trailer); ``tags`` overrides the
    tag of message i (PUSH or REKEY).
    """
    state = b.crypto_secretstream_xchacha20poly1305_state()
    out = [b.crypto_secretstream_xchacha20poly1305_init_push(state, KEY)]
    pieces = [data[i : i + chunk] for i in range(0, len(data), chunk)]
    if not read_ahead or not pieces or len(pieces[-1]) < chunk:
        if not pieces or len(pieces[-1]) == chunk:
            pieces.append(b"")
    used = []
    for i, piece in enumerate(pieces):
        tag = (tags or {}).get(i, b.crypto_secretstream_xchacha20poly1305_TAG_MESSAGE)
        if i == len(pieces) - 1:
            tag = b.crypto_secretstream_xchacha20poly1305_TAG_FINAL
        used.append(tag)
        out.append(b.crypto_secretstream_xchacha20poly1305_push(state, piece, tag=tag))
    return b"".join(out), used


def peer_decrypt(ct: bytes, chunk: int) -> tuple[bytes, list[int]]:
    state = b.crypto_secretstream_xchacha20poly1305_state()
    b.crypto_secretstream_xchacha20poly1305_init_pull(state, ct[:24], KEY)
    pos, out, tags = 24, [], []
    while pos < len(ct):
        c = ct[pos : pos + chunk + A]
        pos += len(c)
        m, tag = b.crypto_secretstream_xchacha20poly1305_pull(state, c)
        out.append(m)
        tags.append(tag)
    return b"".join(out), tags


SIZES = [0, 1, 4095, 4096, 4097, 8192, 3 * 4096 + 7]


@pytest.mark.parametrize("n", SIZES)
def test_roundtrip_and_layout(n: int) -> None:
    rng = random.Random(n)
    msg = _msg(n)
    ct = _encrypt(msg, 4096, random_splits(msg, rng, 3000))
    # Header, then full chunks as MESSAGE, then a short (maybe empty) FINAL.
    assert len(ct) == 24 + n + A * (n // 4096 + 1)
    assert _decrypt(ct, 4096, random_splits(ct, rng, 3000)) == msg
    assert _decrypt(ct, 4096) == msg


@settings(max_examples=40, deadline=None)
@given(data=st.binary(max_size=700), cuts=st.lists(st.integers(0, 800), max_size=6))
def test_any_chunking_gives_the_same_bytes(data: bytes, cuts: list[int]) -> None:
    points = sorted(min(c, len(data)) for c in cuts)
    pieces = [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]
    ct = _encrypt(data, 64, pieces)
    cpoints = sorted(min(c, len(ct)) for c in cuts)
    cpieces = [ct[a:b] for a, b in zip([0, *cpoints], [*cpoints, len(ct)], strict=True)]
    assert _decrypt(ct, 64, cpieces) == data


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("read_ahead", [False, True])
def test_peer_to_streamcrypt(n: int, read_ahead: bool) -> None:
    msg = _msg(n, 2)
    tags = {0: Tag.PUSH, 1: Tag.REKEY, 2: Tag.PUSH}
    ct, used = peer_encrypt(msg, 4096, tags, read_ahead=read_ahead)
    dec = ss.SecretStreamDecryptor(KEY, segment_size=4096)
    out = b"".join(dec.update(p) for p in random_splits(ct, random.Random(n), 5000))
    assert out + dec.finalize() == msg
    assert dec.tags == used and dec.finished
    assert used[-1] == Tag.FINAL


@pytest.mark.parametrize("n", SIZES)
def test_streamcrypt_to_peer(n: int) -> None:
    msg = _msg(n, 3)
    enc = ss.SecretStreamEncryptor(KEY, segment_size=4096)
    ct = enc.update(msg[:5000])
    enc.rekey()  # the message being filled now (holding byte 5000, or the next) gets REKEY
    ct += enc.update(msg[5000:]) + enc.finalize()
    assert ct[:24] == enc.header
    plain, tags = peer_decrypt(ct, 4096)
    assert plain == msg
    assert tags[-1] == Tag.FINAL and all(t != Tag.FINAL for t in tags[:-1])
    if n > 5000 + 4096:
        assert tags[:2] == [Tag.MESSAGE, Tag.REKEY]
    elif n >= 4096:
        assert tags[0] == Tag.MESSAGE
    # Our decryptor follows the REKEY by itself.
    dec = ss.SecretStreamDecryptor(KEY, segment_size=4096)
    assert dec.update(ct) + dec.finalize() == msg
    assert dec.tags == tags


def test_message_api_interop_both_ways() -> None:
    plan: list[tuple[bytes, int]] = [
        (b"hello", Tag.MESSAGE),
        (b"", Tag.PUSH),
        (_msg(3000), Tag.REKEY),
        (b"after rekey", Tag.MESSAGE),
        (b"x" * 17, Tag.PUSH),
        (b"bye", Tag.FINAL),
    ]
    rekey_after = 3  # an explicit rekey() on both sides after message 3
    ad = b"associated"

    # streamcrypt pushes, PyNaCl pulls.
    pusher = ss.SecretStreamPusher(KEY)
    wire = []
    for i, (m, tag) in enumerate(plan):
        wire.append(pusher.push(m, tag, ad=ad if i % 2 else b""))
        if i == rekey_after:
            pusher.rekey()
    state = b.crypto_secretstream_xchacha20poly1305_state()
    b.crypto_secretstream_xchacha20poly1305_init_pull(state, pusher.header, KEY)
    for i, (c, (m, tag)) in enumerate(zip(wire, plan, strict=True)):
        got = b.crypto_secretstream_xchacha20poly1305_pull(state, c, ad if i % 2 else None)
        assert got == (m, tag)
        if i == rekey_after:
            b.crypto_secretstream_xchacha20poly1305_rekey(state)
    with pytest.raises(AlreadyFinalizedError):
        pusher.push(b"more")

    # PyNaCl pushes, streamcrypt pulls.
    state = b.crypto_secretstream_xchacha20poly1305_state()
    header = b.crypto_secretstream_xchacha20poly1305_init_push(state, KEY)
    wire = []
    for i, (m, tag) in enumerate(plan):
        wire.append(
            b.crypto_secretstream_xchacha20poly1305_push(
                state, m, ad if i % 2 else None, tag=int(tag)
            )
        )
        if i == rekey_after:
            b.crypto_secretstream_xchacha20poly1305_rekey(state)
    puller = ss.SecretStreamPuller(KEY, header)
    for i, (c, (m, tag)) in enumerate(zip(wire, plan, strict=True)):
        got_m, got_tag = puller.pull(c, ad=ad if i % 2 else b"")
        assert (got_m, got_tag) == (m, tag) and isinstance(got_tag, Tag)
        if i == rekey_after:
            puller.rekey()
    assert puller.finished
    puller.finalize()


def test_missing_explicit_rekey_fails() -> None:
    pusher = ss.SecretStreamPusher(KEY)
    c0 = pusher.push(b"a")
    pusher.rekey()
    c1 = pusher.push(b"b", Tag.FINAL)
    puller = ss.SecretStreamPuller(KEY, pusher.header)
    assert puller.pull(c0) == (b"a", Tag.MESSAGE)
    with pytest.raises(AuthenticationError):
        puller.pull(c1)
    with pytest.raises(BrokenTransformError):
        puller.pull(c1)


# --- truncation, extension, tampering ------------------------------------------------------


def test_truncation() -> None:
    msg = _msg(10000)
    ct = _encrypt(msg, 4096)
    full = 4096 + A
    cases = {
        "empty input": b"",
        "partial header": ct[:10],
        "header only": ct[:24],
        "FINAL dropped": ct[: 24 + 2 * full],
        "inside FINAL": ct[:-1],
        "inside a message": ct[: 24 + full + 100],
        "shorter than a tag": ct[: 24 + 2 * full + 5],
    }
    for name, cut in cases.items():
        dec = ss.SecretStreamDecryptor(KEY, segment_size=4096)
        out = dec.update(cut)
        with pytest.raises((TruncatedStreamError, AuthenticationError)) as info:
            dec.finalize()
        if name in ("inside FINAL", "inside a message"):
            assert info.type is AuthenticationError, name  # a cut message fails its MAC
        else:
            assert info.type is TruncatedStreamError, name
        assert msg.startswith(out) and len(out) % 4096 == 0
        with pytest.raises(BrokenTransformError):
            dec.update(b"")


def test_stream_ending_on_non_final_short_message_is_truncated() -> None:
    # A peer that never sent FINAL: its last (short) message is tagged MESSAGE.
    state = b.crypto_secretstream_xchacha20poly1305_state()
    ct = b.crypto_secretstream_xchacha20poly1305_init_push(state, KEY)
    ct += b.crypto_secretstream_xchacha20poly1305_push(state, b"x" * 64)
    ct += b.crypto_secretstream_xchacha20poly1305_push(state, b"tail")
    dec = ss.SecretStreamDecryptor(KEY, segment_size=64)
    assert dec.update(ct) == b"x" * 64
    with pytest.raises(TruncatedStreamError):
        dec.finalize()
    puller = ss.SecretStreamPuller(KEY, ct[:24])
    puller.pull(ct[24 : 24 + 64 + A])
    with pytest.raises(TruncatedStreamError):
        puller.finalize()


def test_data_after_final() -> None:
    # A full-size FINAL (peer with read-ahead) followed by more bytes: FormatError.
    ct, _ = peer_encrypt(_msg(8192), 4096, read_ahead=True)
    assert len(ct) == 24 + 2 * (4096 + A)
    dec = ss.SecretStreamDecryptor(KEY, segment_size=4096)
    with pytest.raises(FormatError):
        dec.update(ct + b"extra")
    dec = ss.SecretStreamDecryptor(KEY, segment_size=4096)
    dec.update(ct)
    assert dec.finished
    with pytest.raises(FormatError):
        dec.update(b"e")
    # A short FINAL with bytes appended cannot be told from a longer message: its MAC fails.
    ct = _encrypt(_msg(100), 4096)
    with pytest.raises(AuthenticationError):
        _decrypt(ct + b"extra", 4096)
    # Message level: anything pulled after FINAL is FormatError.
    pusher = ss.SecretStreamPusher(KEY)
    c0 = pusher.push(b"end", Tag.FINAL)
    puller = ss.SecretStreamPuller(KEY, pusher.header)
    assert puller.pull(c0) == (b"end", Tag.FINAL)
    with pytest.raises(FormatError):
        puller.pull(c0)


def test_tampering_reordering_duplication() -> None:
    msg = _msg(3 * 4096 + 10)
    ct = _encrypt(msg, 4096)
    full = 4096 + A
    body = [ct[24 + i * full : 24 + (i + 1) * full] for i in range(4)]
    assert b"".join(body) == ct[24:]
    variants = {
        "swap": ct[:24] + body[1] + body[0] + body[2] + body[3],
        "duplicate": ct[:24] + body[0] + body[0] + body[2] + body[3],
        "drop middle": ct[:24] + body[0] + body[2] + body[3],
    }
    for pos in (0, 23, 24, 24 + 1, 24 + full - 1, len(ct) - 1):
        bad = bytearray(ct)
        bad[pos] ^= 0x40
        variants[f"flip {pos}"] = bytes(bad)
    for name, bad in variants.items():
        dec = ss.SecretStreamDecryptor(KEY, segment_size=4096)
        released = b""
        with pytest.raises(AuthenticationError):
            for i in range(0, len(bad), full):
                released += dec.update(bad[i : i + full])
            released += dec.finalize()
        assert msg.startswith(released), name
        with pytest.raises(BrokenTransformError):
            dec.finalize()
    with pytest.raises(AuthenticationError):
        _decrypt(ct, 4096 * 2)  # chunk sizes must agree
    dec = ss.SecretStreamDecryptor(bytes(32), segment_size=4096)
    with pytest.raises(AuthenticationError):
        dec.update(ct)


def test_only_verified_plaintext_is_released() -> None:
    msg = _msg(3 * 4096 + 10)
    ct = bytearray(_encrypt(msg, 4096))
    ct[24 + 4096 + A + 5] ^= 1  # second message
    dec = ss.SecretStreamDecryptor(KEY, segment_size=4096)
    assert dec.update(ct[: 24 + 4096 + A]) == msg[:4096]
    with pytest.raises(AuthenticationError):
        dec.update(ct[24 + 4096 + A :])


@pytest.mark.parametrize("size", [0, 16, 31, 33, 64])
def test_invalid_key_sizes(size: int) -> None:
    with pytest.raises(InvalidKeySizeError):
        ss.SecretStreamEncryptor(bytes(size))
    with pytest.raises(InvalidKeySizeError):
        ss.SecretStreamDecryptor(bytes(size))
    with pytest.raises(InvalidKeySizeError):
        ss.SecretStreamPusher(bytes(size))
    with pytest.raises(InvalidKeySizeError):
        ss.SecretStreamPuller(bytes(size), bytes(24))


def test_parameter_errors() -> None:
    for bad in (0, -1, ss.MAX_CHUNK_SIZE + 1):
        with pytest.raises(InvalidParameterError):
            ss.SecretStreamEncryptor(KEY, segment_size=bad)
        with pytest.raises(InvalidParameterError):
            ss.SecretStreamDecryptor(KEY, segment_size=bad)
    with pytest.raises(FormatError):
        ss.SecretStreamPuller(KEY, bytes(23))
    with pytest.raises(InvalidParameterError):
        ss.SecretStreamPusher(KEY).push(b"", 7)
    puller = ss.SecretStreamPuller(KEY, ss.SecretStreamPusher(KEY).header)
    with pytest.raises(FormatError):
        puller.pull(bytes(A - 1))


def test_unknown_tag_from_peer_is_a_format_error() -> None:
    state = b.crypto_secretstream_xchacha20poly1305_state()
    header = b.crypto_secretstream_xchacha20poly1305_init_push(state, KEY)
    c = b.crypto_secretstream_xchacha20poly1305_push(state, b"odd", tag=0x80)
    puller = ss.SecretStreamPuller(KEY, header)
    with pytest.raises(FormatError):
        puller.pull(c)


def test_lifecycle_and_repr() -> None:
    enc = ss.SecretStreamEncryptor(KEY)
    enc.finalize()
    with pytest.raises(AlreadyFinalizedError):
        enc.update(b"x")
    dec = ss.SecretStreamDecryptor(KEY)
    for obj in (enc, dec, ss.SecretStreamPusher(KEY)):
        assert KEY.hex() not in repr(obj) and "state=" in repr(obj)
