"""Secrets as they come in from outside: text from the environment or a command line,
files others may read, cached key rings, and the caps on a KDF a file may ask for.

Each class of finding of the third outside review (docs/security-notes.md) has its one
deciding place, and each test here asserts that place's rule for every entry point that
reaches it, so the next entry point is caught too.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import pickle
import pkgutil
import re
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest

import streamcrypt
from streamcrypt.cluster import EnvKey, FileKey, KeyRingFile
from streamcrypt.codecs import age
from streamcrypt.codecs.rclone import RcloneKeys, obscure
from streamcrypt.errors import (
    AuthenticationError,
    InsecureKeyFileWarning,
    InvalidKeySizeError,
    InvalidParameterError,
    LimitExceededError,
)
from streamcrypt.keys import (
    MAX_SCRYPT_READ_PARAMS,
    Argon2Params,
    KeyRing,
    SecretKey,
    derive_key_from_password,
    keyfile,
)

CHEAP = Argon2Params(1, 8 * 1024)
#: What Python makes of a Latin-1 "ö" in a UTF-8 environment or argv: a lone surrogate.
SURROGATE_SECRET = os.fsdecode(b"Tr\xf6ub4dor&3-secret")
KEY_TEXT = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"


def _ring_file(tmp_path: Path, password: str, ring: KeyRing | None = None) -> Path:
    path = tmp_path / "ring.json"
    ring = ring or KeyRing([SecretKey.generate(key_id="k1")])
    path.write_text(ring.to_json(password, params=CHEAP))
    return path


def _surrogate_entry_points(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> dict[str, Callable[[], object]]:
    ring = _ring_file(tmp_path, "x")
    monkeypatch.setenv("SC_TEST_RING_PW", SURROGATE_SECRET)
    monkeypatch.setenv("SC_TEST_KEY", os.fsdecode(KEY_TEXT.encode() + b"\xa0"))
    return {
        "derive_key_from_password": lambda: derive_key_from_password(
            SURROGATE_SECRET, bytes(16), params=CHEAP
        ),
        "encrypt_bytes envelope passphrase": lambda: streamcrypt.encrypt_bytes(
            b"x", passphrase=SURROGATE_SECRET, format="envelope"
        ),
        "encrypt_bytes age passphrase": lambda: streamcrypt.encrypt_bytes(
            b"x", passphrase=SURROGATE_SECRET, format="age"
        ),
        "KeyRing.to_json": lambda: KeyRing([SecretKey.generate(key_id="k")]).to_json(
            SURROGATE_SECRET, params=CHEAP
        ),
        "KeyRingFile password_env": lambda: KeyRingFile(
            str(ring), password_env="SC_TEST_RING_PW"
        ).resolve(),
        "EnvKey": lambda: EnvKey("SC_TEST_KEY").resolve(),
        "RcloneKeys.from_password": lambda: RcloneKeys.from_password(SURROGATE_SECRET),
        "RcloneKeys password2": lambda: RcloneKeys.from_password("pw", SURROGATE_SECRET),
        "rclone obscure": lambda: obscure(SURROGATE_SECRET),
    }


def _secret_in(exc: BaseException) -> bool:
    """Whether the secret (or the key text) shows anywhere an error reporter looks: the
    message, repr, args, pickle, and the chained exceptions."""
    seen: BaseException | None = exc
    while seen is not None:
        texts = [str(seen), repr(seen), *(repr(a) for a in seen.args)]
        blob = pickle.dumps(seen) if not isinstance(seen, UnicodeError) else repr(seen).encode()
        if any(SURROGATE_SECRET in t or KEY_TEXT in t for t in texts) or KEY_TEXT.encode() in blob:
            return True
        seen = seen.__cause__ or seen.__context__
    return False


_SURROGATE_CASES = [
    "derive_key_from_password",
    "encrypt_bytes envelope passphrase",
    "encrypt_bytes age passphrase",
    "KeyRing.to_json",
    "KeyRingFile password_env",
    "EnvKey",
    "RcloneKeys.from_password",
    "RcloneKeys password2",
    "rclone obscure",
]


@pytest.mark.parametrize("name", _SURROGATE_CASES)
def test_secret_text_that_is_not_valid_is_a_typed_error_without_the_secret(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A secret ``str`` with a lone surrogate used to raise a bare UnicodeEncodeError that
    carried the whole secret in its arguments (and, for EnvKey, into a Dask worker's log)."""
    cases = _surrogate_entry_points(tmp_path, monkeypatch)
    assert sorted(cases) == sorted(_SURROGATE_CASES)
    call = cases[name]
    with pytest.raises(InvalidParameterError) as info:
        call()
    assert "not valid text" in str(info.value)
    assert not _secret_in(info.value)
    assert info.value.__context__ is None


def test_no_secret_str_is_encoded_outside_the_one_encoder() -> None:
    """``<secret>.encode(...)`` appears nowhere in the package but in secret_text_bytes:
    a new entry point that encodes a password itself would bring the bare error back."""
    name = re.compile(r"(password|passphrase|secret|phrase|token|psk)", re.I)
    found = []
    for path in Path(streamcrypt.__file__).parent.rglob("*.py"):
        text = path.read_text()
        if "def secret_text_bytes" in text:
            continue
        for no, line in enumerate(text.splitlines(), 1):
            calls = re.findall(r"([A-Za-z_][A-Za-z_0-9.]*)\.encode\(", line)
            found.extend(f"{path.name}:{no}: {line.strip()}" for c in calls if name.search(c))
    assert found == []


# ------------------------------------------------------------------------------ reprs

_SECRET_FIELD = re.compile(
    r"^(passphrase|password2?|secret|psk|private|raw_key|static_key|key|data_key|name_key)$"
)


def _generated_repr(cls: type) -> bool:
    fn = vars(cls).get("__repr__")
    inner = getattr(fn, "__wrapped__", fn)
    return getattr(getattr(inner, "__code__", None), "co_filename", "") == "<string>"


def test_no_dataclass_shows_a_secret_field_in_its_generated_repr() -> None:
    """Every dataclass of the package, private ones included: a field named like a secret
    and typed as text or bytes is ``repr=False`` unless the class writes its own repr
    (the command's key holder showed the passphrase)."""
    shown = []
    for info in pkgutil.walk_packages(streamcrypt.__path__, "streamcrypt."):
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an extra that is not installed: nothing of it runs
            continue
        for obj in vars(module).values():
            if not (isinstance(obj, type) and dataclasses.is_dataclass(obj)):
                continue
            if obj.__module__ != module.__name__ or not _generated_repr(obj):
                continue
            for field in dataclasses.fields(obj):
                kind = str(field.type)
                textual = any(t in kind for t in ("str", "bytes", "Buffer", "KeyFile"))
                if _SECRET_FIELD.match(field.name) and textual and field.repr:
                    shown.append(f"{obj.__module__}.{obj.__qualname__}.{field.name}")
    assert shown == []


# -------------------------------------------------------------------------- key files


def _exposed_key_file(tmp_path: Path, mode: int) -> Path:
    path = tmp_path / "k.key"
    SecretKey.generate(key_id="k1").to_file(path)
    os.chmod(path, mode)
    return path


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o606])
def test_a_secret_file_others_may_read_or_write_is_read_with_a_warning(
    tmp_path: Path, mode: int
) -> None:
    """Every reader of secret files goes through keyfile.read_secret_file: the library's
    key file reader, the cluster's providers."""
    path = _exposed_key_file(tmp_path, mode)
    readers: dict[str, Callable[[], object]] = {
        "SecretKey.from_file": lambda: SecretKey.from_file(path),
        "FileKey": lambda: FileKey(str(path)).resolve(),
        "read_secret_file": lambda: keyfile.read_secret_file(path, 1 << 10),
    }
    for name, read in readers.items():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            read()
        kinds = [w.category for w in caught]
        assert kinds == [InsecureKeyFileWarning], name
        assert f"{mode:04o}" in str(caught[0].message)
        assert "chmod 600" in str(caught[0].message)


def test_a_private_secret_file_is_read_without_a_warning(tmp_path: Path) -> None:
    path = _exposed_key_file(tmp_path, 0o600)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert SecretKey.from_file(path).key_id == "k1"
        assert FileKey(str(path)).resolve().key_id == "k1"


def test_the_command_warns_in_one_line_for_key_and_passphrase_files(tmp_path: Path) -> None:
    key = _exposed_key_file(tmp_path, 0o644)
    phrase = tmp_path / "pw.txt"
    phrase.write_text("hunter2 hunter2\n")
    os.chmod(phrase, 0o644)
    env = {**os.environ, "PYTHONWARNINGS": ""}
    for args in (
        ["encrypt", "-k", str(key), "-o", str(tmp_path / "a.sc")],
        ["encrypt", "--format", "age", "--passphrase-file", str(phrase), "-o", str(tmp_path / "b")],
    ):
        run = subprocess.run(
            [sys.executable, "-m", "streamcrypt", *args],
            input=b"data",
            capture_output=True,
            env=env,
            timeout=60,
        )
        assert run.returncode == 0, run.stderr
        lines = run.stderr.decode().splitlines()
        assert len(lines) == 1 and lines[0].startswith("streamcrypt: warning: "), lines
        assert "0644" in lines[0] and "hunter2" not in lines[0]


# ----------------------------------------------------------------- cluster providers


@pytest.mark.parametrize(
    "value", ["Summer2026!Summer2026!Summer2026", "00112233445566778899aabbccddeeff"]
)
def test_a_32_character_text_is_never_taken_as_a_raw_key(
    value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A typed password of 32 characters, or a 16-byte key in hex, used to become the key
    itself. The environment holds text only; a file holds raw bytes only when they are not
    all printable."""
    assert len(value) == 32
    monkeypatch.setenv("SC_TEST_TEXT_KEY", value)
    with pytest.raises(InvalidKeySizeError):
        EnvKey("SC_TEST_TEXT_KEY").resolve()
    path = tmp_path / "text.key"
    path.write_text(value)
    os.chmod(path, 0o600)
    with pytest.raises(InvalidKeySizeError):
        FileKey(str(path)).resolve()
    raw = bytes(range(200, 232))
    path.write_bytes(raw)
    assert FileKey(str(path)).resolve().secret_bytes() == raw


def test_a_cached_key_ring_is_not_given_for_another_password(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ring = KeyRing([SecretKey.generate(key_id="old"), SecretKey.generate(key_id="new")])
    path = _ring_file(tmp_path, "right", ring)
    os.chmod(path, 0o600)
    provider = KeyRingFile(str(path), password_env="SC_TEST_RING_PW2")
    monkeypatch.setenv("SC_TEST_RING_PW2", "right")
    assert provider.resolve().ids() == ["old", "new"]
    monkeypatch.setenv("SC_TEST_RING_PW2", "wrong")
    with pytest.raises(AuthenticationError):
        provider.resolve()
    # A rotated file replaces the ring this process keeps for it.
    monkeypatch.setenv("SC_TEST_RING_PW2", "right")
    ring.activate("new")
    ring.remove("old")
    time.sleep(0.01)
    path.write_text(ring.to_json("right", params=CHEAP))
    assert provider.resolve().ids() == ["new"]
    from streamcrypt.cluster import _keys

    held = [r.ids() for key, (_, r) in _keys._RINGS.items() if key == str(path)]
    assert held == [["new"]]


# --------------------------------------------------------------------------- KDF caps


def test_the_age_reader_caps_scrypt_at_the_library_cap() -> None:
    """One cap for password KDFs read from outside: age's default work factor cap is the
    library's scrypt cap (it was 4x it: 4 GiB per attempt)."""
    assert MAX_SCRYPT_READ_PARAMS.n == 1 << age.DEFAULT_MAX_WORK_FACTOR
    assert MAX_SCRYPT_READ_PARAMS.r == 8 and MAX_SCRYPT_READ_PARAMS.p == 1


def test_a_hostile_age_work_factor_is_refused_before_any_kdf_work(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from streamcrypt.codecs.age import _scrypt

    def no_kdf(*args: object) -> bytes:
        raise AssertionError("the KDF ran")

    monkeypatch.setattr(_scrypt, "_scrypt", no_kdf)
    header = (
        b"age-encryption.org/v1\n-> scrypt AAAAAAAAAAAAAAAAAAAAAA 21\n"
        + b"A" * 43
        + b"\n--- "
        + b"A" * 43
        + b"\n"
    )
    with pytest.raises(LimitExceededError):
        streamcrypt.decrypt_bytes(header + bytes(32), format="age", passphrase="pw")


def test_the_store_servers_token_files_are_read_as_secret_files(tmp_path: Path) -> None:
    """``backup serve --token-file``: a token is a secret file like any other."""
    from streamcrypt.cli import _backup

    token = tmp_path / "token"
    token.write_text("writer-token\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert _backup._token(str(token)) == "writer-token"
    assert [w.category for w in caught] == [InsecureKeyFileWarning]
