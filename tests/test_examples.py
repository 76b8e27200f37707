"""Every example in examples/ runs and does what its docstring says.

The file encryptor, the echo server and client run as real subprocesses; the HTTP apps
are served on 127.0.0.1 with an ephemeral port and get one encrypted request each (the
backup command, once examples/backup.py, is tested in test_backup_cli.py).
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import os
import random
import re
import select
import signal
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import anyio
import pytest
from support import write_secret

import streamcrypt
from streamcrypt.errors import (
    AuthenticationError,
    HandshakeError,
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


def flip_byte(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    os.chmod(path, 0o600)
    path.write_bytes(data)


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


def write_key(path: Path, key: SecretKey) -> Path:
    """A key file in the one documented format (docs/CLI.md)."""
    key.to_file(path)
    return path


def write_hex_key(path: Path, key: SecretKey) -> Path:
    """A key file in the older form the examples used to write: 64 hex digits."""
    return write_secret(path, key.secret_bytes().hex() + "\n")


def streamcrypt_cli(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "streamcrypt", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=30,
        check=False,
        env={**os.environ, "PYTHONPATH": str(EXAMPLES.parent)},
    )


def test_examples_and_cli_share_one_key_file_format(tmp_path: Path) -> None:
    """A key from the example's keygen works in the command and the reverse; both also
    read the older 64-hex-digit files (issue 18)."""
    (tmp_path / "a.txt").write_bytes(b"one key file format\n" * 1000)
    assert encrypt_mod.main(["keygen", str(tmp_path / "ex.key")]) == 0
    written = (tmp_path / "ex.key").read_text()
    assert "streamcrypt-key: 1" in written and "type: symmetric" in written
    assert stat.S_IMODE((tmp_path / "ex.key").stat().st_mode) == 0o600
    assert encrypt_mod.main(["keygen", str(tmp_path / "ex.key")]) == 1  # never overwrites
    assert streamcrypt_cli("keygen", "-o", "cli.key", cwd=tmp_path).returncode == 0
    write_hex_key(tmp_path / "old.key", SecretKey.generate(32))
    for keyfile in ("ex.key", "cli.key", "old.key"):
        # example encrypts, the command decrypts
        assert (
            encrypt_mod.main(
                [
                    "encrypt",
                    str(tmp_path / "a.txt"),
                    str(tmp_path / "a.sc"),
                    "--key",
                    str(tmp_path / keyfile),
                    "--quiet",
                ]
            )
            == 0
        )
        done = streamcrypt_cli("decrypt", "-k", keyfile, "-o", "b.txt", "a.sc", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert (tmp_path / "b.txt").read_bytes() == (tmp_path / "a.txt").read_bytes()
        # the command encrypts, the example decrypts
        done = streamcrypt_cli("encrypt", "-k", keyfile, "-o", "c.sc", "a.txt", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert (
            encrypt_mod.main(
                [
                    "decrypt",
                    str(tmp_path / "c.sc"),
                    str(tmp_path / "c.txt"),
                    "--key",
                    str(tmp_path / keyfile),
                    "--quiet",
                ]
            )
            == 0
        )
        assert (tmp_path / "c.txt").read_bytes() == (tmp_path / "a.txt").read_bytes()
        for name in ("a.sc", "b.txt", "c.sc", "c.txt"):
            (tmp_path / name).unlink()


def test_encrypt_file_subprocess_round_trip(tmp_path: Path) -> None:
    key = SecretKey.generate(32)
    keyfile = write_key(tmp_path / "file.key", key)
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
def echo_server_process(tmp_path: Path) -> Iterator[tuple[int, Path, list[str]]]:
    """The echo server in its own process: ``(port, psk file, suites)``; a test appends
    each suite its clients reported to ``suites``, which the server's log must name."""
    suites: list[str] = []
    keyfile = write_key(tmp_path / "echo.key", SecretKey.generate(32))
    proc = subprocess.Popen(
        [sys.executable, str(EXAMPLES / "echo_server.py"), "--psk", str(keyfile), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = read_line(proc, 15)
        assert line.startswith("listening on 127.0.0.1:"), line
        yield int(line.rsplit(":", 1)[1]), keyfile, suites
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=15)
        assert proc.returncode == 0  # a clean shutdown on SIGTERM
        # Both ends "auto": the server ran the suite the client proposed (the client
        # measured its own machine, so the test does not predict which cipher won).
        assert suites
        for suite in suites:
            assert f"connection ({suite})" in out
        assert "SIGTERM: shutting down" in out
        # The client's send_eof() reached the handler as the authenticated end (an abort
        # would have raised in its loop, before this line).
        assert "connection closed after 100020 bytes" in out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def test_echo_server_and_client_as_two_processes(
    echo_server_process: tuple[int, Path, list[str]], tmp_path: Path
) -> None:
    port, keyfile, suites = echo_server_process
    messages = ["hello", "encrypted world", "x" * 100_000]
    done = run_example("echo_client.py", "--psk", str(keyfile), "--port", str(port), *messages)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == messages
    # Both ends "auto": the client proposes the cipher it measured faster on this machine.
    suite = re.search(r"\((Noise_NNpsk0_25519_(?:AESGCM|ChaChaPoly)_BLAKE2s)\)", done.stderr)
    assert suite, done.stderr
    suites.append(suite[1])

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
    return write_key(tmp_path / "http.key", SecretKey.generate(32))


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
