"""The one symmetric key-file format (docs/CLI.md, "Key files"): SecretKey.from_file and
SecretKey.to_file, the older 64-hex-digit form, and what a bad file says."""

from __future__ import annotations

import base64
import stat
from pathlib import Path

import pytest
from support import write_secret

import streamcrypt
from streamcrypt.cli import _options as cli_options
from streamcrypt.cluster import FileKey
from streamcrypt.errors import InvalidKeySizeError, InvalidParameterError
from streamcrypt.keys import KeyRing, SecretKey
from streamcrypt.keys.keyfile import KEY_SIZES
from streamcrypt.transports import EncryptionMiddleware


@pytest.mark.parametrize("size", KEY_SIZES)
def test_round_trip_mode_and_no_overwrite(tmp_path: Path, size: int) -> None:
    key = SecretKey.generate(size, key_id="backup-2025")
    path = tmp_path / "k.key"
    key.to_file(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    text = path.read_text()
    assert "streamcrypt-key: 1\ntype: symmetric\nid: backup-2025\nkey: " in text
    assert key.secret_bytes().hex() not in text
    assert SecretKey.from_file(path) == key
    assert SecretKey.from_file(str(path)) == key
    with pytest.raises(FileExistsError):
        SecretKey.generate(32).to_file(path)
    assert SecretKey.from_file(path) == key


def test_reads_the_older_hex_form(tmp_path: Path) -> None:
    raw = bytes(range(32))
    path = tmp_path / "old.key"
    write_secret(path, "# a comment\n" + raw.hex()[:32] + "\n  " + raw.hex()[32:].upper() + "\n")
    assert SecretKey.from_file(path) == SecretKey(raw)


def test_field_names_case_and_missing_id(tmp_path: Path) -> None:
    raw = b"k" * 32
    path = tmp_path / "k.key"
    write_secret(path, f"Streamcrypt-Key: 1\nTYPE: symmetric\nKey: {base64.b64encode(raw).decode()}\n")
    assert SecretKey.from_file(path) == SecretKey(raw)


@pytest.mark.parametrize(
    ("text", "error", "says"),
    [
        ("", InvalidParameterError, "holds no key"),
        ("00" * 31, InvalidParameterError, "64 hex digits"),
        ("AGE-SECRET-KEY-1QQQQ", InvalidParameterError, "streamcrypt keygen"),
        ("streamcrypt-key: 2\ntype: symmetric\nkey: AA==", InvalidParameterError, "version 1"),
        (
            "streamcrypt-key: 1\ntype: ed25519\nkey: " + "A" * 43 + "=",
            InvalidParameterError,
            "not a symmetric key",
        ),
        ("streamcrypt-key: 1\ntype: symmetric", InvalidParameterError, "no 'key:' line"),
        ("streamcrypt-key: 1\nkey: a\nkey: b", InvalidParameterError, "appears twice"),
        ("streamcrypt-key: 1\ntype: symmetric\nkey: @@", InvalidParameterError, "base64"),
        (
            "streamcrypt-key: 1\ntype: symmetric\nkey: " + base64.b64encode(b"s" * 24).decode(),
            InvalidKeySizeError,
            "16 or 32 bytes, got 24",
        ),
    ],
)
def test_bad_files_name_the_file_and_the_problem(
    tmp_path: Path, text: str, error: type[Exception], says: str
) -> None:
    path = tmp_path / "bad.key"
    write_secret(path, text)
    with pytest.raises(error, match=says) as info:
        SecretKey.from_file(path)
    assert str(path) in str(info.value)


def test_binary_and_missing_files(tmp_path: Path) -> None:
    write_secret(tmp_path / "bin.key", b"\xff\xfe" * 40)
    with pytest.raises(InvalidParameterError, match="not a text key file"):
        SecretKey.from_file(tmp_path / "bin.key")
    with pytest.raises(FileNotFoundError):
        SecretKey.from_file(tmp_path / "absent.key")


@pytest.mark.parametrize("size", [1, 15, 24, 33, 64])
def test_only_16_and_32_byte_keys_are_written(tmp_path: Path, size: int) -> None:
    with pytest.raises(InvalidKeySizeError, match=f"a 16 or 32-byte key, got {size}$"):
        SecretKey.generate(size).to_file(tmp_path / "odd.key")
    assert not (tmp_path / "odd.key").exists()


def test_a_16_byte_key_file_serves_rfc8188_http_bodies(tmp_path: Path) -> None:
    """The one key story: a 16-byte key file is RFC 8188's input keying material, read by
    the middleware's KeyRing; the command's --size choices are the file format's sizes."""
    SecretKey.generate(16, key_id="http-2026").to_file(tmp_path / "http.key")
    key = SecretKey.from_file(tmp_path / "http.key")
    ring = KeyRing([key])
    EncryptionMiddleware(lambda *a: None, key=ring)  # type: ignore[arg-type]
    body = streamcrypt.encrypt_bytes(b"a body", key, keyid=key.key_id, format="ece")
    assert streamcrypt.decrypt_bytes(body, ring, format="ece") == b"a body"
    assert cli_options.KEY_SIZES == KEY_SIZES


def test_cluster_file_key_reads_the_format(tmp_path: Path) -> None:
    key = SecretKey.generate(32, key_id="from-file")
    key.to_file(tmp_path / "k.key")
    assert FileKey(str(tmp_path / "k.key")).resolve() == key
    renamed = FileKey(str(tmp_path / "k.key"), key_id="given").resolve()
    assert isinstance(renamed, SecretKey) and renamed.key_id == "given"
    assert renamed.secret_bytes() == key.secret_bytes()
