"""The AWS Encryption SDK message format against the ``aws-encryption-sdk`` package, both ways.

Raw master keys (AES-GCM and RSA wrapping) need no network. Every algorithm suite and
several frame lengths (0 = non-framed) go both ways; messages the SDK wrote, tampered in
the header, a frame, the footer or the context, are refused here with typed errors.
"""

from __future__ import annotations

import os
import random
from typing import Any

import anyio
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

aws_sdk = pytest.importorskip("aws_encryption_sdk")
from aws_encryption_sdk.identifiers import (  # noqa: E402
    Algorithm,
    CommitmentPolicy,
    EncryptionKeyType,
    WrappingAlgorithm,
)
from aws_encryption_sdk.internal.crypto.wrapping_keys import WrappingKey  # noqa: E402
from aws_encryption_sdk.key_providers.raw import RawMasterKey  # noqa: E402

import streamcrypt  # noqa: E402
from streamcrypt.codecs import aws  # noqa: E402
from streamcrypt.errors import (  # noqa: E402
    AuthenticationError,
    FormatError,
    InvalidSignatureError,
    LimitExceededError,
    StreamCryptError,
    TruncatedStreamError,
    UnknownKeyError,
    UnsupportedFormatError,
)

AES_KEY = bytes(range(32))
CONTEXT = {"purpose": "interop", "tenant": "ünïcødé"}
STRICT = aws_sdk.EncryptionSDKClient(
    commitment_policy=CommitmentPolicy.REQUIRE_ENCRYPT_REQUIRE_DECRYPT
)
ALLOW = aws_sdk.EncryptionSDKClient(
    commitment_policy=CommitmentPolicy.REQUIRE_ENCRYPT_ALLOW_DECRYPT
)
LEGACY = aws_sdk.EncryptionSDKClient(
    commitment_policy=CommitmentPolicy.FORBID_ENCRYPT_ALLOW_DECRYPT
)
RING = aws.RawAesKeyring("streamcrypt-test", "aes-key-1", AES_KEY)
SUITES = list(Algorithm)
FRAMES = [0, 128, 512, 4096, 65536]  # the SDK writes multiples of 128 only
SIZES = [0, 1, 4095, 4096, 4097, 70000]


def _their_aes(key: bytes = AES_KEY) -> RawMasterKey:
    return RawMasterKey(
        provider_id="streamcrypt-test",
        key_id=b"aes-key-1",
        wrapping_key=WrappingKey(
            wrapping_algorithm=WrappingAlgorithm.AES_256_GCM_IV12_TAG16_NO_PADDING,
            wrapping_key=key,
            wrapping_key_type=EncryptionKeyType.SYMMETRIC,
        ),
    )


def _client(alg: Any) -> Any:
    return STRICT if alg.is_committing() else LEGACY


def _data(n: int) -> bytes:
    return random.Random(n).randbytes(n)


@pytest.mark.parametrize("alg", SUITES, ids=lambda a: f"0x{a.algorithm_id:04x}")
@pytest.mark.parametrize("frame", FRAMES)
def test_every_suite_both_ways(alg: Any, frame: int) -> None:
    theirs = _their_aes()
    legacy = not alg.is_committing()
    for n in SIZES:
        data = _data(n)
        ct, _ = _client(alg).encrypt(
            source=data,
            key_provider=theirs,
            algorithm=alg,
            frame_length=frame,
            encryption_context=CONTEXT,
        )
        assert (
            streamcrypt.decrypt_bytes(
                ct, RING, allow_legacy=legacy, encryption_context=CONTEXT, format="aws"
            )
            == data
        )
        suite = f"0x{alg.algorithm_id:04X}"
        if frame:
            ours = streamcrypt.encrypt_bytes(
                data,
                RING,
                suite=suite,
                segment_size=frame,
                allow_legacy=legacy,
                encryption_context=CONTEXT,
                format="aws",
            )
        else:  # non-framed: the codec's, not the format's
            enc = aws.AwsEncryptor(
                RING, suite=suite, frame_length=0, allow_legacy=legacy, encryption_context=CONTEXT
            )
            ours = enc.update(data) + enc.finalize()
        plain, header = ALLOW.decrypt(source=ours, key_provider=theirs)
        assert plain == data
        assert header.encryption_context["tenant"] == "ünïcødé"


@pytest.mark.parametrize("frame", [1, 7, 1000])
def test_odd_frame_lengths_we_write_the_sdk_reads(frame: int) -> None:
    data = _data(3000)
    ours = streamcrypt.encrypt_bytes(data, RING, suite="0x0478", segment_size=frame, format="aws")
    assert STRICT.decrypt(source=ours, key_provider=_their_aes())[0] == data


def test_same_header_fields_as_the_sdk() -> None:
    ours = streamcrypt.encrypt_bytes(
        b"x" * 10000, RING, suite="0x0578", encryption_context=CONTEXT, format="aws"
    )
    theirs, _ = STRICT.encrypt(
        source=b"x" * 10000, key_provider=_their_aes(), encryption_context=CONTEXT
    )
    a, b = aws.parse_header(ours), aws.parse_header(theirs)
    assert a is not None and b is not None
    assert (a.suite, a.framed, a.frame_length, a.size) == (
        b.suite,
        b.framed,
        b.frame_length,
        b.size,
    )
    assert set(a.encryption_context) == set(b.encryption_context)
    assert len(ours) == len(theirs)  # same framing, same static-length signature


@pytest.mark.parametrize(
    "scheme", ["oaep-sha1", "oaep-sha256", "oaep-sha384", "oaep-sha512", "pkcs1"]
)
def test_raw_rsa_both_ways(scheme: aws.RsaPadding) -> None:
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    algo = {
        "oaep-sha1": WrappingAlgorithm.RSA_OAEP_SHA1_MGF1,
        "oaep-sha256": WrappingAlgorithm.RSA_OAEP_SHA256_MGF1,
        "oaep-sha384": WrappingAlgorithm.RSA_OAEP_SHA384_MGF1,
        "oaep-sha512": WrappingAlgorithm.RSA_OAEP_SHA512_MGF1,
        "pkcs1": WrappingAlgorithm.RSA_PKCS1,
    }[scheme]
    theirs = RawMasterKey(
        provider_id="rsa-ns",
        key_id=b"rsa-key",
        wrapping_key=WrappingKey(
            wrapping_algorithm=algo, wrapping_key=pem, wrapping_key_type=EncryptionKeyType.PRIVATE
        ),
    )
    ring = aws.RawRsaKeyring("rsa-ns", "rsa-key", private_key=pem, padding_scheme=scheme)
    data = _data(9000)
    ct, _ = STRICT.encrypt(source=data, key_provider=theirs)
    assert streamcrypt.decrypt_bytes(ct, ring, format="aws") == data
    public_only = aws.RawRsaKeyring(
        "rsa-ns", "rsa-key", public_key=private.public_key(), padding_scheme=scheme
    )
    ours = streamcrypt.encrypt_bytes(data, [public_only, RING], suite="0x0478", format="aws")
    assert STRICT.decrypt(source=ours, key_provider=theirs)[0] == data
    assert STRICT.decrypt(source=ours, key_provider=_their_aes())[0] == data
    with pytest.raises(UnknownKeyError):
        streamcrypt.decrypt_bytes(ours, public_only, format="aws")


def _sdk_message(
    suite: Any = Algorithm.AES_256_GCM_HKDF_SHA512_COMMIT_KEY_ECDSA_P384,
    frame: int = 4096,
    n: int = 20000,
) -> bytes:
    ct, _ = _client(suite).encrypt(
        source=_data(n),
        key_provider=_their_aes(),
        algorithm=suite,
        frame_length=frame,
        encryption_context=CONTEXT,
    )
    return bytes(ct)


def _refused(ct: bytes, **options: Any) -> type[StreamCryptError]:
    with pytest.raises(StreamCryptError) as info:
        streamcrypt.decrypt_bytes(ct, RING, format="aws", **options)
    return type(info.value)


def test_tampered_sdk_messages_are_refused_typed() -> None:
    ct = _sdk_message()
    header = aws.parse_header(ct)
    assert header is not None
    hsize = header.size
    # Header: message id, context value, data key, commitment, tag.
    for pos in (5, hsize - 16 - 32 - 5, hsize - 20, hsize - 1):
        bad = bytearray(ct)
        bad[pos] ^= 1
        assert issubclass(_refused(bytes(bad)), AuthenticationError | FormatError | UnknownKeyError)
    ctx_at = ct.index(b"interop")
    bad = bytearray(ct)
    bad[ctx_at] ^= 0x20  # 'interop' -> 'Interop': a different context
    assert issubclass(_refused(bytes(bad)), AuthenticationError | UnknownKeyError)
    # A frame's ciphertext, its sequence number, frames swapped: the signature covers
    # them and is checked before any frame is opened; opened as they come
    # (allow_unverified=True), the frame's own check refuses them.
    regular = 4096 + 32
    for pos in (hsize + 100, hsize + regular + 2):
        bad = bytearray(ct)
        bad[pos] ^= 1
        assert _refused(bytes(bad)) is InvalidSignatureError
        assert _refused(bytes(bad), allow_unverified=True) is AuthenticationError
    swapped = (
        ct[:hsize]
        + ct[hsize + regular : hsize + 2 * regular]
        + ct[hsize : hsize + regular]
        + ct[hsize + 2 * regular :]
    )
    assert _refused(swapped) is InvalidSignatureError
    assert _refused(swapped, allow_unverified=True) is AuthenticationError
    # Footer: the signature, its length; truncation anywhere; trailing bytes.
    bad = bytearray(ct)
    bad[-3] ^= 1
    assert _refused(bytes(bad)) is InvalidSignatureError
    for cut in (1, 50, 104, 110, len(ct) - hsize):
        assert _refused(ct[:-cut]) in (TruncatedStreamError, AuthenticationError)
    assert _refused(ct + b"\x00") is FormatError
    # Expected context missing or different; wrong key; legacy refused by default.
    assert _refused(ct, encryption_context={"purpose": "other"}) is AuthenticationError
    with pytest.raises(UnknownKeyError):
        streamcrypt.decrypt_bytes(
            ct, aws.RawAesKeyring("streamcrypt-test", "aes-key-1", bytes(32)), format="aws"
        )
    legacy = _sdk_message(Algorithm.AES_256_GCM_IV12_TAG16_HKDF_SHA384_ECDSA_P384)
    assert _refused(legacy) is UnsupportedFormatError


def test_release_modes_on_a_forged_signature() -> None:
    ct = bytearray(_sdk_message(n=50000))
    ct[-3] ^= 1
    dec = aws.AwsDecryptor(RING, allow_unverified=True)
    released = dec.update(bytes(ct))
    assert 0 < len(released) < 50000  # the verified frames, not the final one
    with pytest.raises(InvalidSignatureError):
        dec.finalize()
    held = aws.AwsDecryptor(RING)
    assert held.update(bytes(ct)) == b""
    with pytest.raises(InvalidSignatureError):
        held.finalize()


def test_max_encrypted_data_keys_is_enforced() -> None:
    rings = [aws.RawAesKeyring("streamcrypt-test", f"k{i}", os.urandom(32)) for i in range(4)]
    ct = streamcrypt.encrypt_bytes(b"data", [*rings, RING], suite="0x0478", format="aws")
    assert streamcrypt.decrypt_bytes(ct, RING, format="aws") == b"data"
    with pytest.raises(LimitExceededError):
        streamcrypt.decrypt_bytes(ct, RING, max_encrypted_data_keys=4, format="aws")
    with pytest.raises(LimitExceededError):
        streamcrypt.encrypt_bytes(b"data", rings, max_encrypted_data_keys=3, format="aws")
    their = aws_sdk.EncryptionSDKClient(
        commitment_policy=CommitmentPolicy.REQUIRE_ENCRYPT_REQUIRE_DECRYPT,
        max_encrypted_data_keys=4,
    )
    with pytest.raises(aws_sdk.exceptions.MaxEncryptedDataKeysExceeded):
        their.decrypt(source=ct, key_provider=_their_aes())


def test_random_access_on_sdk_messages() -> None:
    for suite in (
        Algorithm.AES_256_GCM_HKDF_SHA512_COMMIT_KEY,
        Algorithm.AES_256_GCM_HKDF_SHA512_COMMIT_KEY_ECDSA_P384,
    ):
        for frame, n in ((4096, 50000), (1024, 4000), (512, 0), (4096, 8192)):
            data = _data(n)
            ct, _ = STRICT.encrypt(
                source=data, key_provider=_their_aes(), algorithm=suite, frame_length=frame
            )

            def read_at(offset: int, length: int, ct: bytes = ct) -> bytes:
                return ct[offset : offset + length]

            lay = aws.layout(RING, read_at, len(ct))
            assert lay.plaintext_size == n
            rng = random.Random(n)
            for _ in range(20):
                a = rng.randint(0, n)
                b = rng.randint(a, n + 5)
                assert lay.read(read_at, a, b) == data[a:b]
            bad = bytearray(ct)
            bad[-1] ^= 1
            with pytest.raises(StreamCryptError):
                aws.layout(RING, lambda o, k, bad=bytes(bad): bad[o : o + k], len(bad))


def test_async_streams_with_the_sdk() -> None:
    data = _data(3 << 20)

    async def main() -> None:
        ours = b"".join(
            [
                c
                async for c in streamcrypt.encrypt(
                    data, RING, format="aws", encryption_context=CONTEXT
                )
            ]
        )
        assert STRICT.decrypt(source=ours, key_provider=_their_aes())[0] == data
        theirs, _ = STRICT.encrypt(
            source=data, key_provider=_their_aes(), encryption_context=CONTEXT
        )
        got = b"".join(
            [
                c
                async for c in streamcrypt.decrypt(
                    theirs, RING, format="aws", encryption_context=CONTEXT
                )
            ]
        )
        assert got == data
        got = b"".join([c async for c in streamcrypt.decrypt(theirs, RING, format="aws")])
        assert got == data

    anyio.run(main)


@pytest.mark.parametrize(
    "alg",
    [
        Algorithm.AES_256_GCM_HKDF_SHA512_COMMIT_KEY,
        Algorithm.AES_256_GCM_HKDF_SHA512_COMMIT_KEY_ECDSA_P384,
    ],
    ids=lambda a: f"0x{a.algorithm_id:04x}",
)
def test_files_with_the_sdk(alg: Any, tmp_path: Any) -> None:
    """streamcrypt.open(format="aws") writes what the SDK reads, and reads (by ranges)
    what the SDK wrote."""
    suite = f"0x{alg.algorithm_id:04x}"

    async def main() -> None:
        for frame, n in ((4096, 50000), (1024, 4096), (512, 0), (128, 1000)):
            data = _data(n)
            ours = tmp_path / f"ours-{frame}.aws"
            async with streamcrypt.open(
                ours,
                "wb",
                format="aws",
                key=RING,
                suite=suite,
                segment_size=frame,
                encryption_context=CONTEXT,
            ) as f:
                await f.write(data)
            got, header = STRICT.decrypt(source=ours.read_bytes(), key_provider=_their_aes())
            assert got == data
            assert header.algorithm == alg and header.frame_length == frame
            assert all(header.encryption_context[k] == v for k, v in CONTEXT.items())
            theirs = tmp_path / f"theirs-{frame}.aws"
            ct, _ = STRICT.encrypt(
                source=data,
                key_provider=_their_aes(),
                algorithm=alg,
                frame_length=frame,
                encryption_context=CONTEXT,
            )
            theirs.write_bytes(ct)
            async with streamcrypt.open(
                theirs, "rb", format="aws", key=RING, encryption_context=CONTEXT
            ) as f:
                assert f.size == n
                assert await f.read() == data
                rng = random.Random(n)
                for _ in range(15):
                    a = rng.randint(0, n)
                    b = rng.randint(a, n + 5)
                    await f.seek(a)
                    assert await f.read(b - a) == data[a:b]
            # A flipped byte in frame 1 (a regular frame when there are several): the
            # signature fails at open, an unsigned message's frame at the read.
            parsed = aws.parse_header(ct)
            assert parsed is not None
            bad = bytearray(ct)
            bad[parsed.size + 30] ^= 1
            theirs.write_bytes(bytes(bad))
            regular = n >= frame
            error = InvalidSignatureError if alg.is_signing() and regular else AuthenticationError
            with pytest.raises(error):
                async with streamcrypt.open(theirs, "rb", format="aws", key=RING) as f:
                    await f.read()

    anyio.run(main)
