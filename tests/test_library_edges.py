"""What a newcomer trips over first (issue 18): keys of the wrong type, a missing extra,
``from streamcrypt import *``, the ``mode`` of ``streamcrypt.open`` and the names in its
messages."""

from __future__ import annotations

import builtins
import subprocess
import sys
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import anyio
import pytest

import streamcrypt
from streamcrypt import keys, primitives
from streamcrypt.codecs import noise, secretstream
from streamcrypt.errors import InvalidKeySizeError, InvalidParameterError, UnsupportedFormatError
from streamcrypt.transports import EncryptedFile

# Every place a symmetric key enters, each called with the bad key.
KEY_ENTRIES: dict[str, Callable[[Any], object]] = {
    "encrypt_bytes": lambda k: streamcrypt.encrypt_bytes(b"x", k),
    "decrypt_bytes": lambda k: streamcrypt.decrypt_bytes(b"not even a container", k),
    "encrypt": lambda k: streamcrypt.encrypt(b"x", k),
    "decrypt": lambda k: streamcrypt.decrypt(b"x", k),
    "SecretKey": lambda k: streamcrypt.SecretKey(k),
    "as_secret_key": lambda k: keys.as_secret_key(k),
    "key_bytes": lambda k: keys.key_bytes(k),
    "hkdf": lambda k: keys.hkdf(k),
    "AesGcm": lambda k: primitives.AesGcm(k),
    "HmacTap": lambda k: primitives.HmacTap(k),
    "cobblestone": lambda k: streamcrypt.encrypt_bytes(b"x", k, format="cobblestone"),
    "secretstream": lambda k: secretstream.SecretStreamEncryptor(k),
    "noise psk": lambda k: noise.NoiseHandshake("Noise_NNpsk0_25519_AESGCM_SHA256", True, psks=[k]),
}


@pytest.mark.parametrize("entry", sorted(KEY_ENTRIES))
@pytest.mark.parametrize("bad", ["00" * 32, None, 12345], ids=["str", "None", "int"])
def test_a_key_of_the_wrong_type_says_what_a_key_must_be(entry: str, bad: object) -> None:
    with pytest.raises(InvalidParameterError) as info:
        KEY_ENTRIES[entry](bad)
    message = str(info.value)
    assert "must be bytes-like (bytes, bytearray, memoryview)" in message
    assert f"not {type(bad).__name__}" in message
    assert "00" * 8 not in message  # a str key may be a secret: never echoed
    if isinstance(bad, str):
        assert "bytes.fromhex" in message and "derive_key_from_password" in message
    if bad is None:
        assert "no key was given" in message


def test_the_native_format_names_a_key_ring_among_the_kinds_of_key() -> None:
    with pytest.raises(
        InvalidParameterError, match=r"a SecretKey, a Pkcs11Key or a KeyRing \(32 bytes\), not str"
    ):
        streamcrypt.encrypt_bytes(b"x", "secret")


def test_right_type_wrong_size_is_still_a_size_error() -> None:
    with pytest.raises(InvalidKeySizeError, match="must be 32 bytes, got 5"):
        streamcrypt.encrypt_bytes(b"x", b"short")
    with pytest.raises(InvalidKeySizeError, match="must be non-empty, got 0"):
        keys.as_secret_key(memoryview(b""), None)
    assert keys.as_secret_key(memoryview(bytes(32))) == streamcrypt.SecretKey(bytes(32))


@pytest.mark.anyio
async def test_a_str_key_to_streamcrypt_open_is_typed(tmp_path: Path) -> None:
    with pytest.raises(InvalidParameterError, match="not str: a str is not key material"):
        async with streamcrypt.open(tmp_path / "f.sc", "wb", key="password") as f:  # type: ignore[arg-type]
            await f.write(b"x")
    assert not [p async for p in anyio.Path(tmp_path).iterdir()]


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )


def test_a_missing_aiohttp_extra_names_the_extra_to_install() -> None:
    # sys.modules[name] = None makes "import aiohttp" fail as if it were not installed.
    out = _run(
        "import sys; sys.modules['aiohttp'] = None\n"
        "import streamcrypt.transports as t  # the package itself needs no extra\n"
        "try:\n"
        "    t.setup_encryption\n"
        "except ModuleNotFoundError as exc:\n"
        "    print(type(exc).__name__, exc.name, exc, sep='|')\n"
    )
    assert out.returncode == 0, out.stderr
    kind, name, message = out.stdout.strip().split("|")
    assert (kind, name) == ("ModuleNotFoundError", "aiohttp")
    assert "pip install 'streamcrypt[aiohttp]'" in message and "setup_encryption" in message


def test_the_asgi_middleware_needs_no_extra() -> None:
    out = _run(
        "import sys; sys.modules['starlette'] = None; sys.modules['aiohttp'] = None\n"
        "from streamcrypt.transports import EncryptionMiddleware\n"
        "import streamcrypt; print('ok')\n"
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_star_import_keeps_the_builtin_open() -> None:
    namespace: dict[str, Any] = {}
    exec("from streamcrypt import *", namespace)
    assert "open" not in namespace
    assert {"encrypt", "decrypt", "KeyRing", "SecretKey"} <= namespace.keys()
    assert streamcrypt.open is streamcrypt.transports.open_file
    assert builtins.open is open


def test_mode_is_typed_as_the_two_modes() -> None:
    rb_wb = Literal["rb", "wb"]
    assert typing.get_type_hints(streamcrypt.open)["mode"] == rb_wb
    assert typing.get_type_hints(EncryptedFile.wrap)["mode"] == rb_wb


def test_messages_name_streamcrypt_open(tmp_path: Path) -> None:
    with pytest.raises(UnsupportedFormatError, match=r"streamcrypt\.open speaks age, aws, native"):
        streamcrypt.open(tmp_path / "f", "rb", key=bytes(32), format="tink")
    with pytest.raises(InvalidParameterError, match="Use 'rb' or 'wb'"):
        streamcrypt.open(tmp_path / "f", "w", key=bytes(32))  # type: ignore[arg-type]


def test_help_and_key_files_do_not_point_into_the_source_tree(tmp_path: Path) -> None:
    """A wheel has no docs/ folder: what the installed command prints must not send the
    user there (the full check of an installed wheel is ``make dist``)."""
    out = _run("from streamcrypt.cli import main; main(['--help'])")
    text = " ".join(out.stdout.split())
    assert "docs/" not in text and "The streamcrypt command" in text, out.stderr
    key = tmp_path / "k.key"
    done = subprocess.run(
        [sys.executable, "-m", "streamcrypt", "keygen", "-o", str(key)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "docs/" not in key.read_text()


def test_the_lazy_aiohttp_names_are_listed_by_dir() -> None:
    assert {"setup_encryption", "EncryptedStreamResponse"} <= set(dir(streamcrypt.transports))


def test_a_missing_extra_is_named_with_what_needs_it() -> None:
    """The one loader of optional dependencies (Monocypher, pycryptodome, argon2-cffi,
    pyfastcdc) says what needs the module and which extra installs it."""
    from streamcrypt._lazy import import_extra

    assert import_extra("json", "JSON", "none").dumps(1) == "1"
    with pytest.raises(ImportError) as raised:
        import_extra("streamcrypt_no_such_module", "frobbing needs frob", "frob")
    assert str(raised.value) == "frobbing needs frob: pip install 'streamcrypt[frob]'"
