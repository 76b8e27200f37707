"""streamcrypt.formats: each standard format as async streams on the engine, both ways."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from support import age_decrypt, age_encrypt

from streamcrypt import formats
from streamcrypt.codecs import FormatOptions
from streamcrypt.codecs import age as age_codec
from streamcrypt.codecs import cobblestone as cobblestone_codec
from streamcrypt.codecs import ece as ece_codec
from streamcrypt.codecs import rclone as rclone_codec
from streamcrypt.codecs import tink as tink_codec
from streamcrypt.codecs.tink import TEMPLATES, TinkStreamingKey
from streamcrypt.engine import OffloadPolicy
from streamcrypt.errors import (
    AuthenticationError,
    FormatError,
    InvalidParameterError,
    TruncatedStreamError,
)
from streamcrypt.formats import age, cobblestone, ece, secretstream, tink

pytestmark = pytest.mark.anyio

THREADED = OffloadPolicy(batch_size=32 << 10, inline_limit=0, adaptive=False)
DATA = random.Random(1).randbytes(300_000)
KEY32 = bytes(range(32))
KEY16 = bytes(range(16))
IDENTITY = age_codec.X25519Identity.generate()
TINK_KEY = TinkStreamingKey.generate(TEMPLATES["AES256_GCM_HKDF_4KB"])


async def chunks(data: bytes, seed: int = 0) -> AsyncIterator[bytes]:
    rng = random.Random(seed)
    i = 0
    while i < len(data):
        n = rng.randint(1, 20_000)
        yield data[i : i + n]
        i += n


async def collect(it: AsyncIterator[bytes]) -> bytes:
    return b"".join([c async for c in it])


# name -> (async encrypt, async decrypt, sync encrypt, sync decrypt)
CASES: dict[
    str, tuple[Callable[..., Any], Callable[..., Any], Callable[..., bytes], Callable[..., bytes]]
] = {
    "age": (
        lambda src, p: age.encrypt(src, recipients=[IDENTITY.recipient], policy=p),
        lambda src, p: age.decrypt(src, identities=[IDENTITY], policy=p),
        lambda d: age.encrypt_bytes(d, recipients=[IDENTITY.recipient]),
        lambda c: age.decrypt_bytes(c, identities=[IDENTITY]),
    ),
    "age-armor": (
        lambda src, p: age.encrypt(src, recipients=[IDENTITY.recipient], armor=True, policy=p),
        lambda src, p: age.decrypt(src, identities=[IDENTITY], policy=p),
        lambda d: age.encrypt_bytes(d, recipients=[IDENTITY.recipient], armor=True),
        lambda c: age.decrypt_bytes(c, identities=[IDENTITY]),
    ),
    "tink": (
        lambda src, p: tink.encrypt(src, TINK_KEY, aad=b"ad", policy=p),
        lambda src, p: tink.decrypt(src, TINK_KEY, aad=b"ad", policy=p),
        lambda d: tink.encrypt_bytes(d, TINK_KEY, aad=b"ad"),
        lambda c: tink.decrypt_bytes(c, TINK_KEY, aad=b"ad"),
    ),
    "cobblestone": (
        lambda src, p: cobblestone.encrypt(src, KEY32, aad=b"ctx", policy=p),
        lambda src, p: cobblestone.decrypt(src, KEY32, aad=b"ctx", policy=p),
        lambda d: cobblestone.encrypt_bytes(d, KEY32, aad=b"ctx"),
        lambda c: cobblestone.decrypt_bytes(c, KEY32, aad=b"ctx"),
    ),
    "ece": (
        lambda src, p: ece.encrypt(src, KEY16, segment_size=4079, policy=p),
        lambda src, p: ece.decrypt(src, KEY16, policy=p),
        lambda d: ece.encrypt_bytes(d, KEY16, segment_size=4079),
        lambda c: ece.decrypt_bytes(c, KEY16),
    ),
}


@pytest.mark.parametrize("policy", [None, THREADED], ids=["inline", "threads"])
@pytest.mark.parametrize("name", list(CASES))
async def test_async_and_one_shot_agree_both_ways(name: str, policy: OffloadPolicy | None) -> None:
    aenc, adec, senc, sdec = CASES[name]
    ct = await collect(aenc(chunks(DATA), policy))
    assert sdec(ct) == DATA
    assert await collect(adec(chunks(senc(DATA), 1), policy)) == DATA
    assert await collect(adec(ct, policy)) == DATA  # a bytes source works too


@pytest.mark.parametrize("name", list(CASES))
async def test_tampering_is_caught_on_the_async_path(name: str) -> None:
    _aenc, adec, senc, _sdec = CASES[name]
    ct = bytearray(senc(DATA))
    ct[len(ct) // 2] ^= 0x04
    with pytest.raises((AuthenticationError, FormatError)):
        await collect(adec(chunks(bytes(ct)), THREADED))


async def test_secretstream_async_round_trip_and_truncation() -> None:
    ct = await collect(secretstream.encrypt(chunks(DATA), KEY32, segment_size=4096))
    assert await collect(secretstream.decrypt(chunks(ct, 2), KEY32, segment_size=4096)) == DATA
    with pytest.raises(TruncatedStreamError):
        await collect(
            secretstream.decrypt(ct[: -(len(DATA) % 4096 + 17)], KEY32, segment_size=4096)
        )


# name -> (codec one-shot encrypt, codec one-shot decrypt), the inline references
CODEC_ONE_SHOTS: dict[str, tuple[Callable[[bytes], bytes], Callable[[bytes], bytes]]] = {
    "age": (
        lambda d: age_encrypt(d, recipients=[IDENTITY.recipient]),
        lambda c: age_decrypt(c, identities=[IDENTITY]),
    ),
    "tink": (
        lambda d: tink_codec.encrypt_bytes(d, TINK_KEY, aad=b"ad"),
        lambda c: tink_codec.decrypt_bytes(c, TINK_KEY, aad=b"ad"),
    ),
    "cobblestone": (
        lambda d: cobblestone_codec.encrypt_bytes(d, KEY32, aad=b"ctx"),
        lambda c: cobblestone_codec.decrypt_bytes(c, KEY32, aad=b"ctx"),
    ),
    "ece": (
        lambda d: ece_codec.encrypt_bytes(d, KEY16, record_size=4096),
        lambda c: ece_codec.decrypt_bytes(c, KEY16),
    ),
}


@pytest.mark.parametrize("name", list(CODEC_ONE_SHOTS))
def test_one_shots_run_on_the_engine_and_match_the_codec(name: str) -> None:
    """formats.*.encrypt_bytes/decrypt_bytes split large work over helper threads (large
    enough here that the engine brings them); the bytes interoperate with the codec's
    inline one-shots both ways, and a tampered segment fails the whole call."""
    _aenc, _adec, senc, sdec = CASES[name]
    cenc, cdec = CODEC_ONE_SHOTS[name]
    data = random.Random(9).randbytes(3 << 20)
    ours = senc(data)
    assert type(ours) is bytes
    assert cdec(ours) == data
    assert sdec(cenc(data)) == data
    tampered = bytearray(ours)
    tampered[len(tampered) // 2] ^= 1
    with pytest.raises((AuthenticationError, FormatError)):
        sdec(bytes(tampered))


async def _never_read() -> AsyncIterator[bytes]:
    raise AssertionError("the source was read: the arguments were not checked at the call")
    yield b""  # pragma: no cover


# module -> (encrypt with a bad argument, decrypt with a bad argument); each must raise
# at the call, before any iteration, as streamcrypt.encrypt/decrypt do.
BAD_CALLS: dict[str, tuple[Callable[[], object], Callable[[], object]]] = {
    "age": (lambda: age.encrypt(_never_read()), lambda: age.decrypt(_never_read())),
    "aws": (
        lambda: formats.aws.encrypt(_never_read(), b"not a keyring"),
        lambda: formats.aws.decrypt(_never_read(), b"not a keyring"),
    ),
    "cobblestone": (
        lambda: cobblestone.encrypt(_never_read(), b"short"),
        lambda: cobblestone.decrypt(_never_read(), b"short"),
    ),
    "ece": (
        lambda: ece.encrypt(_never_read(), KEY16, padding=1 << 20),
        lambda: ece.decrypt(_never_read(), b"short"),
    ),
    "rclone": (
        lambda: formats.rclone.encrypt(_never_read()),
        lambda: formats.rclone.decrypt(_never_read(), password=""),
    ),
    "secretstream": (
        lambda: secretstream.encrypt(_never_read(), KEY32, segment_size=0),
        lambda: secretstream.decrypt(_never_read(), b"short"),
    ),
    "tink": (
        lambda: tink.encrypt(_never_read(), b"not a key"),
        lambda: tink.decrypt(_never_read(), b"not a key"),
    ),
}


def test_every_format_module_has_bad_call_cases() -> None:
    assert sorted(BAD_CALLS) == sorted(set(formats.__all__) - {"run"})


@pytest.mark.parametrize("direction", [0, 1], ids=["encrypt", "decrypt"])
@pytest.mark.parametrize("name", sorted(BAD_CALLS))
def test_bad_arguments_raise_at_the_call_not_on_first_iteration(name: str, direction: int) -> None:
    with pytest.raises(InvalidParameterError):
        BAD_CALLS[name][direction]()


async def test_rclone_password_path_checks_expected_size_at_the_call() -> None:
    with pytest.raises(InvalidParameterError):
        formats.rclone.decrypt(_never_read(), password="pw", expected_size=-1)


async def test_ece_async_encrypt_passes_salt_and_padding_through() -> None:
    salt = bytes(range(16))
    want = ece_codec.encrypt_bytes(DATA, KEY16, salt=salt, record_size=4096, padding=7)
    got = await collect(ece.encrypt(chunks(DATA), KEY16, salt=salt, segment_size=4079, padding=7))
    assert got == want
    assert ece_codec.read_header(got) == ece_codec.EceHeader(salt, 4096, b"")
    assert len(got) == ece_codec.encrypted_length(len(DATA), segment_size=4079, padding=7)
    assert ece_codec.encrypt_bytes(DATA, KEY16, salt=salt, segment_size=4079, padding=7) == want
    assert await collect(ece.decrypt(chunks(got), KEY16)) == DATA


def test_old_and_new_keyword_together_raise() -> None:
    with pytest.raises(InvalidParameterError, match="not both"):
        ece_codec.EceEncryptor(KEY16, segment_size=64, record_size=81)
    for bad in (0, -17, "4079", None.__class__):
        with pytest.raises(InvalidParameterError):
            ece.encrypt(_never_read(), KEY16, segment_size=bad)  # type: ignore[arg-type]


# ------------------------------------------------------------------ one runner, format=


async def test_top_level_calls_speak_every_registered_format_by_name() -> None:
    import streamcrypt

    rc_keys = rclone_codec.RcloneKeys.from_material(bytes(range(80)))
    keyed = {
        "native": (KEY32, KEY32),
        "tink": (TINK_KEY, TINK_KEY),
        "cobblestone": (KEY32, KEY32),
        "ece": (KEY16, KEY16),
        "secretstream": (KEY32, KEY32),
        "rclone": (rc_keys, rc_keys),
    }
    for name, (wkey, rkey) in keyed.items():
        sealed = streamcrypt.encrypt_bytes(DATA, wkey, format=name)
        assert sealed != DATA[: len(sealed)]
        assert streamcrypt.decrypt_bytes(sealed, rkey, format=name) == DATA, name
        streamed = await collect(streamcrypt.encrypt(chunks(DATA), wkey, format=name))
        back = await collect(streamcrypt.decrypt(chunks(streamed), rkey, format=name))
        assert back == DATA, name
    aged = streamcrypt.encrypt_bytes(DATA, format="age", recipients=[IDENTITY.recipient])
    assert aged.startswith(b"age-encryption.org/v1")
    assert streamcrypt.decrypt_bytes(aged, format="age", identities=[IDENTITY]) == DATA
    assert age.decrypt_bytes(aged, identities=[IDENTITY]) == DATA


def test_top_level_format_errors_name_the_formats_and_the_misplaced_option() -> None:
    import streamcrypt

    with pytest.raises(InvalidParameterError, match=r"streamcrypt speaks .*age.*native"):
        streamcrypt.encrypt_bytes(b"x", KEY32, format="zip")
    with pytest.raises(InvalidParameterError, match="not key="):
        streamcrypt.encrypt_bytes(b"x", KEY32, format="age")
    with pytest.raises(InvalidParameterError, match="segment size"):
        streamcrypt.encrypt_bytes(b"x", KEY32, segment_size=0)
    with pytest.raises(InvalidParameterError, match="no armor"):
        formats.run.encrypt_bytes(
            cobblestone_codec.FORMAT, b"x", FormatOptions(key=KEY32, armor=True), None
        )


async def test_the_runner_writes_and_detects_armor_from_the_descriptor() -> None:
    fmt = age_codec.FORMAT
    write = FormatOptions(recipients=(IDENTITY.recipient,), armor=True)
    read = FormatOptions(identities=(IDENTITY,))
    armored = formats.run.encrypt_bytes(fmt, DATA, write, None)
    assert armored.startswith(b"-----BEGIN AGE ENCRYPTED FILE-----")
    assert fmt.identifies(b"\n  " + armored[:40]) and fmt.identifies(b"age-encryption.org/v1")
    assert not fmt.identifies(b"-----BEGIN PGP MESSAGE-----")
    assert formats.run.decrypt_bytes(fmt, b"\n" + armored, read, None) == DATA
    streamed = await collect(formats.run.encrypt(fmt, chunks(DATA), write, THREADED))
    assert streamed.startswith(b"-----BEGIN AGE")
    back = await collect(formats.run.decrypt(fmt, chunks(b" " + streamed, 3), read, THREADED))
    assert back == DATA


def test_age_keys_are_keyword_only() -> None:
    recipient = IDENTITY.recipient
    with pytest.raises(TypeError):
        age.encrypt_bytes(b"msg", [recipient])  # type: ignore[misc]
    with pytest.raises(TypeError):
        age.decrypt(_never_read(), [IDENTITY])  # type: ignore[misc]
    sealed = age.encrypt_bytes(b"msg", recipients=[recipient], armor=True)
    assert age.decrypt_bytes(sealed, identities=[IDENTITY]) == b"msg"


def test_async_and_one_shot_calls_take_the_same_keywords_and_say_who_they_are() -> None:
    import inspect

    for name in sorted(set(formats.__all__) - {"run"}):
        module = getattr(formats, name)
        for verb in ("encrypt", "decrypt"):
            streamed = inspect.signature(getattr(module, verb))
            assert next(iter(streamed.parameters)) == "source", (name, verb)
            assert getattr(module, verb).__module__ == module.__name__
            assert getattr(module, verb).__name__ == verb and getattr(module, verb).__doc__
            if not hasattr(module, f"{verb}_bytes"):
                continue
            whole = inspect.signature(getattr(module, f"{verb}_bytes"))
            assert list(streamed.parameters)[1:] == list(whole.parameters)[1:], (name, verb)
            assert whole.return_annotation is bytes


def test_the_registry_names_each_descriptor_and_imports_only_what_is_looked_up() -> None:
    import subprocess
    import sys

    from streamcrypt.codecs import FORMATS

    assert list(FORMATS) == [fmt.name for fmt in FORMATS.values()]
    code = (
        "import sys; from streamcrypt.codecs import FORMATS; FORMATS['age']; "
        "print(sorted(m for m in ('streamcrypt.codecs.age', 'streamcrypt.codecs.aws', "
        "'streamcrypt.codecs.tink') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['streamcrypt.codecs.age']"
