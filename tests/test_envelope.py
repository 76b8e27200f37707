"""Envelope v1: passphrase / X25519 / streaming-ECIES recipients and signed streams."""

from __future__ import annotations

import random
import struct
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import anyio
import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from support import envelope_decrypt, envelope_encrypt, random_splits

import streamcrypt
from streamcrypt.codecs import SegmentedTransform, SegmentJob, age, container
from streamcrypt.codecs import envelope as ev
from streamcrypt.engine import OffloadPolicy, pipeline
from streamcrypt.errors import (
    AuthenticationError,
    BrokenTransformError,
    FormatError,
    InvalidKeySizeError,
    InvalidParameterError,
    InvalidPublicKeyError,
    InvalidSignatureError,
    LimitExceededError,
    TruncatedStreamError,
    UnknownKeyError,
    UnsupportedFormatError,
)
from streamcrypt.keys import Argon2Params, ScryptParams
from streamcrypt.primitives import Ed25519PrivateKey

FAST = Argon2Params(1, 8192)
FAST_SCRYPT = ScryptParams(1 << 10, 8, 1)
SEG = container.MIN_SEGMENT_SIZE
DATA = bytes(random.Random(7).randbytes(5 * SEG + 77))

# Low-order points of Curve25519 (RFC 7748 section 5 / the usual blocklist).
LOW_ORDER = [
    bytes(32),
    b"\x01" + bytes(31),
    bytes.fromhex("e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800"),
    bytes.fromhex("5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f1157"),
    bytes.fromhex("ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f"),
]

X = ev.X25519Identity.generate(text_form="envelope")
K = ev.EciesIdentity.generate()
#: An X25519 key pair and its ECIES recipient (eciespy's x25519 wrapping).
XE = ev.X25519Identity.generate(text_form="envelope")
KX = ev.EciesRecipient(XE.recipient.public_bytes(), curve="x25519")
SIGNER = Ed25519PrivateKey.generate()


def _enc(data: bytes = DATA, **kwargs: object) -> bytes:
    kwargs.setdefault("segment_size", SEG)
    kwargs.setdefault("work_factor", FAST)
    return envelope_encrypt(data, **kwargs)  # type: ignore[arg-type]


def _stanza_offsets(blob: bytes) -> list[tuple[int, int, int]]:
    """(type, offset of body, body length) of each stanza in an envelope header."""
    header = ev.parse_header(blob)
    assert header is not None
    pos = 6 + (32 if header.signed else 0) + 1
    out = []
    for stanza in header.stanzas:
        out.append((stanza.kind, pos + 3, len(stanza.body)))
        pos += 3 + len(stanza.body)
    return out


def _flip(blob: bytes, index: int) -> bytes:
    bad = bytearray(blob)
    bad[index] ^= 0x01
    return bytes(bad)


# --------------------------------------------------------------------------- round trips


def test_several_recipients_each_decrypts() -> None:
    blob = _enc(recipients=[X.recipient, K.recipient, KX], passphrase="pw")
    kinds = [s.kind for s in ev.parse_header(blob).stanzas]  # type: ignore[union-attr]
    assert kinds == [ev.X25519, ev.ECIES_SECP256K1, ev.ECIES_X25519, ev.ARGON2ID]
    for kwargs in (
        {"identities": X},
        {"identities": [K]},
        {"identities": [XE.to_string()]},
        {"identities": [ev.X25519Identity.generate(), K]},
        {"passphrase": "pw"},
        {"passphrase": b"pw", "identities": [ev.X25519Identity.generate()]},
    ):
        assert envelope_decrypt(blob, **kwargs) == DATA


def test_one_x25519_identity_opens_x25519_and_ecies_x25519_stanzas() -> None:
    ecies_to_x = ev.EciesRecipient(X.recipient.public_bytes(), curve="x25519")
    blob = _enc(recipients=[ecies_to_x, ev.X25519Identity.generate().recipient])
    kinds = [s.kind for s in ev.parse_header(blob).stanzas]  # type: ignore[union-attr]
    assert kinds == [ev.ECIES_X25519, ev.X25519]
    assert envelope_decrypt(blob, identities=X) == DATA


@pytest.mark.parametrize("suite", list(container.SUITE_IDS))
@pytest.mark.parametrize("size", [0, 1, SEG - 1, SEG, 3 * SEG, 3 * SEG + 5])
def test_round_trip_sizes_and_suites(suite: str, size: int) -> None:
    data = DATA[:size]
    blob = _enc(data, recipients=[X.recipient], suite=suite)
    assert envelope_decrypt(blob, identities=X) == data


@pytest.mark.parametrize("signed", [False, True])
def test_any_chunking(signed: bool) -> None:
    rng = random.Random(11 + signed)
    for _ in range(5):
        enc = ev.EnvelopeEncryptor(
            recipients=[X.recipient, K.recipient],
            segment_size=SEG,
            sign_with=SIGNER if signed else None,
        )
        blob = b"".join(enc.update(p) for p in random_splits(DATA, rng, 700)) + enc.finalize()
        dec = ev.EnvelopeDecryptor(
            identities=[K], verify_with=SIGNER.public_key() if signed else None
        )
        out = b"".join(dec.update(p) for p in random_splits(blob, rng, 700)) + dec.finalize()
        assert out == DATA
        assert dec.verified is signed
        assert (dec.signer == SIGNER.public_key()) if signed else dec.signer is None


def test_scrypt_passphrase() -> None:
    blob = _enc(passphrase="correct horse", work_factor=FAST_SCRYPT)
    assert ev.parse_header(blob).stanzas[0].kind == ev.SCRYPT  # type: ignore[union-attr]
    assert envelope_decrypt(blob, passphrase="correct horse") == DATA
    with pytest.raises(UnknownKeyError):
        envelope_decrypt(blob, passphrase="correct horsf")


def test_associated_data_is_bound() -> None:
    blob = _enc(recipients=X.recipient, aad=b"context")
    assert envelope_decrypt(blob, identities=X, aad=b"context") == DATA
    with pytest.raises(AuthenticationError):
        envelope_decrypt(blob, identities=X, aad=b"other")


def test_one_segment_released_before_the_end() -> None:
    blob = _enc(recipients=X.recipient)
    dec = ev.EnvelopeDecryptor(identities=X)
    early = dec.update(blob)
    assert early and DATA.startswith(early)
    assert early + dec.finalize() == DATA


# --------------------------------------------------------------------------- engine


@pytest.mark.anyio
@pytest.mark.parametrize("signed", [False, True])
async def test_engine_with_offload_policy(signed: bool) -> None:
    data = bytes(random.Random(3).randbytes(200_000))
    policy = OffloadPolicy(batch_size=16384, inline_limit=0, adaptive=False)
    sign = SIGNER if signed else None
    verify = SIGNER.public_key() if signed else None
    enc = ev.EnvelopeEncryptor(
        recipients=[X.recipient, K.recipient], segment_size=4096, sign_with=sign
    )
    blob = await pipeline(enc, policy=policy).collect(data)
    assert envelope_decrypt(blob, identities=K, verify_with=verify) == data
    dec = ev.EnvelopeDecryptor(identities=X, verify_with=verify)
    assert await pipeline(dec, policy=policy).collect(blob) == data
    if signed:
        bad = _flip(blob, len(blob) - 3)
        dec = ev.EnvelopeDecryptor(identities=X, verify_with=SIGNER.public_key())
        with pytest.raises(InvalidSignatureError):
            await pipeline(dec, policy=policy).collect(bad)


class _CountingPool(ThreadPoolExecutor):
    def __init__(self) -> None:
        super().__init__(2, thread_name_prefix="test-envelope")
        self.submitted = 0

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        self.submitted += 1
        return super().submit(fn, *args, **kwargs)


@pytest.mark.anyio
@pytest.mark.parametrize("signed", [False, True])
async def test_segments_go_through_the_parallel_path_signed_or_not(
    signed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Signing is a tap after the encryptor: the engine's scheduler gets the sealing
    jobs themselves (to run on workers), never segments sealed beforehand on the loop;
    the tap hashes the ciphertext in order and appends the signature."""
    ran: list[type] = []
    run_into = SegmentJob.run_into

    def spy(job: SegmentJob, out: memoryview) -> tuple[int, Exception | None]:
        ran.append(type(job.codec))
        return run_into(job, out)

    monkeypatch.setattr(SegmentJob, "run_into", spy)
    data = bytes(random.Random(4).randbytes(400_000))
    with _CountingPool() as pool:
        policy = OffloadPolicy(batch_size=16384, inline_limit=0, adaptive=False, executor=pool)
        enc = ev.EnvelopeEncryptor(
            recipients=X.recipient, segment_size=4096, sign_with=SIGNER if signed else None
        )
        run = pipeline(enc, policy=policy)
        assert len(run.stages) == (2 if signed else 1)  # encryptor (| signature tap)
        blob = await run.collect(data)
        assert pool.submitted > 1  # the header, then batches of segments, on workers
    assert set(ran) == {container.ContainerCodec}  # only real sealing jobs ran
    assert len(ran) >= len(data) // 16384  # in batches, not one piece per feed
    verify = SIGNER.public_key() if signed else None
    assert envelope_decrypt(blob, identities=X, verify_with=verify) == data
    assert enc.header is not None and enc.header.signed is signed


def test_signed_encryptor_is_a_chain_not_a_segmented_transform() -> None:
    # The engine, files and one-shot calls flatten a chain and run its segmented stage
    # in parallel, as for AWS; the encryptor is no segmented transform of its own.
    for signed in (False, True):
        stages = ev.EnvelopeEncryptor(recipients=X.recipient, sign_with=SIGNER if signed else None)
        assert not isinstance(stages, SegmentedTransform)
        assert isinstance(stages.stages[0], SegmentedTransform)
        assert len(stages.stages) == (2 if signed else 1)
    enc = ev.EnvelopeEncryptor(recipients=X.recipient, sign_with=SIGNER)
    assert (
        envelope_decrypt(
            enc.update(DATA) + enc.finalize(), identities=X, verify_with=SIGNER.public_key()
        )
        == DATA
    )


def test_engine_sync_entry() -> None:
    """The same through anyio.run, as the lead's high-level functions will use it."""
    policy = OffloadPolicy(batch_size=16384, inline_limit=0, adaptive=False)
    enc = ev.EnvelopeEncryptor(recipients=[KX], segment_size=1024)
    blob = anyio.run(pipeline(enc, policy=policy).collect, DATA)
    assert envelope_decrypt(blob, identities=XE) == DATA


# --------------------------------------------------------------------------- wrong keys


def test_wrong_private_key_and_wrong_passphrase() -> None:
    blob = _enc(recipients=[X.recipient, K.recipient])
    with pytest.raises(UnknownKeyError):
        envelope_decrypt(blob, identities=[ev.X25519Identity.generate()])
    with pytest.raises(UnknownKeyError):
        envelope_decrypt(blob, identities=[ev.EciesIdentity.generate()])
    with pytest.raises(UnknownKeyError):
        envelope_decrypt(blob, passphrase="pw")  # no passphrase stanza at all
    blob = _enc(passphrase="right")
    with pytest.raises(UnknownKeyError):
        envelope_decrypt(blob, passphrase="wrong")
    with pytest.raises(UnknownKeyError):
        envelope_decrypt(blob, identities=X)


def test_needs_something_to_encrypt_or_decrypt_with() -> None:
    with pytest.raises(InvalidParameterError):
        ev.EnvelopeEncryptor()
    with pytest.raises(InvalidParameterError):
        ev.EnvelopeDecryptor()
    with pytest.raises(InvalidParameterError):
        ev.EnvelopeEncryptor(recipients=[ev.PassphraseRecipient("a")], passphrase="b")
    with pytest.raises(InvalidParameterError):
        ev.EnvelopeEncryptor(recipients=[object()])  # type: ignore[list-item]
    with pytest.raises(InvalidParameterError):
        ev.EnvelopeEncryptor(passphrase="")
    with pytest.raises(InvalidParameterError):
        ev.EnvelopeEncryptor(recipients=[X.recipient] * (ev.MAX_STANZAS + 1))
    with pytest.raises(InvalidParameterError):
        ev.EnvelopeEncryptor(recipients=X.recipient, sign_with=b"k" * 32)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- tampering


@pytest.mark.parametrize("kind", ["x25519", "secp256k1", "ecies-x25519", "passphrase"])
def test_tampered_wrapped_key_is_authentication_error(kind: str) -> None:
    recipient, ident = {
        "x25519": (X.recipient, {"identities": X}),
        "secp256k1": (K.recipient, {"identities": K}),
        "ecies-x25519": (KX, {"identities": XE}),
        "passphrase": (ev.PassphraseRecipient("pw", params=FAST), {"passphrase": "pw"}),
    }[kind]
    blob = _enc(recipients=[recipient])
    _, body, length = _stanza_offsets(blob)[0]
    with pytest.raises(AuthenticationError):
        envelope_decrypt(_flip(blob, body + length - 1), **ident)  # type: ignore[arg-type]


def test_tampered_stanza_prefix_or_check() -> None:
    blob = _enc(recipients=[X.recipient])
    _, body, _ = _stanza_offsets(blob)[0]
    # A changed ephemeral key or check makes the stanza someone else's.
    for index in (body + 5, body + 32 + 3):
        with pytest.raises(UnknownKeyError):
            envelope_decrypt(_flip(blob, index), identities=X)
    # With a second recipient, the other one still opens, and the header mac catches it.
    blob = _enc(recipients=[X.recipient, K.recipient])
    _, body, _ = _stanza_offsets(blob)[0]
    with pytest.raises(AuthenticationError):
        envelope_decrypt(_flip(blob, body + 5), identities=K)


def test_tampered_header_and_mac() -> None:
    blob = _enc(recipients=[X.recipient, K.recipient])
    header = ev.parse_header(blob)
    assert header is not None
    with pytest.raises(AuthenticationError):
        envelope_decrypt(_flip(blob, header.size - 1), identities=X)
    with pytest.raises(AuthenticationError):  # container header bound to the envelope
        envelope_decrypt(_flip(blob, header.size + 10), identities=X)
    with pytest.raises(AuthenticationError):  # a segment
        envelope_decrypt(_flip(blob, len(blob) - 20), identities=X)
    with pytest.raises(UnsupportedFormatError):
        envelope_decrypt(_flip(blob, 4), identities=X)  # version
    with pytest.raises(UnsupportedFormatError):
        envelope_decrypt(blob[:5] + b"\x02" + blob[6:], identities=X)  # unknown flag
    with pytest.raises(FormatError):
        envelope_decrypt(b"SCEX" + blob[4:], identities=X)
    with pytest.raises(FormatError):
        envelope_decrypt(blob[:6] + b"\x00" + blob[7:], identities=X)  # zero stanzas


def test_splicing_containers_between_envelopes_fails() -> None:
    a = _enc(recipients=[X.recipient])
    b = _enc(recipients=[X.recipient])
    ha = ev.parse_header(a)
    hb = ev.parse_header(b)
    assert ha is not None and hb is not None
    with pytest.raises(AuthenticationError):
        envelope_decrypt(ha.raw + b[hb.size :], identities=X)


def test_truncated_envelope_header() -> None:
    blob = _enc(recipients=[X.recipient, K.recipient], passphrase="pw")
    header = ev.parse_header(blob)
    assert header is not None
    for cut in range(header.size + 10):
        assert (ev.parse_header(blob[:cut]) is None) is (cut < header.size)
        with pytest.raises(TruncatedStreamError):
            envelope_decrypt(blob[:cut], identities=X)


@pytest.mark.parametrize("signed", [False, True])
def test_truncated_stream(signed: bool) -> None:
    blob = _enc(recipients=[X.recipient], sign_with=SIGNER if signed else None)
    header = ev.parse_header(blob)
    assert header is not None
    for cut in (header.size + 5, len(blob) - 100, len(blob) - 64, len(blob) - 1):
        with pytest.raises((TruncatedStreamError, AuthenticationError)):
            envelope_decrypt(blob[:cut], identities=X)


def test_failure_leaves_the_decryptor_broken() -> None:
    blob = _enc(recipients=[X.recipient])
    dec = ev.EnvelopeDecryptor(identities=[ev.X25519Identity.generate()])
    with pytest.raises(UnknownKeyError):
        dec.update(blob)
    with pytest.raises(BrokenTransformError):
        dec.update(b"more")
    with pytest.raises(BrokenTransformError):
        dec.finalize()


# --------------------------------------------------------------------------- bad points


def _replace_share(blob: bytes, share: bytes) -> bytes:
    _, body, _ = _stanza_offsets(blob)[0]
    return blob[:body] + share + blob[body + len(share) :]


@pytest.mark.parametrize("point", LOW_ORDER)
def test_low_order_x25519_points(point: bytes) -> None:
    with pytest.raises(InvalidPublicKeyError):
        ev.X25519Recipient(point)
    with pytest.raises(InvalidPublicKeyError):
        ev.EciesRecipient(point, curve="x25519")
    for recipient, ident in ((X.recipient, X), (KX, XE)):
        blob = _enc(recipients=[recipient])
        with pytest.raises(InvalidPublicKeyError):
            envelope_decrypt(_replace_share(blob, point), identities=ident)


def _off_curve_x() -> bytes:
    for x in range(1, 100):
        raw = b"\x02" + x.to_bytes(32, "big")
        try:
            ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256K1(), raw)
        except ValueError:
            return raw
    raise AssertionError("no off-curve x below 100")


def test_invalid_secp256k1_points() -> None:
    off = _off_curve_x()
    with pytest.raises(InvalidPublicKeyError):
        ev.EciesRecipient(off)
    with pytest.raises(InvalidPublicKeyError):
        ev.EciesRecipient(b"\x04" + off[1:])  # prefix does not fit the length
    with pytest.raises(InvalidPublicKeyError):
        ev.EciesRecipient(b"\x02" + b"\xff" * 32)  # x >= p
    blob = _enc(recipients=[K.recipient])
    for share in (off, b"\x04" + off[1:], b"\x00" * 33):
        with pytest.raises(InvalidPublicKeyError):
            envelope_decrypt(_replace_share(blob, share), identities=K)


def test_bad_point_in_one_stanza_does_not_block_another() -> None:
    blob = _enc(recipients=[X.recipient, ev.X25519Identity.generate().recipient])
    # Break the first stanza's share: X then has nothing that opens -> the point error.
    with pytest.raises(InvalidPublicKeyError):
        envelope_decrypt(_replace_share(blob, bytes(32)), identities=X)
    other = ev.X25519Identity.generate()
    blob = _enc(recipients=[X.recipient, other.recipient])
    # other's stanza is intact, X's is broken: other opens it, the header mac then fails.
    with pytest.raises(AuthenticationError):
        envelope_decrypt(_replace_share(blob, bytes(32)), identities=other)


# --------------------------------------------------------------------------- passphrase caps


def _set_params(blob: bytes, fmt: str, offset: int, *values: int) -> bytes:
    _, body, _ = _stanza_offsets(blob)[0]
    packed = struct.pack(fmt, *values)
    return blob[: body + offset] + packed + blob[body + offset + len(packed) :]


def test_oversized_argon2_parameters_are_refused_before_work() -> None:
    blob = _enc(passphrase="pw")
    huge_mem = _set_params(blob, ">II", 16, 1, 64 << 20)  # 64 GiB in KiB
    with pytest.raises(LimitExceededError):
        envelope_decrypt(huge_mem, passphrase="pw")
    many_passes = _set_params(blob, ">II", 16, 1 << 31, 8)
    with pytest.raises(LimitExceededError):
        envelope_decrypt(many_passes, passphrase="pw")
    # The reader's cap is adjustable: the writer's own parameters above a low cap.
    with pytest.raises(LimitExceededError):
        envelope_decrypt(
            _enc(passphrase="pw", work_factor=Argon2Params(1, 16384)),
            passphrase="pw",
            max_work_factor=FAST,
        )
    with pytest.raises(FormatError):
        envelope_decrypt(_set_params(blob, ">II", 16, 0, 8), passphrase="pw")
    # Without a passphrase the stanza is never opened, so its parameters never matter.
    with pytest.raises(UnknownKeyError):
        envelope_decrypt(huge_mem, identities=X)


def test_oversized_scrypt_parameters_are_refused_before_work() -> None:
    blob = _enc(passphrase="pw", work_factor=FAST_SCRYPT)
    for log_n, r, p in ((40, 8, 1), (20, 8, 64), (21, 8, 1)):
        with pytest.raises(LimitExceededError):
            envelope_decrypt(_set_params(blob, ">BII", 16, log_n, r, p), passphrase="pw")
    for log_n, r, p in ((0, 8, 1), (64, 8, 1), (10, 0, 1)):
        with pytest.raises(FormatError):
            envelope_decrypt(_set_params(blob, ">BII", 16, log_n, r, p), passphrase="pw")


# --------------------------------------------------------------------------- header rules


class _Raw:
    """A recipient that writes the given stanzas (unknown types, hostile sizes)."""

    def __init__(self, *stanzas: ev.Stanza) -> None:
        self.stanzas = list(stanzas)

    def wrap(self, file_key: bytes) -> list[ev.Stanza]:
        return self.stanzas


def test_unknown_stanza_types_are_skipped() -> None:
    blob = _enc(recipients=[_Raw(ev.Stanza(("0x7f",), b"future")), X.recipient])
    assert envelope_decrypt(blob, identities=X) == DATA


def _hand_written(*stanzas: tuple[int, bytes]) -> bytes:
    """An envelope header (type byte, body) written by hand, with a zero MAC: the writer
    refuses what the reader must refuse."""
    body = b"".join(struct.pack(">BH", kind, len(b)) + b for kind, b in stanzas)
    return ev.MAGIC + bytes([ev.VERSION, 0, len(stanzas)]) + body + bytes(32)


def test_header_rules() -> None:
    phrase = ev.PassphraseRecipient("a", params=FAST).wrap(bytes(32))[0].body
    with pytest.raises(FormatError):  # two passphrase stanzas
        envelope_decrypt(_hand_written((0x01, phrase), (0x01, phrase)), passphrase="a")
    with pytest.raises(FormatError):  # a known stanza type with the wrong size
        envelope_decrypt(_hand_written((0x10, bytes(95))), identities=X)
    blob = _hand_written((0x70, bytes(60000)), (0x70, bytes(60000)), (0x10, bytes(96)))
    with pytest.raises(FormatError):
        envelope_decrypt(blob, identities=X)
    dec = ev.EnvelopeDecryptor(identities=X)
    with pytest.raises(FormatError):  # refused while streaming, before the header ends
        for off in range(0, 70000, 1000):
            dec.update(blob[off : off + 1000])


_UNKNOWN = ev.Stanza(("0x20",), b"u")  # a stanza type readers skip


@pytest.mark.parametrize(
    ("extra", "passphrase"),
    [
        pytest.param(_Raw(*[_UNKNOWN] * ev.MAX_STANZAS), None, id="too-many-stanzas"),
        pytest.param(_Raw(ev.Stanza(("0x20",), bytes(0xFFFF))), None, id="over-64-KiB"),
        pytest.param(
            _Raw(*ev.PassphraseRecipient("a", params=FAST).wrap(bytes(32))),
            "b",
            id="two-passphrases",
        ),
        pytest.param(_Raw(ev.Stanza((ev.X25519,), bytes(95))), None, id="known-type-wrong-size"),
    ],
)
def test_an_envelope_is_written_only_if_it_reads(extra: _Raw, passphrase: str | None) -> None:
    """The writer refuses (InvalidParameterError) every header the reader refuses:
    encrypting and re-keying write headers through one function, which the parser checks.
    Before, encrypting counted recipients, not stanzas, and checked neither the size nor
    the stanzas a Recipient wrote: it made envelopes nobody could open (FormatError)."""
    with pytest.raises(InvalidParameterError, match="cannot be written"):
        _enc(b"data", recipients=[X.recipient, extra], passphrase=passphrase)
    # what the reader takes is written: unknown stanza types, up to the limits
    blob = _enc(b"data", recipients=[X.recipient, _Raw(*[_UNKNOWN] * (ev.MAX_STANZAS - 1))])
    assert envelope_decrypt(blob, identities=X) == b"data"


@pytest.mark.parametrize("size", [ev.MAX_HEADER_SIZE, ev.MAX_HEADER_SIZE + 1])
def test_the_header_cap_is_exactly_max_header_size_reading_and_writing(size: int) -> None:
    """docs/FORMAT.md: a header is at most 64 KiB (MAX_HEADER_SIZE bytes, its MAC
    included). Before, the parser, and so the writer, took one byte more."""
    over = size > ev.MAX_HEADER_SIZE
    # reading: one stanza of a type readers skip, a zero MAC (7 + 3 + 32 bytes around it)
    blob = _hand_written((0x70, bytes(size - 42)))
    assert len(blob) == size
    if over:
        with pytest.raises(FormatError, match="longer than 65536"):
            ev.parse_header(blob)
        with pytest.raises(FormatError, match="longer than 65536"):  # streaming too
            dec = ev.EnvelopeDecryptor(identities=X)
            for off in range(0, size, 4096):
                dec.update(blob[off : off + 4096])
            dec.finalize()
    else:
        assert ev.parse_header(blob).size == size  # type: ignore[union-attr]
    # writing: an X25519 stanza (3 + 96) and a filler
    filler = _Raw(ev.Stanza(("0x20",), bytes(size - 7 - 99 - 3 - 32)))
    if over:
        with pytest.raises(InvalidParameterError, match="cannot be written"):
            _enc(b"data", recipients=[X.recipient, filler])
        return
    blob = _enc(b"data", recipients=[X.recipient, filler])
    assert ev.parse_header(blob).size == size  # type: ignore[union-attr]
    assert envelope_decrypt(blob, identities=X) == b"data"


# --------------------------------------------------------------------------- signatures


def test_signed_stream_verifies() -> None:
    blob = _enc(recipients=[X.recipient], sign_with=SIGNER)
    header = ev.parse_header(blob)
    assert header is not None and header.signer == SIGNER.public_bytes()
    assert envelope_decrypt(blob, identities=X, verify_with=SIGNER.public_key()) == DATA
    assert envelope_decrypt(blob, identities=X, verify_with=SIGNER.public_bytes()) == DATA


def test_verify_with_releases_nothing_before_the_signature_verified() -> None:
    """The rule of every signed format: with verify_with (and no allow_unverified) not a
    byte comes out before the signature at the end verified, however the stream is cut;
    every segment comes out once it did."""
    blob = _enc(recipients=[X.recipient], sign_with=SIGNER)
    bad = _flip(blob, len(blob) - 10)
    rng = random.Random(5)
    for data in (blob, bad):
        dec = ev.EnvelopeDecryptor(identities=X, verify_with=SIGNER.public_key())
        assert b"".join(dec.update(p) for p in random_splits(data, rng, 700)) == b""
        if data is blob:
            assert dec.finalize() == DATA and dec.verified
            continue
        with pytest.raises(InvalidSignatureError):
            dec.finalize()
        assert not dec.verified
        with pytest.raises(BrokenTransformError):
            dec.finalize()


@pytest.mark.anyio
@pytest.mark.parametrize("piece", [8192, 1 << 20])
async def test_streaming_decrypt_with_verify_with_releases_nothing_of_a_bad_signature(
    piece: int,
) -> None:
    """The review's case: streamcrypt.decrypt(verify_with=) of a large envelope whose
    signature was altered released all but its last segment before refusing."""
    data = bytes(random.Random(9).randbytes(300_000))
    blob = _enc(data, recipients=[X.recipient], sign_with=SIGNER, segment_size=4096)
    bad = _flip(blob, len(blob) - 1)

    async def source() -> Any:
        for at in range(0, len(bad), piece):
            yield bad[at : at + piece]

    released = 0
    with pytest.raises(InvalidSignatureError):
        async for chunk in streamcrypt.decrypt(
            source(), identities=[X], verify_with=SIGNER.public_key()
        ):
            released += len(chunk)
    assert released == 0
    out = b"".join(
        [
            c
            async for c in streamcrypt.decrypt(
                blob, identities=[X], verify_with=SIGNER.public_key()
            )
        ]
    )
    assert out == data


def test_a_verifying_decryptor_holds_at_most_max_buffered_bytes() -> None:
    blob = _enc(recipients=[X.recipient], sign_with=SIGNER)
    assert ev.DEFAULT_MAX_BUFFERED == 1 << 30  # the AWS decryptor's max_buffered default
    dec = ev.EnvelopeDecryptor(identities=X, verify_with=SIGNER.public_key(), max_buffered=2 * SEG)
    with pytest.raises(LimitExceededError, match=r"max_buffered.*allow_unverified=True"):
        dec.update(blob)
    with pytest.raises(BrokenTransformError):
        dec.finalize()
    # Just enough: every segment but the final one is held, then all come out.
    held = len(DATA) // SEG * (SEG + container.TAG_SIZE)
    dec = ev.EnvelopeDecryptor(identities=X, verify_with=SIGNER.public_key(), max_buffered=held)
    assert dec.update(blob) == b"" and dec.finalize() == DATA


def test_allow_unverified_with_verify_with_releases_early_and_checks_at_the_end() -> None:
    """For an output that can be discarded (the CLI's atomic file): segments come out as
    their tags verify, and the signature is still checked at the end."""
    blob = _enc(recipients=[X.recipient], sign_with=SIGNER)
    for data, good in ((blob, True), (_flip(blob, len(blob) - 10), False)):
        dec = ev.EnvelopeDecryptor(
            identities=X, verify_with=SIGNER.public_key(), allow_unverified=True, max_buffered=0
        )
        early = dec.update(data)
        assert early and DATA.startswith(early) and len(early) < len(DATA)
        if good:
            assert early + dec.finalize() == DATA and dec.verified
        else:
            with pytest.raises(InvalidSignatureError):
                dec.finalize()
    other = Ed25519PrivateKey.generate().public_key()
    with pytest.raises(InvalidSignatureError):  # still the signer verify_with names
        envelope_decrypt(blob, identities=X, verify_with=other, allow_unverified=True)


@pytest.mark.anyio
async def test_top_level_calls_write_a_signed_envelope() -> None:
    """encrypt_bytes / encrypt reach sign_with (a signing encryptor is two stages: the
    one-shot runner runs its segmented stage, then its signature tap)."""
    verify = SIGNER.public_key()
    blob = streamcrypt.encrypt_bytes(
        DATA, format="envelope", recipients=[X.recipient], sign_with=SIGNER, segment_size=SEG
    )
    assert ev.parse_header(blob).signer == SIGNER.public_bytes()  # type: ignore[union-attr]
    assert streamcrypt.decrypt_bytes(blob, identities=[X], verify_with=verify) == DATA
    with pytest.raises(InvalidSignatureError):
        streamcrypt.decrypt_bytes(_flip(blob, len(blob) - 1), identities=[X], verify_with=verify)
    streamed = b"".join(
        [
            c
            async for c in streamcrypt.encrypt(
                DATA, format="envelope", recipients=[X.recipient], sign_with=SIGNER
            )
        ]
    )
    assert envelope_decrypt(streamed, identities=X, verify_with=verify) == DATA
    assert streamcrypt.decrypt_bytes(streamed, identities=[X], verify_with=verify) == DATA


def test_missing_or_foreign_signature() -> None:
    signed = _enc(recipients=[X.recipient], sign_with=SIGNER)
    with pytest.raises(InvalidSignatureError):  # signature cut off
        envelope_decrypt(signed[:-64], identities=X, verify_with=SIGNER.public_key())
    unsigned = _enc(recipients=[X.recipient])
    with pytest.raises(InvalidSignatureError):
        envelope_decrypt(unsigned, identities=X, verify_with=SIGNER.public_key())
    other = Ed25519PrivateKey.generate()
    with pytest.raises(InvalidSignatureError):
        envelope_decrypt(signed, identities=X, verify_with=other.public_key())


def test_signed_stream_without_verify_with_is_refused_before_any_plaintext() -> None:
    blob = _enc(recipients=[X.recipient], sign_with=SIGNER)
    dec = ev.EnvelopeDecryptor(identities=X)
    with pytest.raises(InvalidSignatureError, match="allow_unverified=True"):
        dec.update(blob)
    with pytest.raises(BrokenTransformError):
        dec.finalize()
    # Fed a byte at a time: refused once the header is in, nothing released before.
    dec = ev.EnvelopeDecryptor(identities=X)
    out = b""
    with pytest.raises(InvalidSignatureError):
        for i in range(len(blob)):
            out += dec.update(blob[i : i + 1])
    assert out == b""
    with pytest.raises(InvalidSignatureError):
        envelope_decrypt(blob, identities=X)
    with pytest.raises(InvalidSignatureError):
        ev.layout(blob[:2000], len(blob), identities=X)
    # So is it through the top-level call and a format's options.
    with pytest.raises(InvalidSignatureError):
        streamcrypt.decrypt_bytes(blob, format="envelope", identities=[X])


def test_allow_unverified_reads_a_signed_stream_unchecked_only_by_name() -> None:
    blob = _enc(recipients=[X.recipient], sign_with=SIGNER)
    dec = ev.EnvelopeDecryptor(identities=X, allow_unverified=True)
    assert dec.update(blob) + dec.finalize() == DATA
    assert dec.signer == SIGNER.public_key() and dec.verified is False
    # Its signature is not looked at: the caller said so.
    flipped = _flip(blob, len(blob) - 1)
    assert envelope_decrypt(flipped, identities=X, allow_unverified=True) == DATA
    # Unsigned envelopes read the same with or without it.
    unsigned = _enc(recipients=[X.recipient])
    assert envelope_decrypt(unsigned, identities=X, allow_unverified=True) == DATA


def test_signature_covers_everything_before_it() -> None:
    from streamcrypt.primitives import Ed25519phVerifier

    blob = _enc(recipients=[X.recipient], sign_with=SIGNER)
    verifier = Ed25519phVerifier(SIGNER.public_key())
    verifier.update(blob[:-64])
    verifier.finalize(blob[-64:])
    assert verifier.verified()


# --------------------------------------------------------------------------- text forms


def test_text_encodings_round_trip() -> None:
    assert str(X.recipient).startswith("sc-x25519-pub1")
    assert X.to_string().startswith("SC-X25519-SECRET-1")
    assert str(K.recipient).startswith("sc-secp256k1-pub1")
    assert K.to_string().startswith("SC-SECP256K1-SECRET-1")
    assert ev.parse_recipient(str(X.recipient)) == X.recipient
    assert ev.parse_recipient(str(K.recipient)) == K.recipient
    assert ev.parse_identity(X.to_string()).recipient == X.recipient
    assert ev.parse_identity(K.to_string()).recipient == K.recipient
    # An x25519 ECIES recipient's text is an X25519 key's: it reads as the one X25519 pair.
    assert ev.parse_recipient(str(KX)) == XE.recipient
    blob = _enc(recipients=[str(X.recipient), str(K.recipient)])
    assert envelope_decrypt(blob, identities=[K.to_string()]) == DATA


def test_one_x25519_key_pair_serves_age_and_the_envelope() -> None:
    """age and the envelope share one recipient model: one Stanza, one X25519 pair whose
    two text forms both parse, each format writing its own stanza for the key."""
    from streamcrypt.codecs import age

    assert ev.X25519Identity is age.X25519Identity and ev.Stanza is age.Stanza
    ident = age.X25519Identity.generate()
    assert ident.to_string().startswith("AGE-SECRET-KEY-1")
    as_envelope = ev.X25519Identity(ident.secret_key(), text_form="envelope")
    assert as_envelope.to_string().startswith("SC-X25519-SECRET-1")
    assert as_envelope.recipient == ident.recipient
    assert ev.parse_recipient(str(ident.recipient)) == ident.recipient
    assert age.parse_recipient(str(as_envelope.recipient)) == ident.recipient
    blob = _enc(recipients=[str(ident.recipient)])
    assert [s.kind for s in ev.parse_header(blob).stanzas] == [ev.X25519]  # type: ignore[union-attr]
    assert envelope_decrypt(blob, identities=[as_envelope.to_string()]) == DATA
    enc = age.AgeEncryptor(recipients=[str(as_envelope.recipient)])
    sealed = enc.update(b"both") + enc.finalize()
    dec = age.AgeDecryptor(identities=[ident])
    assert dec.update(sealed) + dec.finalize() == b"both"
    with pytest.raises(InvalidParameterError):  # an age-only recipient has no envelope stanza
        _enc(recipients=[age.ScryptRecipient("pw", work_factor=1)])


@pytest.mark.parametrize(
    "text",
    [
        "sc-x25519-pub1qqqq",
        "age1pq1qqqq",
        "SC-X25519-SECRET-1QQQQ",
        "",
    ],
)
def test_bad_texts(text: str) -> None:
    with pytest.raises(FormatError):
        ev.parse_recipient(text)
    with pytest.raises(FormatError):
        ev.parse_identity(text)


def test_mistyped_recipient_is_caught_by_the_checksum() -> None:
    text = str(X.recipient)
    swapped = text[:-3] + ("q" if text[-3] != "q" else "p") + text[-2:]
    with pytest.raises(FormatError):
        ev.parse_recipient(swapped)


def test_reprs_hide_secrets() -> None:
    for ident in (X, K, XE):
        secret = ident.secret_key().secret_bytes()
        assert secret.hex() not in repr(ident) and ident.to_string() not in repr(ident)
        assert ident.to_string() not in str(ident)
    assert "hunter2" not in repr(ev.PassphraseRecipient("hunter2", params=FAST))
    assert "hunter2" not in repr(ev.PassphraseIdentity("hunter2"))


def test_bad_key_material() -> None:
    with pytest.raises(InvalidKeySizeError):
        ev.X25519Identity(b"short")
    with pytest.raises(InvalidKeySizeError):
        ev.EciesIdentity(b"short")
    with pytest.raises(InvalidParameterError):
        ev.EciesIdentity(b"\xff" * 32)  # >= the secp256k1 group order
    with pytest.raises(UnsupportedFormatError):
        ev.EciesRecipient(X.recipient.public_bytes(), curve="ed25519")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- random access


@pytest.mark.parametrize("signed", [False, True])
def test_layout_random_access(signed: bool) -> None:
    blob = _enc(recipients=[X.recipient], sign_with=SIGNER if signed else None)
    lay = ev.layout(blob[:2000], len(blob), identities=X, allow_unverified=signed)
    assert lay.plaintext_size == len(DATA)

    def read_at(offset: int, length: int) -> bytes:
        return blob[offset : offset + length]

    for start, stop in ((0, 10), (SEG - 3, SEG + 3), (len(DATA) - 50, len(DATA) + 10)):
        assert lay.read(read_at, start, stop) == DATA[start:stop]
    with pytest.raises(FormatError):
        ev.layout(blob[:40], len(blob), identities=X)
    with pytest.raises(UnknownKeyError):
        ev.layout(blob[:2000], len(blob), identities=ev.X25519Identity.generate())


def _secret_holders() -> list[tuple[object, bytes]]:
    """Every envelope type holding a secret, with the secret's bytes."""
    return [
        (X, X.secret_key().secret_bytes()),
        (K, K.secret_key().secret_bytes()),
        (XE, XE.secret_key().secret_bytes()),
        (ev.PassphraseRecipient("hunter2-secret", params=FAST), b"hunter2-secret"),
        (ev.PassphraseIdentity("hunter2-secret"), b"hunter2-secret"),
    ]


@pytest.mark.parametrize("index", range(5))
def test_secrets_stay_out_of_repr_str_and_pickle(index: int) -> None:
    import copy
    import pickle

    holder, secret = _secret_holders()[index]
    for text in (repr(holder), str(holder)):
        assert secret.hex() not in text and secret.decode("latin-1") not in text
    with pytest.raises(TypeError, match="not picklable"):
        pickle.dumps(holder)
    with pytest.raises(TypeError, match="not picklable"):
        copy.copy(holder)


def test_random_access_keeps_the_readers_caps() -> None:
    """The descriptor's layout takes every reading option, as its decryptor does: a cap
    on the passphrase KDF given to read_range holds there too."""
    from streamcrypt.codecs import FormatOptions

    blob = _enc(passphrase="pw", work_factor=Argon2Params(2, 16384))

    def read_at(offset: int, length: int) -> bytes:
        return blob[offset : offset + length]

    fmt = ev.FORMAT
    assert fmt.read_range(FormatOptions(passphrase="pw"), read_at, len(blob), 0, 5) == DATA[:5]
    low = FormatOptions(passphrase="pw", max_work_factor=Argon2Params(1, 8192))
    with pytest.raises(LimitExceededError):
        fmt.read_range(low, read_at, len(blob), 0, 5)


def test_the_descriptor_refuses_what_the_envelope_does_not_take() -> None:
    """Options the envelope has no use for raise InvalidParameterError at the call
    (they were ignored: a key= beside recipients, rclone's password=)."""
    from streamcrypt.codecs import FormatOptions

    fmt, to_x = ev.FORMAT, (X.recipient,)
    for writing in (
        FormatOptions(recipients=to_x, key=bytes(32)),
        FormatOptions(recipients=to_x, password="p"),
        FormatOptions(recipients=to_x, identities=(X,)),
    ):
        with pytest.raises(InvalidParameterError):
            fmt.encryptors(writing)
    for reading in (
        FormatOptions(identities=(X,), key=bytes(32)),
        FormatOptions(identities=(X,), recipients=to_x),
        FormatOptions(identities=(X,), segment_size=4096),
    ):
        with pytest.raises(InvalidParameterError):
            fmt.decryptors(reading, b"")
    with pytest.raises(InvalidParameterError):
        streamcrypt.encrypt_bytes(b"x", bytes(32), format="envelope", recipients=[X.recipient])
    sealed = streamcrypt.encrypt_bytes(b"x", format="envelope", recipients=[X.recipient])
    assert streamcrypt.decrypt_bytes(sealed, format="envelope", identities=[X]) == b"x"


@pytest.mark.parametrize(
    "make",
    [
        ev.X25519Identity.generate,
        ev.EciesIdentity.generate,
        age.MLKEM768X25519Identity.generate,
        age.SshEd25519Identity.generate,
    ],
)
def test_every_key_identity_and_recipient_follow_the_one_key_model(make: Callable[[], Any]) -> None:
    # One base each (codecs._stanza.PublicKey / KeyIdentity) decides equality, hashing and
    # the secret-hiding repr for every key type of age and the envelope.
    identity = make()
    recipient = identity.recipient
    assert "<secret hidden>" in repr(identity) and str(identity) == repr(identity)
    assert repr(recipient) in repr(identity)
    if hasattr(identity, "to_string"):
        assert identity.to_string() not in repr(identity)
    again = make().recipient
    assert recipient == recipient and hash(recipient) == hash(type(recipient).parse(str(recipient)))
    assert recipient == type(recipient).parse(str(recipient))
    assert recipient != again and recipient != str(recipient)
    stanzas = recipient.wrap(bytes(16))
    assert identity.unwrap(stanzas) == bytes(16)
    assert make().unwrap(stanzas) is None
