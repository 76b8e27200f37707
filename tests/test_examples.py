"""Every example in examples/ runs and does what its docstring says.

The backup tool is exercised in-process (its ``main`` and its async functions); the file
encryptor, the echo server and client run as real subprocesses; the HTTP apps are served
on 127.0.0.1 with an ephemeral port and get one encrypted request each.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import math
import os
import random
import select
import shutil
import signal
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import pytest

import streamcrypt
from streamcrypt.errors import (
    AuthenticationError,
    FormatError,
    HandshakeError,
    InvalidSignatureError,
    UnknownKeyError,
)
from streamcrypt.keys import KeyRing, SecretKey

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
MiB = 1 << 20


def load_example(name: str) -> ModuleType:
    """Import examples/<name>.py as a module (the examples are not a package)."""
    module_name = f"_example_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


# -- backup.py --------------------------------------------------------------------------------

backup_mod = load_example("backup")


def chunk_files(store: Path) -> set[str]:
    return {p.name for p in (store / "chunks").rglob("*") if p.is_file()}


def tree_listing(root: Path) -> dict[str, tuple[str, int, bytes | None]]:
    """Every entry under ``root``: kind, permission bits, and the bytes of files."""
    out: dict[str, tuple[str, int, bytes | None]] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        mode = stat.S_IMODE(path.stat().st_mode)
        out[rel] = ("file", mode, path.read_bytes()) if path.is_file() else ("dir", mode, None)
    return out


def make_tree(root: Path, rng: random.Random) -> None:
    """Nested dirs, an empty file, an empty dir, and MB-sized files sharing content."""
    base = rng.randbytes(3 * MiB)
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "readme.txt").write_text("streamcrypt backup example\n" * 50)
    (root / "empty.bin").write_bytes(b"")
    (root / "empty-dir").mkdir()
    (root / "data" / "nested" / "deep").mkdir(parents=True)
    (root / "data" / "base.bin").write_bytes(base)
    (root / "data" / "nested" / "deep" / "copy.bin").write_bytes(base)  # all chunks shared
    (root / "data" / "variant.bin").write_bytes(base[: 2 * MiB] + rng.randbytes(MiB))
    (root / "docs" / "script.sh").write_text("#!/bin/sh\necho hi\n")
    os.chmod(root / "docs" / "script.sh", 0o750)


def chunk_ids(keys: Any, data: bytes) -> list[str]:
    chunker = backup_mod.Chunker(keys.gear)
    pieces = chunker.update(data) + chunker.finalize()
    assert b"".join(pieces) == data
    return [backup_mod._keyed_blake3(keys.chunk_id, p).hex() for p in pieces]


@pytest.fixture(scope="module")
def backup_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One tree backed up twice (before and after a small change), shared by the tests."""
    root = tmp_path_factory.mktemp("backup")
    rng = random.Random(8)
    src, store, keyfile = root / "src", root / "store", root / "backup.key"
    make_tree(src, rng)
    assert backup_mod.main(["keygen", str(keyfile)]) == 0
    key = backup_mod.load_key(keyfile)
    first_listing = tree_listing(src)

    assert (
        backup_mod.main(["backup", str(src), str(store), "--key", str(keyfile), "--name", "one"])
        == 0
    )
    after_first = chunk_files(store)

    # Change three bytes in the middle of one file, add one new file.
    base = bytearray((src / "data" / "base.bin").read_bytes())
    base[1_500_000:1_500_003] = b"\xff\x00\xff"
    (src / "data" / "base.bin").write_bytes(base)
    (src / "docs" / "new.bin").write_bytes(rng.randbytes(200_000))
    report2 = anyio.run(lambda: backup_mod.backup(src, store, key, name="two"), backend="trio")
    return {
        "root": root,
        "src": src,
        "store": store,
        "key": key,
        "keyfile": keyfile,
        "first_listing": first_listing,
        "after_first": after_first,
        "report2": report2,
    }


def test_backup_chunker_bounds_and_shift_resistance() -> None:
    keys = backup_mod.BackupKeys.derive(SecretKey(bytes(range(32))))
    data = random.Random(1).randbytes(4 * MiB)
    chunker = backup_mod.Chunker(keys.gear)
    pieces: list[bytes] = []
    for off in range(0, len(data), 100_000):  # odd block size: boundaries must not move
        pieces += chunker.update(data[off : off + 100_000])
    pieces += chunker.finalize()
    assert b"".join(pieces) == data
    sizes = [len(p) for p in pieces]
    assert all(backup_mod.MIN_CHUNK <= s <= backup_mod.MAX_CHUNK for s in sizes[:-1])
    assert 40_000 < sum(sizes) / len(sizes) < 100_000  # about 64 KiB on average
    assert [len(p) for p in backup_mod.Chunker(keys.gear).update(data)] == sizes[:-1]
    # Insert 10 bytes near the front: all chunks but the first one or two are unchanged.
    before = chunk_ids(keys, data)
    after = chunk_ids(keys, data[:1000] + b"0123456789" + data[1000:])
    assert len(set(after) - set(before)) <= 2
    assert after[-10:] == before[-10:]
    # Another key gives other boundaries (the gear table is derived from the key).
    other = backup_mod.BackupKeys.derive(SecretKey(bytes(32)))
    assert [len(p) for p in backup_mod.Chunker(other.gear).update(data)][:5] != sizes[:5]


def test_backup_first_run_dedups_and_restores(backup_env: dict[str, Any], tmp_path: Path) -> None:
    store, key = backup_env["store"], backup_env["key"]
    keys = backup_mod.BackupKeys.derive(key)
    listing = backup_env["first_listing"]
    expected: set[str] = set()
    references = 0
    for entry in listing.values():
        if entry[0] == "file":
            ids = chunk_ids(keys, entry[2])
            references += len(ids)
            expected |= set(ids)
    # identical chunks are stored once: copy.bin and variant.bin's first 2 MiB add nothing
    assert backup_env["after_first"] == expected
    assert len(expected) < references - 40

    dest = tmp_path / "restored-one"
    report = anyio.run(backup_mod.restore, store, "one", dest, key)
    assert tree_listing(dest) == listing
    assert report.files == sum(1 for e in listing.values() if e[0] == "file")
    assert report.chunks_verified == references
    assert (dest / "empty.bin").read_bytes() == b""
    assert (dest / "empty-dir").is_dir()
    assert stat.S_IMODE((dest / "docs" / "script.sh").stat().st_mode) == 0o750


def test_backup_second_run_stores_only_new_chunks(
    backup_env: dict[str, Any], tmp_path: Path
) -> None:
    src, store, key = backup_env["src"], backup_env["store"], backup_env["key"]
    keys = backup_mod.BackupKeys.derive(key)
    report = backup_env["report2"]
    new_files = chunk_files(store) - backup_env["after_first"]

    # What the change implies: the edited chunk(s) of base.bin plus the new file's chunks.
    old_base = backup_env["first_listing"]["data/base.bin"][2]
    old_ids = chunk_ids(keys, old_base)
    new_ids = chunk_ids(keys, (src / "data" / "base.bin").read_bytes())
    edited = [i for i in new_ids if i not in set(old_ids)]
    assert 1 <= len(edited) <= 2  # the edit touched one chunk (two if it moved a boundary)
    assert new_ids[:5] == old_ids[:5] and new_ids[-5:] == old_ids[-5:]
    added = chunk_ids(keys, (src / "docs" / "new.bin").read_bytes())
    assert len(added) <= math.ceil(200_000 / backup_mod.MIN_CHUNK)

    assert len(new_files) == len(set(edited) | set(added))
    assert new_files == set(edited) | set(added)
    assert report.chunks_new == len(new_files)
    assert report.chunks_reused == report.chunks - report.chunks_new
    assert report.chunks_reused > 100

    dest = tmp_path / "restored-two"
    anyio.run(backup_mod.restore, store, "two", dest, key)
    assert tree_listing(dest) == tree_listing(src)
    assert backup_mod.list_snapshots(store) == ["one", "two"]


@pytest.fixture
def store_copy(backup_env: dict[str, Any], tmp_path: Path) -> Path:
    copy = tmp_path / "store"
    shutil.copytree(backup_env["store"], copy)
    return copy


def manifest_chunks(store: Path, key: SecretKey, path: str) -> list[str]:
    keys = backup_mod.BackupKeys.derive(key)
    manifest = backup_mod._load_manifest(store, "two", keys)
    return next(list(f.chunks) for f in manifest.files if f.path == path)


def assert_restore_fails(
    store: Path, key: SecretKey, tmp_path: Path, error: type[Exception]
) -> pytest.ExceptionInfo[Exception]:
    out = tmp_path / "out"
    out.mkdir()
    dest = out / "restored"
    with pytest.raises(error) as info:
        anyio.run(backup_mod.restore, store, "two", dest, key)
    assert list(out.iterdir()) == []  # no destination, no staging directory left
    return info


def flip_byte(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(data)


def test_backup_tampered_chunk_fails_and_writes_nothing(
    backup_env: dict[str, Any], store_copy: Path, tmp_path: Path
) -> None:
    key = backup_env["key"]
    # the last file restored, so earlier files were already written to the staging dir
    victim = manifest_chunks(store_copy, key, "docs/script.sh")[0]
    flip_byte(backup_mod.chunk_path(store_copy, victim), -5)
    assert_restore_fails(store_copy, key, tmp_path, AuthenticationError)


def test_backup_swapped_chunks_fail(
    backup_env: dict[str, Any], store_copy: Path, tmp_path: Path
) -> None:
    key = backup_env["key"]
    a, b = manifest_chunks(store_copy, key, "data/variant.bin")[-2:]
    shutil.copyfile(backup_mod.chunk_path(store_copy, a), backup_mod.chunk_path(store_copy, b))
    assert_restore_fails(store_copy, key, tmp_path, AuthenticationError)


def test_backup_missing_chunk_fails(
    backup_env: dict[str, Any], store_copy: Path, tmp_path: Path
) -> None:
    key = backup_env["key"]
    victim = manifest_chunks(store_copy, key, "docs/new.bin")[0]
    backup_mod.chunk_path(store_copy, victim).unlink()
    assert_restore_fails(store_copy, key, tmp_path, FormatError)


@pytest.mark.parametrize("offset", [10, 64 + 10, -3], ids=["signature", "header", "tail"])
def test_backup_tampered_manifest_fails(
    backup_env: dict[str, Any], store_copy: Path, tmp_path: Path, offset: int
) -> None:
    flip_byte(store_copy / "snapshots" / "two", offset)
    assert_restore_fails(store_copy, backup_env["key"], tmp_path, InvalidSignatureError)


def test_backup_renamed_snapshot_fails(
    backup_env: dict[str, Any], store_copy: Path, tmp_path: Path
) -> None:
    (store_copy / "snapshots" / "two").unlink()
    shutil.copyfile(store_copy / "snapshots" / "one", store_copy / "snapshots" / "two")
    assert_restore_fails(store_copy, backup_env["key"], tmp_path, InvalidSignatureError)


def test_backup_wrong_key_fails(
    backup_env: dict[str, Any], store_copy: Path, tmp_path: Path
) -> None:
    wrong = SecretKey.generate(32)
    assert_restore_fails(store_copy, wrong, tmp_path, InvalidSignatureError)
    with pytest.raises(UnknownKeyError):
        anyio.run(lambda: backup_mod.backup(backup_env["src"], store_copy, wrong, name="x"))
    assert not (store_copy / "snapshots" / "x").exists()


def test_backup_store_hides_names_and_content(backup_env: dict[str, Any]) -> None:
    store = backup_env["store"]
    readme = b"streamcrypt backup example"
    for path in store.rglob("*"):
        if path.is_file() and path.name != "store.json":
            blob = path.read_bytes()
            assert readme not in blob and b"readme.txt" not in blob and b"base.bin" not in blob
    public = backup_mod.BackupKeys.derive(backup_env["key"]).signing.public_key()
    backup_mod.verify_signature(store, "two", public)  # the public key alone suffices


def test_backup_cli_reports_typed_failure(
    backup_env: dict[str, Any], store_copy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    keyfile = str(backup_env["keyfile"])
    flip_byte(store_copy / "snapshots" / "two", -3)
    dest = tmp_path / "cli-out"
    assert backup_mod.main(["restore", str(store_copy), "latest", str(dest), "--key", keyfile]) == 1
    assert "InvalidSignatureError" in capsys.readouterr().err
    assert not dest.exists()
    assert backup_mod.main(["restore", str(store_copy), "one", str(dest), "--key", keyfile]) == 0
    assert "restored" in capsys.readouterr().out
    assert tree_listing(dest) == backup_env["first_listing"]


def test_backup_skips_links_and_its_own_store(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "a.txt").write_text("a")
    (src / "link").symlink_to(src / "sub" / "a.txt")
    (src / "dirlink").symlink_to(src / "sub")
    key = SecretKey.generate(32)
    report = anyio.run(backup_mod.backup, src, src / "store", key)  # the store inside src
    assert report.files == 1 and report.dirs == 1
    assert sorted(report.skipped) == ["dirlink", "link"]
    again = anyio.run(lambda: backup_mod.backup(src, src / "store", key, name="again"))
    assert again.files == 1 and again.chunks_new == 0 and again.chunks_reused == 1
    dest = tmp_path / "dest"
    anyio.run(backup_mod.restore, src / "store", "again", dest, key)
    assert tree_listing(dest) == {
        "sub": tree_listing(src)["sub"],
        "sub/a.txt": tree_listing(src)["sub/a.txt"],
    }
    with pytest.raises(FileExistsError):  # never restores over an existing directory
        anyio.run(backup_mod.restore, src / "store", "again", dest, key)


# -- encrypt_file.py ----------------------------------------------------------------------------

encrypt_mod = load_example("encrypt_file")


def run_example(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(EXAMPLES / args[0]), *args[1:]],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def write_hex_key(path: Path, key: SecretKey) -> Path:
    path.write_text(key.secret_bytes().hex() + "\n")
    return path


def test_encrypt_file_subprocess_round_trip(tmp_path: Path) -> None:
    key = SecretKey.generate(32)
    keyfile = write_hex_key(tmp_path / "file.key", key)
    data = random.Random(3).randbytes(6 * MiB + 12345)
    (tmp_path / "big.bin").write_bytes(data)
    done = run_example(
        "encrypt_file.py",
        "encrypt",
        str(tmp_path / "big.bin"),
        str(tmp_path / "big.sc"),
        "--key",
        str(keyfile),
    )
    assert done.returncode == 0, done.stderr
    assert "encrypting: 100.0%" in done.stderr  # the plain progress line (not a terminal)
    sealed = (tmp_path / "big.sc").read_bytes()
    assert data[:4096] not in sealed
    assert streamcrypt.decrypt_bytes(sealed, key) == data  # an independent decryption
    # no temporary left beside the output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.bin", "big.sc", "file.key"]

    # the example's own decryption, in-process
    assert (
        encrypt_mod.main(
            [
                "decrypt",
                str(tmp_path / "big.sc"),
                str(tmp_path / "back.bin"),
                "--key",
                str(keyfile),
                "--quiet",
            ]
        )
        == 0
    )
    assert (tmp_path / "back.bin").read_bytes() == data

    # a flipped byte: typed error, exit 1, and no plaintext file at all
    flip_byte(tmp_path / "big.sc", 3 * MiB)
    failed = run_example(
        "encrypt_file.py",
        "decrypt",
        str(tmp_path / "big.sc"),
        str(tmp_path / "out.bin"),
        "--key",
        str(keyfile),
    )
    assert failed.returncode == 1
    assert "AuthenticationError" in failed.stderr
    assert not (tmp_path / "out.bin").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


# -- echo_server.py / echo_client.py ------------------------------------------------------------

echo_server_mod = load_example("echo_server")
echo_client_mod = load_example("echo_client")


def read_line(proc: subprocess.Popen[str], timeout: float) -> str:
    """One line of the process's stdout, or fail after ``timeout`` seconds."""
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    assert ready, "the server printed nothing in time"
    return proc.stdout.readline()


@pytest.fixture
def echo_server_process(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    keyfile = write_hex_key(tmp_path / "echo.key", SecretKey.generate(32))
    proc = subprocess.Popen(
        [sys.executable, str(EXAMPLES / "echo_server.py"), "--psk", str(keyfile), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = read_line(proc, 15)
        assert line.startswith("listening on 127.0.0.1:"), line
        yield int(line.rsplit(":", 1)[1]), keyfile
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=15)
        assert proc.returncode == 0  # a clean shutdown on SIGTERM
        from streamcrypt.codecs.records import fastest_cipher

        # Both ends "auto": the client proposed the cipher faster on this machine.
        assert f"connection (Noise_NNpsk0_25519_{fastest_cipher()}_BLAKE2s)" in out
        assert "SIGTERM: shutting down" in out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def test_echo_server_and_client_as_two_processes(
    echo_server_process: tuple[int, Path], tmp_path: Path
) -> None:
    port, keyfile = echo_server_process
    messages = ["hello", "encrypted world", "x" * 100_000]
    done = run_example("echo_client.py", "--psk", str(keyfile), "--port", str(port), *messages)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == messages
    assert "Noise_NNpsk0" in done.stderr

    wrong = write_hex_key(tmp_path / "wrong.key", SecretKey.generate(32))
    refused = run_example("echo_client.py", "--psk", str(wrong), "--port", str(port), "hi")
    assert refused.returncode == 1
    assert "HandshakeError" in refused.stderr


@pytest.mark.anyio
async def test_echo_static_key_in_process(capsys: pytest.CaptureFixture[str]) -> None:
    from streamcrypt.codecs.noise import generate_keypair

    private, public = generate_keypair()
    with anyio.fail_after(15):
        async with anyio.create_task_group() as tg:
            port = await tg.start(
                functools.partial(echo_server_mod.run_server, "127.0.0.1", 0, static_key=private)
            )
            echoes = await echo_client_mod.run_client(
                "127.0.0.1", port, ["one", "two" * 1000], server_public_key=public
            )
            assert echoes == ["one", "two" * 1000]
            with pytest.raises(HandshakeError):  # a client pinning another server key
                await echo_client_mod.run_client(
                    "127.0.0.1", port, ["x"], server_public_key=generate_keypair()[1]
                )
            tg.cancel_scope.cancel()
    out = capsys.readouterr().out
    assert f"server public key: {public.hex()}" in out
    assert "Noise_NK_25519" in out


# -- asgi_app.py and aiohttp_app.py -------------------------------------------------------------

asgi_mod = load_example("asgi_app")
aiohttp_mod = load_example("aiohttp_app")


def http_keyfile(tmp_path: Path) -> Path:
    return write_hex_key(tmp_path / "http.key", SecretKey.generate(32))


@pytest.mark.asyncio
async def test_asgi_app_under_uvicorn(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import httpx
    import uvicorn

    keyfile = http_keyfile(tmp_path)
    keys = asgi_mod.http_keys(keyfile)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    config = uvicorn.Config(
        asgi_mod.create_app(keys), log_level="critical", lifespan="off", access_log=False
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        async with asyncio.timeout(20):
            while not server.started:
                assert not task.done(), "uvicorn did not start"
                await asyncio.sleep(0.01)
            payload = random.Random(5).randbytes(100_000)
            assert await asgi_mod.request(url + "/echo", keys, payload) == (200, payload)
            async with httpx.AsyncClient() as client:  # on the wire it is ciphertext
                raw = await client.get(url + "/hello")
            assert raw.headers["content-encoding"] == "aes128gcm"
            assert b"hello" not in raw.content
            assert await asgi_mod.request(url + "/hello", keys) == (
                200,
                b"hello, encrypted world\n",
            )
            status, body = await asgi_mod.request(url + "/count?n=2000", keys)
            assert status == 200 and body.splitlines()[-1] == b"line 1999"
            assert await asgi_mod.request(url + "/health", keys) == (200, b"ok\n")
            wrong = KeyRing([SecretKey.generate(16, key_id=asgi_mod.KEY_ID)])
            with pytest.raises(AuthenticationError):
                await asgi_mod.request(url + "/hello", wrong)
            status, _ = await asgi_mod.request(url + "/echo", wrong, b"forged")
            assert status == 400
            argv = ["request", url + "/echo", "--key", str(keyfile), "--data", "from main"]
            assert await anyio.to_thread.run_sync(asgi_mod.main, argv) == 0
            assert "200: from main" in capsys.readouterr().out
    finally:
        server.should_exit = True
        await task
        sock.close()


@pytest.mark.asyncio
async def test_aiohttp_app_on_loopback(tmp_path: Path) -> None:
    from aiohttp.test_utils import TestServer

    keys = aiohttp_mod.http_keys(http_keyfile(tmp_path))
    async with asyncio.timeout(20), TestServer(aiohttp_mod.create_app(keys)) as server:
        url = str(server.make_url(""))
        payload = random.Random(6).randbytes(100_000)
        assert await aiohttp_mod.request(url + "/echo", keys, payload) == (200, payload)
        assert await aiohttp_mod.request(url + "/hello", keys) == (200, b"hello, encrypted world\n")
        status, body = await aiohttp_mod.request(url + "/count?n=2000", keys)
        assert status == 200 and body.splitlines()[-1] == b"line 1999"
        assert await aiohttp_mod.request(url + "/health", keys) == (200, b"ok\n")
        # the two apps speak the same coding: the ASGI example's client works here too
        assert await asgi_mod.request(url + "/echo", keys, b"cross") == (200, b"cross")
        wrong = KeyRing([SecretKey.generate(16, key_id=aiohttp_mod.KEY_ID)])
        with pytest.raises(AuthenticationError):
            await aiohttp_mod.request(url + "/hello", wrong)
        status, _ = await aiohttp_mod.request(url + "/echo", wrong, b"forged")
        assert status == 400
