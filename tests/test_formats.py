"""Every registered format through the top-level calls (``streamcrypt.encrypt`` /
``decrypt`` / ``encrypt_bytes`` / ``decrypt_bytes`` with ``format=``): async and one-shot
agree, every option of every format is reachable by its codec's name, options a format
does not take are refused at the call, and reads detect the format."""

from __future__ import annotations

import inspect
import random
from collections.abc import AsyncIterator
from typing import Any

import pytest

import streamcrypt
from streamcrypt.codecs import FORMATS, FormatOptions
from streamcrypt.codecs import age as age_codec
from streamcrypt.codecs import ece as ece_codec
from streamcrypt.codecs import envelope as envelope_codec
from streamcrypt.codecs.aws import RawAesKeyring
from streamcrypt.codecs.rclone import RcloneKeys
from streamcrypt.codecs.tink import TEMPLATES, TinkStreamingKey
from streamcrypt.engine import OffloadPolicy
from streamcrypt.errors import (
    AuthenticationError,
    FormatError,
    InvalidParameterError,
    TruncatedStreamError,
)
from streamcrypt.keys import Argon2Params

pytestmark = pytest.mark.anyio

THREADED = OffloadPolicy(batch_size=32 << 10, inline_limit=0, adaptive=False)
DATA = random.Random(1).randbytes(300_000)
KEY32 = bytes(range(32))
KEY16 = bytes(range(16))
IDENTITY = age_codec.X25519Identity.generate()
SC_IDENTITY = envelope_codec.X25519Identity.generate()
TINK_KEY = TinkStreamingKey.generate(TEMPLATES["AES256_GCM_HKDF_4KB"])
RING = RawAesKeyring("ns", "k", KEY32)
FAST_ARGON = Argon2Params(1, 8192)

#: case -> (format, writing keywords, reading keywords)
CASES: dict[str, tuple[str, dict[str, Any], dict[str, Any]]] = {
    "native": ("native", {"key": KEY32, "aad": b"ad"}, {"key": KEY32, "aad": b"ad"}),
    "envelope": (
        "envelope",
        {"recipients": [SC_IDENTITY.recipient]},
        {"identities": [SC_IDENTITY]},
    ),
    "envelope-passphrase": (
        "envelope",
        {"passphrase": "pw", "work_factor": FAST_ARGON},
        {"passphrase": "pw", "max_work_factor": FAST_ARGON},
    ),
    "age": ("age", {"recipients": [IDENTITY.recipient]}, {"identities": [IDENTITY]}),
    "age-armor": (
        "age",
        {"recipients": [IDENTITY.recipient], "armor": True},
        {"identities": [IDENTITY]},
    ),
    "age-passphrase": (
        "age",
        {"passphrase": "pw", "work_factor": 10},
        {"passphrase": "pw", "max_work_factor": 10},
    ),
    "tink": ("tink", {"key": TINK_KEY, "aad": b"ad"}, {"key": TINK_KEY, "aad": b"ad"}),
    "cobblestone": ("cobblestone", {"key": KEY32, "aad": b"ctx"}, {"key": KEY32, "aad": b"ctx"}),
    "ece": ("ece", {"key": KEY16, "segment_size": 4079, "keyid": "k1"}, {"key": KEY16}),
    "rclone": (
        "rclone",
        {"password": "pw", "password2": "salt"},
        {"password": "pw", "password2": "salt"},
    ),
    "rclone-keys": (
        "rclone",
        {"key": RcloneKeys.from_material(bytes(range(80)))},
        {"key": RcloneKeys.from_material(bytes(range(80))), "expected_size": len(DATA)},
    ),
    "aws": (
        "aws",
        {"key": RING, "encryption_context": {"a": "b"}, "segment_size": 1000},
        {"key": RING, "encryption_context": {"a": "b"}},
    ),
    "secretstream": (
        "secretstream",
        {"key": KEY32, "segment_size": 4096},
        {"key": KEY32, "segment_size": 4096},
    ),
}


async def chunks(data: bytes, seed: int = 0) -> AsyncIterator[bytes]:
    rng = random.Random(seed)
    i = 0
    while i < len(data):
        n = rng.randint(1, 20_000)
        yield data[i : i + n]
        i += n


async def collect(it: AsyncIterator[bytes]) -> bytes:
    return b"".join([c async for c in it])


def test_the_cases_cover_every_registered_format() -> None:
    assert {fmt for fmt, _w, _r in CASES.values()} == set(FORMATS)


@pytest.mark.parametrize("policy", [None, THREADED], ids=["inline", "threads"])
@pytest.mark.parametrize("name", list(CASES))
async def test_async_and_one_shot_agree_both_ways(name: str, policy: OffloadPolicy | None) -> None:
    fmt, write, read = CASES[name]
    ct = await collect(streamcrypt.encrypt(chunks(DATA), format=fmt, policy=policy, **write))
    assert streamcrypt.decrypt_bytes(ct, format=fmt, **read) == DATA
    sealed = streamcrypt.encrypt_bytes(DATA, format=fmt, policy=policy, **write)
    got = await collect(streamcrypt.decrypt(chunks(sealed, 1), format=fmt, policy=policy, **read))
    assert got == DATA
    assert await collect(streamcrypt.decrypt(ct, format=fmt, policy=policy, **read)) == DATA


@pytest.mark.parametrize("name", list(CASES))
async def test_tampering_is_caught_on_both_paths(name: str) -> None:
    fmt, write, read = CASES[name]
    ct = bytearray(streamcrypt.encrypt_bytes(DATA, format=fmt, **write))
    ct[len(ct) // 2] ^= 0x04
    with pytest.raises((AuthenticationError, FormatError)):
        await collect(streamcrypt.decrypt(chunks(bytes(ct)), format=fmt, policy=THREADED, **read))
    with pytest.raises((AuthenticationError, FormatError)):
        streamcrypt.decrypt_bytes(bytes(ct), format=fmt, **read)


async def test_secretstream_truncation_is_caught() -> None:
    ct = streamcrypt.encrypt_bytes(DATA, KEY32, format="secretstream", segment_size=4096)
    with pytest.raises(TruncatedStreamError):
        cut = ct[: -(len(DATA) % 4096 + 17)]
        await collect(streamcrypt.decrypt(cut, KEY32, format="secretstream", segment_size=4096))


@pytest.mark.parametrize("name", ["native", "age", "tink", "cobblestone", "ece", "aws"])
def test_one_shots_on_the_engine_match_the_inline_run(name: str) -> None:
    """Large one-shots split their segments over helper threads; the bytes interoperate
    with the inline run (``policy=None``) both ways, and a tampered segment fails the
    whole call."""
    fmt, write, read = CASES[name]
    data = random.Random(9).randbytes(3 << 20)
    ours = streamcrypt.encrypt_bytes(data, format=fmt, policy=THREADED, **write)
    assert type(ours) is bytes
    assert streamcrypt.decrypt_bytes(ours, format=fmt, policy=None, **read) == data
    inline = streamcrypt.encrypt_bytes(data, format=fmt, policy=None, **write)
    assert streamcrypt.decrypt_bytes(inline, format=fmt, policy=THREADED, **read) == data
    tampered = bytearray(ours)
    tampered[len(tampered) // 2] ^= 1
    with pytest.raises((AuthenticationError, FormatError)):
        streamcrypt.decrypt_bytes(bytes(tampered), format=fmt, policy=THREADED, **read)


async def _never_read() -> AsyncIterator[bytes]:
    raise AssertionError("the source was read: the arguments were not checked at the call")
    yield b""  # pragma: no cover


# format -> (encrypt keywords, decrypt keywords), each bad: must raise at the call.
BAD: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "native": ({"key": b"short"}, {}),
    "envelope": ({}, {}),
    "age": ({}, {}),
    "aws": ({"key": b"not a keyring"}, {"key": b"not a keyring"}),
    "cobblestone": ({"key": b"short"}, {"key": b"short"}),
    "ece": ({"key": KEY16, "padding": 1 << 20}, {"key": b"short"}),
    "rclone": ({}, {"password": ""}),
    "secretstream": ({"key": KEY32, "segment_size": 0}, {"key": b"short"}),
    "tink": ({"key": b"not a key"}, {"key": b"not a key"}),
}


@pytest.mark.parametrize("direction", ["encrypt", "decrypt"])
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_bad_arguments_raise_at_the_call_not_on_first_iteration(fmt: str, direction: str) -> None:
    kwargs = BAD[fmt][0 if direction == "encrypt" else 1]
    with pytest.raises(InvalidParameterError):
        getattr(streamcrypt, direction)(_never_read(), format=fmt, **kwargs)


def test_rclone_password_path_checks_expected_size_at_the_call() -> None:
    with pytest.raises(InvalidParameterError, match="expected_size"):
        streamcrypt.decrypt(_never_read(), format="rclone", password="pw", expected_size=-1)


async def test_ece_passes_salt_keyid_and_padding_through() -> None:
    salt = bytes(range(16))
    kw: dict[str, Any] = {"salt": salt, "segment_size": 4079, "padding": 7, "keyid": "k1"}
    want = streamcrypt.encrypt_bytes(DATA, KEY16, format="ece", **kw)
    got = await collect(streamcrypt.encrypt(chunks(DATA), KEY16, format="ece", **kw))
    assert got == want
    assert ece_codec.read_header(got) == ece_codec.EceHeader(salt, 4096, b"k1")
    assert len(got) == ece_codec.encrypted_length(len(DATA), segment_size=4079, padding=7) + 2
    assert await collect(streamcrypt.decrypt(chunks(got), KEY16, format="ece")) == DATA
    with pytest.raises(Exception, match="record"):
        streamcrypt.decrypt_bytes(got, KEY16, format="ece", max_record_size=1000)


def test_the_issue_calls_work() -> None:
    """Issue 26's first examples: rclone's password and age's work factor from the top."""
    sealed = streamcrypt.encrypt_bytes(b"x", format="rclone", password="p")
    assert streamcrypt.decrypt_bytes(sealed, format="rclone", password="p") == b"x"
    aged = streamcrypt.encrypt_bytes(b"x", format="age", passphrase="p", work_factor=10)
    assert b"scrypt" in aged and b" 10\n" in aged
    assert streamcrypt.decrypt_bytes(aged, passphrase="p") == b"x"


# ------------------------------------------------------------------ one vocabulary

WRITERS = ("encrypt", "encrypt_bytes")
READERS = ("decrypt", "decrypt_bytes")


def test_every_option_of_every_format_is_a_keyword_of_the_top_level_calls() -> None:
    """Each option a format takes (its descriptor's ``writes`` / ``reads``) is a keyword,
    by that name, of both top-level calls of that direction; every FormatOptions field
    is reachable from some call."""
    reached: set[str] = set()
    for fmt in FORMATS.values():
        for verbs, takes in ((WRITERS, fmt.writes), (READERS, fmt.reads)):
            for verb in verbs:
                params = inspect.signature(getattr(streamcrypt, verb)).parameters
                missing = takes - set(params)
                assert not missing, f"streamcrypt.{verb} cannot reach {fmt.name}'s {missing}"
            reached |= takes
    assert reached == set(FormatOptions._fields)


@pytest.mark.parametrize("build", ["_writing", "_reading"])
def test_each_keyword_lands_in_the_option_of_its_name(build: str) -> None:
    """The calls build their options positionally (tuple.__new__, 1.5 us less a call than
    the named tuple's keywords): each parameter of the builder must land in the field of
    its name and every other field keep its default, whatever order the fields take."""
    from streamcrypt import _api

    builder = getattr(_api, build)
    marks = {name: object() for name in inspect.signature(builder).parameters}
    options = builder(*marks.values())
    assert type(options) is FormatOptions and len(options) == len(FormatOptions._fields)
    for field, value in zip(FormatOptions._fields, options, strict=True):
        if field in ("recipients", "identities") and field in marks:
            assert value == (marks[field],), field  # one_or_many: one item
        elif field in marks:
            assert value is marks[field], field
        else:
            assert value == FormatOptions._field_defaults[field], field


#: A value off the default for every option (what is refused is the name, not the value).
SET = {
    "key": KEY32,
    "suite": "aes-256-gcm",
    "segment_size": 4096,
    "aad": b"ad",
    "recipients": [IDENTITY.recipient],
    "identities": [IDENTITY],
    "passphrase": "pw",
    "work_factor": 10,
    "max_work_factor": 10,
    "armor": True,
    "sign_with": None,
    "verify_with": b"\x00" * 32,
    "password": "pw",
    "password2": "s",
    "expected_size": 5,
    "salt": bytes(16),
    "keyid": "k",
    "padding": 1,
    "max_record_size": 100,
    "allow_no_records": True,
    "encryption_context": {"a": "b"},
    "allow_legacy": True,
    "allow_unverified": True,
    "max_encrypted_data_keys": 3,
}


@pytest.mark.parametrize("verb", [*WRITERS, *READERS])
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_an_option_the_format_does_not_take_is_refused_naming_both(fmt: str, verb: str) -> None:
    descriptor = FORMATS[fmt]
    takes = descriptor.writes if verb in WRITERS else descriptor.reads
    params = inspect.signature(getattr(streamcrypt, verb)).parameters
    data: Any = _never_read() if verb in ("encrypt", "decrypt") else b"data"
    for name, value in SET.items():
        if name in takes or name not in params or value is None:
            continue
        with pytest.raises(InvalidParameterError, match=f'format="{fmt}".*{name}='):
            getattr(streamcrypt, verb)(data, format=fmt, **{name: value})


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_the_option_check_sees_each_option_a_format_does_not_take(fmt: str) -> None:
    """check_options' one comparison (the options a format does not take, as slices of
    consecutive fields) sees every such field, at either end of a run, each mode:
    any one of them set off its default alone is refused, naming it."""
    descriptor = FORMATS[fmt]
    for mode, takes in (("wb", descriptor.writes), ("rb", descriptor.reads)):
        for name in FormatOptions._fields:
            if name in takes:
                continue
            value = SET.get(name)
            if value is None:
                value = ("set",)
            options = FormatOptions()._replace(**{name: value})
            with pytest.raises(InvalidParameterError, match=f"{name}="):
                descriptor.check_options(options, mode)


def test_top_level_format_errors_name_the_formats() -> None:
    with pytest.raises(InvalidParameterError, match=r"streamcrypt speaks .*native.*age"):
        streamcrypt.encrypt_bytes(b"x", KEY32, format="zip")
    with pytest.raises(InvalidParameterError, match="segment size"):
        streamcrypt.encrypt_bytes(b"x", KEY32, segment_size=0)
    with pytest.raises(FormatError, match="Bech32"):  # one key as text: parsed, refused
        streamcrypt.encrypt_bytes(b"x", format="age", recipients="age1...")


async def test_armor_is_written_on_request_and_detected_however_the_source_is_cut() -> None:
    armored = streamcrypt.encrypt_bytes(
        DATA, format="age", recipients=[IDENTITY.recipient], armor=True
    )
    assert armored.startswith(b"-----BEGIN AGE ENCRYPTED FILE-----")
    fmt = FORMATS["age"]
    assert fmt.identifies(b"\n  " + armored[:40]) and fmt.identifies(b"age-encryption.org/v1")
    assert not fmt.identifies(b"-----BEGIN PGP MESSAGE-----")
    assert streamcrypt.decrypt_bytes(b"\n" + armored, identities=[IDENTITY]) == DATA
    for source_format in ("age", None):
        back = streamcrypt.decrypt(
            chunks(b" " + armored, 3), format=source_format, identities=[IDENTITY]
        )
        assert await collect(back) == DATA


# ------------------------------------------------------------------ detection on reads

DETECTED = ["native", "envelope", "age", "age-armor", "age-passphrase", "rclone", "aws"]


@pytest.mark.parametrize("name", DETECTED)
async def test_reads_detect_the_format_from_the_first_bytes(name: str) -> None:
    fmt, write, read = CASES[name]
    sealed = streamcrypt.encrypt_bytes(DATA, format=fmt, **write)
    assert streamcrypt.decrypt_bytes(sealed, **read) == DATA
    assert await collect(streamcrypt.decrypt(chunks(sealed, 5), **read)) == DATA


@pytest.mark.parametrize("name", ["tink", "cobblestone", "ece", "secretstream"])
def test_a_format_with_no_marker_must_be_named(name: str) -> None:
    fmt, write, read = CASES[name]
    sealed = streamcrypt.encrypt_bytes(DATA, format=fmt, **write)
    with pytest.raises(FormatError, match=f"name it with format=.*{fmt}"):
        streamcrypt.decrypt_bytes(sealed, **read)


async def test_a_wrong_keyword_names_the_format_found_and_the_keywords_to_pass() -> None:
    aged = streamcrypt.encrypt_bytes(b"x", format="age", passphrase="p", work_factor=10)
    match = r"this is an age file.*does not take key=.*identities=, passphrase="
    with pytest.raises(InvalidParameterError, match=match):
        streamcrypt.decrypt_bytes(aged, KEY32)
    with pytest.raises(InvalidParameterError, match=match):
        await collect(streamcrypt.decrypt(aged, KEY32))
    native = streamcrypt.encrypt_bytes(b"x", KEY32)
    with pytest.raises(InvalidParameterError, match=r"native file.*passphrase="):
        streamcrypt.decrypt_bytes(native, passphrase="p")
    with pytest.raises(TruncatedStreamError, match="empty"):
        streamcrypt.decrypt_bytes(b"", KEY32)
    with pytest.raises(InvalidParameterError, match="no format told by its first bytes"):
        streamcrypt.decrypt(_never_read(), KEY32, segment_size=4096)  # at the call


def test_the_registry_names_each_descriptor_and_imports_only_what_is_looked_up() -> None:
    import subprocess
    import sys

    assert list(FORMATS) == [fmt.name for fmt in FORMATS.values()]
    code = (
        "import sys; from streamcrypt.codecs import FORMATS; FORMATS['age']; "
        "print(sorted(m for m in ('streamcrypt.codecs.age', 'streamcrypt.codecs.aws', "
        "'streamcrypt.codecs.tink') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['streamcrypt.codecs.age']"


@pytest.mark.parametrize("name", ["native", "age", "age-passphrase", "rclone", "aws"])
async def test_open_reads_detect_the_format_too(name: str, tmp_path: Any) -> None:
    """``streamcrypt.open(path, "rb", ...)`` without ``format=`` reads what the file's
    first bytes name, with the same keywords as ``decrypt``."""
    fmt, write, read = CASES[name]
    path = tmp_path / "f"
    path.write_bytes(streamcrypt.encrypt_bytes(DATA, format=fmt, **write))
    read = {k: v for k, v in read.items() if k != "max_work_factor"}  # not open's (yet)
    async with streamcrypt.open(path, "rb", **read) as f:
        assert await f.read() == DATA
    if name == "age":
        with pytest.raises(InvalidParameterError, match=r"this is an age file.*key="):
            async with streamcrypt.open(path, "rb", key=KEY32):
                pytest.fail("the body must not run")


def test_no_any_in_the_vocabulary_hints() -> None:
    """The top-level calls, ``streamcrypt.open`` and FormatOptions type every keyword
    (``key=`` is :data:`streamcrypt.codecs.KeyLike`), none as ``Any``."""
    import typing

    for fn in (*(getattr(streamcrypt, v) for v in (*WRITERS, *READERS)), streamcrypt.open):
        hints = typing.get_type_hints(fn)
        assert not [n for n, h in hints.items() if h is Any], fn.__name__
        assert "KeyLike" in str(inspect.signature(fn).parameters["key"].annotation)
    hints = typing.get_type_hints(FormatOptions)
    assert not [n for n, h in hints.items() if h is Any]
    assert type(None) in typing.get_args(hints["key"])
    assert RcloneKeys in typing.get_args(hints["key"])


class _Stream:
    """An async iterable of bytes with ``aclose``, as a socket stream is."""

    def __init__(self, data: bytes) -> None:
        self.pieces = [data[i : i + 7000] for i in range(0, len(data), 7000)]
        self.closed = False

    def __aiter__(self) -> _Stream:
        return self

    async def __anext__(self) -> bytes:
        if not self.pieces:
            raise StopAsyncIteration
        return self.pieces.pop(0)

    async def aclose(self) -> None:
        self.closed = True


async def test_a_detecting_read_leaves_a_stream_source_to_its_owner() -> None:
    sealed = streamcrypt.encrypt_bytes(DATA, KEY32)
    source = _Stream(sealed)
    assert await collect(streamcrypt.decrypt(source, KEY32)) == DATA
    assert not source.closed


@pytest.mark.parametrize("seekable", [True, False], ids=["seekable", "sequential"])
@pytest.mark.parametrize("name", ["native", "age", "aws"])
async def test_wrap_reads_detect_the_format_too(name: str, seekable: bool, tmp_path: Any) -> None:
    """``EncryptedFile.wrap(stream, "rb", ...)`` without ``format=`` reads what the
    stream's first bytes name, from a seekable file or a sequential stream alike."""
    import anyio

    from streamcrypt.transports import EncryptedFile

    fmt, write, read = CASES[name]
    path = tmp_path / "f"
    path.write_bytes(streamcrypt.encrypt_bytes(DATA, format=fmt, **write))
    opened = await anyio.open_file(path, "rb")
    stream: Any = opened if seekable else chunks(path.read_bytes(), 3)
    async with EncryptedFile.wrap(stream, "rb", **read) as f:
        assert await f.read() == DATA
    await opened.aclose()


@pytest.mark.parametrize("aad", [5, [1, 2], "ctx"], ids=["int", "list", "str"])
@pytest.mark.parametrize("case", ["native", "tink", "cobblestone", "envelope", "secretstream"])
def test_an_aad_that_is_not_bytes_is_a_typed_error_at_every_entry(case: str, aad: object) -> None:
    """aad= is checked once, where every format's options are (review F3: ``aad=5`` was
    sealed as five zero bytes, then raised a bare TypeError)."""
    fmt, writing, reading = CASES[case]
    sealed = streamcrypt.encrypt_bytes(DATA, format=fmt, **writing)
    with pytest.raises(InvalidParameterError, match="aad= must be bytes-like"):
        streamcrypt.encrypt_bytes(DATA, format=fmt, **{**writing, "aad": aad})
    with pytest.raises(InvalidParameterError, match="aad= must be bytes-like"):
        streamcrypt.decrypt_bytes(sealed, format=fmt, **{**reading, "aad": aad})
    with pytest.raises(InvalidParameterError, match="aad= must be bytes-like"):
        streamcrypt.encrypt(chunks(DATA), format=fmt, **{**writing, "aad": aad})


@pytest.mark.parametrize(
    "size", ["4096", 4096.0, [4096], True], ids=["str", "float", "list", "bool"]
)
@pytest.mark.parametrize(
    "name",
    [
        n
        for n, (fmt, _, _) in CASES.items()
        if "segment_size" in FORMATS[fmt].writes | FORMATS[fmt].reads
    ],
)
def test_a_segment_size_that_is_not_an_int_is_a_typed_error_at_every_entry(
    name: str, size: object
) -> None:
    """segment_size= is checked once, where every format's options are: the native
    one-shot compared the message with "4096" (a bare TypeError), packed 4096.0 into its
    header (struct.error); secretstream sealed with 4096.0 and True."""
    fmt, writing, reading = CASES[name]
    descriptor = FORMATS[fmt]
    calls = []
    if "segment_size" in descriptor.writes:
        calls += [
            lambda: streamcrypt.encrypt_bytes(
                DATA, format=fmt, **{**writing, "segment_size": size}
            ),
            lambda: streamcrypt.encrypt(
                chunks(DATA), format=fmt, **{**writing, "segment_size": size}
            ),
        ]
    if "segment_size" in descriptor.reads:
        sealed = streamcrypt.encrypt_bytes(DATA, format=fmt, **writing)
        calls.append(
            lambda: streamcrypt.decrypt_bytes(
                sealed, format=fmt, **{**reading, "segment_size": size}
            )
        )
    for call in calls:
        with pytest.raises(InvalidParameterError, match="segment_size= must be an int"):
            call()


@pytest.mark.parametrize("bad", [16, "sixteen bytes!!!", None], ids=["int", "str", "None"])
@pytest.mark.parametrize("name", list(CASES))
def test_data_that_is_not_bytes_like_is_a_typed_error_at_every_entry(
    name: str, bad: object
) -> None:
    """The plaintext or ciphertext of every one-shot call and every format's transforms
    goes through one conversion (abc.as_buffer): an ``int`` is never ``bytes(n)``, n zero
    bytes sealed, nor a ``str`` a bare TypeError. A format added to CASES is covered."""
    fmt, writing, reading = CASES[name]
    descriptor = FORMATS[fmt]
    sealed = streamcrypt.encrypt_bytes(b"some data", format=fmt, **writing)
    entries = {
        "encrypt_bytes": lambda: streamcrypt.encrypt_bytes(bad, format=fmt, **writing),
        "decrypt_bytes": lambda: streamcrypt.decrypt_bytes(bad, format=fmt, **reading),
        "decrypt_bytes, detected": lambda: streamcrypt.decrypt_bytes(bad, **reading),
        "encryptor.update": lambda: descriptor.encryptors(FormatOptions(**writing))[0].update(bad),
        "decryptor.update": lambda: descriptor.decryptors(FormatOptions(**reading), sealed)[
            -1
        ].update(bad),
    }
    for entry, call in entries.items():
        with pytest.raises(InvalidParameterError, match="must be bytes-like"):
            call()
            pytest.fail(f"{entry} took {bad!r}")
