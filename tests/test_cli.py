"""The ``streamcrypt`` command, run for real in a subprocess (``python -m streamcrypt``).

Each call is bounded by a timeout; inputs are small. Failure cases check the exit code
(docs/CLI.md), the one-line message, that no traceback and no key bytes are printed,
and that no output file (nor a temporary) is left behind.
"""

from __future__ import annotations

import argparse
import base64
import functools
import hashlib
import hmac
import io
import os
import random
import select
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import blake3
import pyrage
import pytest
from support import REPO, write_secret

import streamcrypt
from streamcrypt.keys import SecretKey

TIMEOUT = 30
DATA = os.urandom(300_000) + b"tail"


def sc(
    *args: str | Path,
    cwd: Path,
    stdin: bytes | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """Run ``python -m streamcrypt ARGS``; check the stderr conventions on the way."""
    proc = subprocess.run(
        [sys.executable, "-m", "streamcrypt", *map(str, args)],
        input=stdin if stdin is not None else b"",
        capture_output=True,
        cwd=cwd,
        timeout=TIMEOUT,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
    )
    err = proc.stderr.decode()
    assert "Traceback" not in err, err
    if proc.returncode not in (0, 130):
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("streamcrypt: error: "), err
    return proc


def leftovers(directory: Path) -> list[str]:
    return [p.name for p in directory.iterdir() if p.name.endswith(".tmp")]


def key_line(path: Path) -> str:
    return next(
        line.split(":", 1)[1].strip()
        for line in path.read_text().splitlines()
        if line.startswith("key:")
    )


# Keys made once per module by the real command (keygen has its own tests below): name ->
# (type, public half printed). Each test gets copies in its own directory.
KEYS = {
    "k.key": "symmetric",
    "other.key": "symmetric",
    "id.x": "x25519",
    "other.x": "x25519",
    "id.age": "age",
    "other.age": "age",
    "sign.key": "ed25519",
    "other-sign.key": "ed25519",
}


@pytest.fixture(scope="module")
def made_keys(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    where = tmp_path_factory.mktemp("keys")
    publics: dict[str, str] = {}
    for name, kind in KEYS.items():
        proc = sc("keygen", "--type", kind, "-o", name, cwd=where)
        assert proc.returncode == 0
        publics[name] = proc.stdout.decode().strip()
    return where, publics


@pytest.fixture
def work(tmp_path: Path, made_keys: tuple[Path, dict[str, str]]) -> Path:
    (tmp_path / "in.bin").write_bytes(DATA)
    for name in KEYS:
        shutil.copy2(made_keys[0] / name, tmp_path / name)
    return tmp_path


@pytest.fixture
def public(made_keys: tuple[Path, dict[str, str]]) -> dict[str, str]:
    """The public half keygen printed for each key file."""
    return made_keys[1]


@pytest.fixture
def key(work: Path) -> Path:
    return work / "k.key"


# ------------------------------------------------------------------------------- keygen


def test_keygen_symmetric_file_mode_and_no_overwrite(work: Path, key: Path) -> None:
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    text = key.read_text()
    assert "type: symmetric" in text and "streamcrypt-key: 1" in text
    assert len(base64.b64decode(key_line(key))) == 32
    before = key.read_bytes()
    again = sc("keygen", "-o", key, cwd=work)
    assert again.returncode == 2 and b"--force" in again.stderr
    assert key.read_bytes() == before
    forced = sc("keygen", "-o", key, "--force", "--key-id", "backup-2025", cwd=work)
    assert forced.returncode == 0 and forced.stdout == b""
    assert key.read_bytes() != before and "id: backup-2025" in key.read_text()
    assert stat.S_IMODE(key.stat().st_mode) == 0o600


def test_keygen_size_16_makes_an_http_body_key(work: Path) -> None:
    made = sc("keygen", "--size", "16", "--key-id", "http", "-o", "http.key", cwd=work)
    assert made.returncode == 0, made.stderr
    assert len(base64.b64decode(key_line(work / "http.key"))) == 16
    key = SecretKey.from_file(work / "http.key")  # as the HTTP middleware's KeyRing takes it
    assert len(key) == 16 and key.key_id == "http"
    for bad in (["--size", "24"], ["--type", "age", "--size", "16"]):
        refused = sc("keygen", *bad, "-o", "bad.key", cwd=work)
        assert refused.returncode == 2 and not (work / "bad.key").exists()
    assert b"symmetric keys only" in refused.stderr


@pytest.mark.parametrize(
    ("kind", "prefix"), [("ed25519", ""), ("x25519", "sc-x25519-pub1"), ("age", "age1")]
)
def test_keygen_prints_the_public_half(work: Path, kind: str, prefix: str) -> None:
    proc = sc("keygen", "--type", kind, "-o", "id.key", cwd=work)
    assert proc.returncode == 0
    public = proc.stdout.decode().strip()
    assert public.startswith(prefix)
    if kind == "ed25519":
        assert len(base64.b64decode(public)) == 32
    secret_file = (work / "id.key").read_text()
    assert f"# public key: {public}" in secret_file
    assert public not in proc.stderr.decode()
    assert stat.S_IMODE((work / "id.key").stat().st_mode) == 0o600


# ------------------------------------------------------------------------------ native


def test_native_file_round_trip_with_options(work: Path, key: Path) -> None:
    enc = sc(
        "encrypt", "-k", key, "--suite", "xchacha20-poly1305", "--segment-size", "4096",
        "--aad", "ctx", "-o", "out.sc", "in.bin", cwd=work,
    )  # fmt: skip
    assert enc.returncode == 0 and enc.stdout == b""
    sealed = (work / "out.sc").read_bytes()
    assert sealed.startswith(b"SCRY") and DATA not in sealed
    dec = sc("decrypt", "-k", key, "--aad", "ctx", "-o", "back.bin", "out.sc", cwd=work)
    assert dec.returncode == 0
    assert (work / "back.bin").read_bytes() == DATA
    wrong_aad = sc("decrypt", "-k", key, "--aad", "other", "-o", "x.bin", "out.sc", cwd=work)
    assert wrong_aad.returncode == 1 and not (work / "x.bin").exists()
    assert leftovers(work) == []


def test_native_stdin_stdout_round_trip(work: Path, key: Path) -> None:
    enc = sc("encrypt", "-k", key, cwd=work, stdin=DATA)
    assert enc.returncode == 0 and enc.stdout.startswith(b"SCRY")
    dec = sc("decrypt", "-k", key, "-", cwd=work, stdin=enc.stdout)
    assert dec.returncode == 0 and dec.stdout == DATA


def test_wrong_key_exit_codes_and_no_output(work: Path, key: Path) -> None:
    assert sc("encrypt", "-k", key, "-o", "out.sc", "in.bin", cwd=work).returncode == 0
    # another key (another key id): a key problem, exit 3
    other = sc("decrypt", "-k", "other.key", "-o", "plain.bin", "out.sc", cwd=work)
    assert other.returncode == 3 and b"key id" in other.stderr
    # the right key id with other key bytes: authentication fails, exit 1
    kid = next(x for x in key.read_text().splitlines() if x.startswith("id:")).split()[1]
    sc("keygen", "-o", "same-id.key", "--key-id", kid, cwd=work)
    forged = sc("decrypt", "-k", "same-id.key", "-o", "plain.bin", "out.sc", cwd=work)
    assert forged.returncode == 1 and b"did not authenticate" in forged.stderr
    for proc, path in ((other, "other.key"), (forged, "same-id.key")):
        assert key_line(work / path).encode() not in proc.stderr
    assert not (work / "plain.bin").exists() and leftovers(work) == []


def test_output_that_is_not_a_regular_file_is_written_in_place(work: Path, key: Path) -> None:
    """-o naming a FIFO (or /dev/null) writes into it, as age does; it is never replaced
    by a temporary renamed over it."""
    import threading

    fifo = work / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    enc = sc("encrypt", "-k", key, "-o", fifo, "in.bin", cwd=work)
    reader.join(TIMEOUT)
    assert enc.returncode == 0, enc.stderr
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and leftovers(work) == []
    import streamcrypt

    raw = base64.b64decode(key_line(key))
    assert streamcrypt.decrypt_bytes(got[0], raw) == DATA

    import anyio

    from streamcrypt.cli._io import StdoutOutput, open_output

    async def devnull() -> None:
        out = await open_output(os.devnull)
        try:
            assert isinstance(out, StdoutOutput) and out.name == os.devnull
            await out.write(b"discarded")
        finally:
            await out.commit()

    anyio.run(devnull)
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)


def test_a_write_error_names_the_output_and_is_exit_4() -> None:
    """The writer thread's error surfaces on the loop as an I/O error naming the output."""
    import anyio

    from streamcrypt.cli._errors import EXIT_IO, CliError
    from streamcrypt.cli._io import WRITE_AHEAD, StdoutOutput

    async def full_device() -> None:
        out = StdoutOutput(os.open("/dev/full", os.O_WRONLY), "/dev/full")
        with pytest.raises(CliError) as excinfo:
            for _ in range(4):  # more than the queue holds: a write waits and sees the error
                await out.write(bytes(WRITE_AHEAD))
            await out.commit()
        assert excinfo.value.code == EXIT_IO and "/dev/full" in str(excinfo.value)
        await out.abort()

    anyio.run(full_device)


@pytest.mark.parametrize("durable", [False, True])
def test_file_output_fsyncs_only_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, durable: bool
) -> None:
    """``-o`` renames a complete temporary into place either way; only ``--fsync`` waits
    for the disk (the file, then its directory) before and after the rename."""
    from streamcrypt.cli._io import FileOutput, open_output_now

    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    dest = tmp_path / "out.bin"
    out = open_output_now(str(dest), durable=durable)
    assert isinstance(out, FileOutput)
    out.put(b"x" * 1000)
    assert not dest.exists()  # nothing at the destination before the commit
    out.commit_now()
    assert dest.read_bytes() == b"x" * 1000 and leftovers(tmp_path) == []
    assert len(synced) == (2 if durable else 0)


@pytest.mark.parametrize("cancel_before", [False, True])
def test_a_cancelled_commit_completes_or_never_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cancel_before: bool
) -> None:
    """Review 6 F6: cancelled while it runs, a commit runs to its end before the
    cancellation goes on (the file in place, whole), and the abort that follows does
    nothing; cancelled before it starts, it never starts (no file, the temporary gone).
    Never a command that saw its commit fail or cancelled while the rename still came:
    the commit used to be abandoned on its thread, and the abort ran beside it."""
    import threading

    import anyio

    from streamcrypt.cli import _io

    dest = tmp_path / "out.bin"
    started, finished = threading.Event(), threading.Event()
    real_commit = _io._transports.commit_temporary

    def slow_commit(*args: object, **kwargs: object) -> None:
        started.set()
        time.sleep(0.3)  # the cancellation comes meanwhile
        real_commit(*args, **kwargs)  # type: ignore[arg-type]
        finished.set()

    monkeypatch.setattr(_io._transports, "commit_temporary", slow_commit)

    async def main() -> str:
        out = _io.open_output_now(str(dest))
        await out.write(b"x" * 1000)
        outcome = "cancelled before the commit returned"

        async def cancel_once_started() -> None:
            await anyio.to_thread.run_sync(started.wait, 5)
            scope.cancel()

        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                if cancel_before:
                    scope.cancel()
                else:
                    tg.start_soon(cancel_once_started)
                try:
                    await out.commit()
                    outcome = "committed"
                    await anyio.sleep(1)  # the cancellation is delivered here
                except BaseException:
                    await out.abort()
                    raise
        assert finished.is_set() == (outcome == "committed")  # nothing still running
        return outcome

    outcome = anyio.run(main)
    if cancel_before:
        assert outcome != "committed" and not dest.exists() and not started.is_set()
    else:
        assert outcome == "committed" and dest.read_bytes() == b"x" * 1000
    assert leftovers(tmp_path) == []


def test_fsync_option_reaches_the_output(work: Path, key: Path) -> None:
    """``--fsync`` is accepted by encrypt and decrypt and changes nothing but durability."""
    assert sc("encrypt", "--fsync", "-k", key, "-o", "out.sc", "in.bin", cwd=work).returncode == 0
    back = sc("decrypt", "--fsync", "-k", key, "-o", "back.bin", "out.sc", cwd=work)
    assert back.returncode == 0, back.stderr
    assert (work / "back.bin").read_bytes() == DATA and leftovers(work) == []


@pytest.mark.parametrize("pieces", [0, 1, 2, 5])
@pytest.mark.parametrize("extra", [-1, 0, 1])
def test_input_returns_a_regular_file_in_order(tmp_path: Path, pieces: int, extra: int) -> None:
    """A regular file's pieces come in order, at most the size asked (peeked bytes
    first), ``b""`` at the end and on every call after it, around piece boundaries."""
    from streamcrypt.cli._io import Input

    size = max(0, pieces * 1000 + extra)
    data = random.Random(size).randbytes(size)
    path = tmp_path / "in.bin"
    path.write_bytes(data)
    inp = Input(str(path))
    assert inp.peek_now(10)[:10] == data[:10]  # at least what was asked, not consumed
    got = bytearray(inp.read(1000))  # the peeked bytes, whatever their length
    while piece := inp.read(1000):
        assert len(piece) <= 1000
        got += piece
    assert inp.read() == b"" and bytes(got) == data
    inp.close()


def test_input_read_error_after_the_pieces_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read error reaches the caller after the pieces read before it."""
    from streamcrypt.cli import _io

    path = tmp_path / "in.bin"
    path.write_bytes(bytes(3 * 1000 + 5))
    real = _io._read_some
    calls = 0

    def failing(fd: int, size: int) -> bytes:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise OSError(5, "Input/output error")
        return real(fd, size)

    monkeypatch.setattr(_io, "_read_some", failing)
    inp = _io.Input(str(path))
    assert len(inp.read(1000)) == 1000
    with pytest.raises(OSError, match="Input/output error"):
        inp.read(1000)
    inp.close()


def test_tampered_file_exit_1_and_nothing_left(work: Path, key: Path) -> None:
    assert sc("encrypt", "-k", key, "-o", "out.sc", "in.bin", cwd=work).returncode == 0
    sealed = bytearray((work / "out.sc").read_bytes())
    sealed[len(sealed) // 2] ^= 0x01
    (work / "bad.sc").write_bytes(sealed)
    (work / "plain.bin").write_bytes(b"previous contents")
    proc = sc("decrypt", "-k", key, "-o", "plain.bin", "bad.sc", cwd=work)
    assert proc.returncode == 1 and b"did not verify" in proc.stderr
    assert (work / "plain.bin").read_bytes() == b"previous contents"  # untouched
    assert leftovers(work) == []
    # to stdout: verified segments went out, the failure still ends with exit 1
    piped = sc("decrypt", "-k", key, "bad.sc", cwd=work)
    assert piped.returncode == 1 and b"incomplete" in piped.stderr
    assert DATA.startswith(piped.stdout) and len(piped.stdout) < len(DATA)
    # truncated: exit 1 too
    (work / "cut.sc").write_bytes(bytes(sealed[: len(sealed) - 100]))
    cut = sc("decrypt", "-k", key, "-o", "cut.bin", "cut.sc", cwd=work)
    assert cut.returncode == 1 and not (work / "cut.bin").exists()


def test_missing_files_and_bad_keys(work: Path, key: Path) -> None:
    missing = sc("encrypt", "-k", key, "-o", "out.sc", "nothere.bin", cwd=work)
    assert missing.returncode == 4 and b"nothere.bin" in missing.stderr
    assert not (work / "out.sc").exists()
    assert sc("decrypt", "-k", key, "nothere.sc", cwd=work).returncode == 4
    no_key_file = sc("encrypt", "-k", "nokey.key", "-o", "out.sc", "in.bin", cwd=work)
    assert no_key_file.returncode == 3 and not (work / "out.sc").exists()
    write_secret(
        work / "short.key",
        "streamcrypt-key: 1\ntype: symmetric\nid: x\nkey: " + base64.b64encode(b"k" * 16).decode(),
    )
    short = sc("encrypt", "-k", "short.key", "-o", "out.sc", "in.bin", cwd=work)
    assert short.returncode == 3 and b"32 bytes" in short.stderr
    no_key = sc("encrypt", "-o", "out.sc", "in.bin", cwd=work)
    assert no_key.returncode == 3
    garbage = sc("decrypt", "-k", key, "in.bin", cwd=work)
    assert garbage.returncode == 1 and b"not a streamcrypt" in garbage.stderr


def test_older_hex_key_files_are_read_and_others_are_named(work: Path) -> None:
    """One key-file format (issue 18): the examples' older 64-hex-digit files still work
    with -k, and a file in neither form gets a message naming the forms, not identities."""
    raw = os.urandom(32)
    write_secret(work / "old.key", raw.hex() + "\n")
    enc = sc("encrypt", "-k", "old.key", "-o", "old.sc", "in.bin", cwd=work)
    assert enc.returncode == 0
    import streamcrypt

    assert streamcrypt.decrypt_bytes((work / "old.sc").read_bytes(), raw) == DATA
    dec = sc("decrypt", "-k", "old.key", "-o", "old.out", "old.sc", cwd=work)
    assert dec.returncode == 0 and (work / "old.out").read_bytes() == DATA
    write_secret(work / "junk.key", "not a key at all\n")
    junk = sc("encrypt", "-k", "junk.key", "-o", "junk.sc", "in.bin", cwd=work)
    assert junk.returncode == 3 and not (work / "junk.sc").exists()
    assert b"streamcrypt-key: 1" in junk.stderr and b"64 hex digits" in junk.stderr
    assert b"identity" not in junk.stderr


def test_usage_errors_are_one_line_exit_2(work: Path, key: Path) -> None:
    for args in (
        ("encrypt", "-k", key, "--suite", "rot13", "in.bin"),
        ("encrypt", "-k", key, "--armor", "--format", "native", "in.bin"),
        ("encrypt", "-k", key, "--segment-size", "10", "in.bin"),
        ("frobnicate",),
        (),
    ):
        proc = sc(*args, cwd=work)
        assert proc.returncode == 2, args
    assert not list(work.glob("*.sc"))


def test_cluster_only_options_without_scheduler_are_usage_errors(work: Path, key: Path) -> None:
    """--key-env and a destination URL mean a cluster run: without --scheduler they are
    refused, never silently ignored (encrypt once read the key file and went local)."""
    (work / "in.bin").write_bytes(b"data")
    for command in ("encrypt", "decrypt"):
        env_only = sc(command, "-k", key, "--key-env", "SC_KEY", "in.bin", cwd=work)
        assert env_only.returncode == 2 and b"--key-env" in env_only.stderr, command
        two = sc(command, "-k", key, "in.bin", "out.bin", cwd=work)
        assert two.returncode == 2 and b"--scheduler" in two.stderr, command
    assert not (work / "out.bin").exists()


# ------------------------------------------------------------------------- envelopes


def test_envelope_recipient_and_passphrase(work: Path, public: dict[str, str]) -> None:
    assert sc("encrypt", "-r", public["id.x"], "-o", "e.sc", "in.bin", cwd=work).returncode == 0
    assert (work / "e.sc").read_bytes().startswith(b"SCEV")
    dec = sc("decrypt", "-i", "id.x", "e.sc", cwd=work)
    assert dec.returncode == 0 and dec.stdout == DATA
    wrong = sc("decrypt", "-i", "other.x", "-o", "x.bin", "e.sc", cwd=work)
    assert wrong.returncode == 3 and not (work / "x.bin").exists()
    write_secret(work / "pw", "correct horse\n")
    write_secret(work / "bad-pw", "battery staple\n")
    enc = sc("encrypt", "--passphrase-file", "pw", "--kdf", "interactive", cwd=work, stdin=DATA)
    assert enc.returncode == 0
    ok = sc("decrypt", "--passphrase-file", "pw", cwd=work, stdin=enc.stdout)
    assert ok.returncode == 0 and ok.stdout == DATA
    bad = sc("decrypt", "--passphrase-file", "bad-pw", cwd=work, stdin=enc.stdout)
    assert bad.returncode == 3 and bad.stdout == b""


# ------------------------------------------------------------------------------- age


def test_age_recipients_interop_with_pyrage(work: Path, public: dict[str, str]) -> None:
    import pyrage

    recipient = public["id.age"]
    assert sc("encrypt", "-r", recipient, "-o", "a.age", "in.bin", cwd=work).returncode == 0
    sealed = (work / "a.age").read_bytes()
    assert sealed.startswith(b"age-encryption.org/v1\n")
    secret = (work / "id.age").read_text().split()[-1]
    identity = pyrage.x25519.Identity.from_str(secret)
    assert pyrage.decrypt(sealed, [identity]) == DATA
    theirs = pyrage.encrypt(DATA[:5000], [pyrage.x25519.Recipient.from_str(recipient)])
    dec = sc("decrypt", "-i", "id.age", cwd=work, stdin=theirs)
    assert dec.returncode == 0 and dec.stdout == DATA[:5000]
    wrong = sc("decrypt", "-i", "other.age", "-o", "x.bin", "a.age", cwd=work)
    assert wrong.returncode == 3 and not (work / "x.bin").exists()


def test_key_messages_name_every_accepted_kind(work: Path, public: dict[str, str]) -> None:
    """A wrong recipient, identity or key file is told every form the command accepts."""
    sealed = sc("encrypt", "-r", public["id.age"], "-o", "a.age", "in.bin", cwd=work)
    assert sealed.returncode == 0
    cases = [
        (
            ["encrypt", "-r", "nonsense", "in.bin"],
            ["age1pq1", "ssh-ed25519", "ssh-rsa", "sc-x25519"],
        ),
        (["encrypt", "-a", "-i", "id.x", "in.bin"], ["AGE-SECRET-KEY-PQ-1", "ssh-rsa", "age1pq1"]),
        (["encrypt", "-a", "-k", "k.key", "in.bin"], ["ssh-rsa", "AGE-SECRET-KEY-PQ-1"]),
        (["decrypt", "-i", "id.x", "a.age"], ["AGE-SECRET-KEY-1", "ssh-rsa", "ssh-ed25519"]),
    ]
    for args, words in cases:
        proc = sc(*args, "-o", "out.bin", cwd=work)
        assert proc.returncode == 3, (args, proc.stderr)
        assert all(word.encode() in proc.stderr for word in words), (args, proc.stderr)
        assert not (work / "out.bin").exists()


def test_age_armor_and_passphrase_through_pipes(work: Path, public: dict[str, str]) -> None:
    armored = sc("encrypt", "-r", public["id.age"], "--armor", cwd=work, stdin=DATA)
    assert armored.returncode == 0
    assert armored.stdout.startswith(b"-----BEGIN AGE ENCRYPTED FILE-----")
    # detected by its BEGIN line after whitespace; another armor is not taken for age
    spaced = sc("decrypt", "-i", "id.age", cwd=work, stdin=b"\n \r\n" + armored.stdout)
    assert spaced.returncode == 0 and spaced.stdout == DATA
    pgp = b"-----BEGIN PGP MESSAGE-----\n\nabc\n-----END PGP MESSAGE-----\n"
    other = sc("decrypt", "-i", "id.age", cwd=work, stdin=pgp)
    assert other.returncode == 1 and b"is not a streamcrypt container" in other.stderr
    dec = sc("decrypt", "-k", "id.age", cwd=work, stdin=armored.stdout)
    assert dec.returncode == 0 and dec.stdout == DATA
    write_secret(work / "pw", "hunter2\n")
    enc = sc(
        "encrypt", "--format", "age", "--passphrase-file", "pw", "--work-factor", "10",
        "-o", "p.age", "in.bin", cwd=work,
    )  # fmt: skip
    assert enc.returncode == 0 and b"scrypt" in (work / "p.age").read_bytes()[:200]
    back = sc("decrypt", "--passphrase-file", "pw", "p.age", cwd=work)
    assert back.returncode == 0 and back.stdout == DATA
    tampered = bytearray((work / "p.age").read_bytes())
    tampered[-50] ^= 0x80
    (work / "t.age").write_bytes(tampered)
    bad = sc("decrypt", "--passphrase-file", "pw", "-o", "t.bin", "t.age", cwd=work)
    assert bad.returncode == 1 and not (work / "t.bin").exists()


# --------------------------------------------------------------------- rclone and aws


def test_rclone_round_trip_detection_and_wrong_password(work: Path) -> None:
    from streamcrypt.codecs import rclone

    write_secret(work / "pw", "correct horse\n")
    (work / "salt").write_text("pinch of salt\n")
    secrets = ("--passphrase-file", "pw", "--password2-file", "salt")
    enc = sc("encrypt", "--format", "rclone", *secrets, "-o", "r.bin", "in.bin", cwd=work)
    assert enc.returncode == 0
    sealed = (work / "r.bin").read_bytes()
    keys = rclone.RcloneKeys.from_password("correct horse", "pinch of salt")
    assert (
        sealed.startswith(rclone.MAGIC)
        and streamcrypt.decrypt_bytes(sealed, keys, format="rclone") == DATA
    )
    # detected by its magic, through a pipe and to a file
    back = sc("decrypt", *secrets, cwd=work, stdin=sealed)
    assert back.returncode == 0 and back.stdout == DATA
    assert sc("decrypt", *secrets, "-o", "r.out", "r.bin", cwd=work).returncode == 0
    assert (work / "r.out").read_bytes() == DATA
    # rclone cannot tell a wrong password from tampering: exit 1, nothing left behind
    wrong = sc("decrypt", "--passphrase-file", "pw", "-o", "w.bin", "r.bin", cwd=work)
    assert wrong.returncode == 1 and b"wrong password" in wrong.stderr
    assert not (work / "w.bin").exists() and not leftovers(work)
    assert b"correct horse" not in wrong.stderr
    no_pw = sc("decrypt", "-o", "w.bin", "r.bin", cwd=work)
    assert no_pw.returncode == 3 and b"--passphrase" in no_pw.stderr
    misplaced = sc("encrypt", "-k", "k.key", "--password2-file", "salt", "in.bin", cwd=work)
    assert misplaced.returncode == 2 and b"--password2-file does not apply" in misplaced.stderr


def test_aws_raw_aes_key_round_trip_interop_and_errors(work: Path) -> None:
    import aws_encryption_sdk
    from aws_encryption_sdk.identifiers import EncryptionKeyType, WrappingAlgorithm
    from aws_encryption_sdk.internal.crypto.wrapping_keys import WrappingKey
    from aws_encryption_sdk.key_providers.raw import RawMasterKey

    aes = os.urandom(32)
    write_secret(work / "aes.key", aes)
    write_secret(work / "other.key", os.urandom(32))
    names = ("--key-namespace", "ns", "--key-name", "key-1")
    enc = sc("encrypt", "-k", "aes.key", *names, "--context", "purpose=test", "-o", "a.bin",
             "in.bin", cwd=work)  # fmt: skip
    assert enc.returncode == 0
    sealed = (work / "a.bin").read_bytes()
    assert sealed[:3] == b"\x02\x05\x78"  # version 2, suite 0x0578
    theirs = RawMasterKey(
        provider_id="ns",
        key_id=b"key-1",
        wrapping_key=WrappingKey(
            wrapping_algorithm=WrappingAlgorithm.AES_256_GCM_IV12_TAG16_NO_PADDING,
            wrapping_key=aes,
            wrapping_key_type=EncryptionKeyType.SYMMETRIC,
        ),
    )
    client = aws_encryption_sdk.EncryptionSDKClient()
    plain, header = client.decrypt(source=sealed, key_provider=theirs)
    assert plain == DATA and header.encryption_context["purpose"] == "test"
    their_ct, _ = client.encrypt(source=DATA[:70_000], key_provider=theirs)
    back = sc("decrypt", "-k", "aes.key", *names, cwd=work, stdin=their_ct)  # detected
    assert back.returncode == 0 and back.stdout == DATA[:70_000]
    mine = sc("decrypt", "-k", "aes.key", *names, "--context", "purpose=test", "a.bin", cwd=work)
    assert mine.returncode == 0 and mine.stdout == DATA
    wrong = sc("decrypt", "-k", "other.key", *names, "-o", "w.bin", "a.bin", cwd=work)
    assert wrong.returncode == 3 and not (work / "w.bin").exists() and not leftovers(work)
    context = sc("decrypt", "-k", "aes.key", *names, "--context", "purpose=other", "a.bin",
                 cwd=work)  # fmt: skip
    assert context.returncode == 1 and context.stdout == b""
    not_raw = sc("decrypt", "--format", "aws", "-k", "k.key", "a.bin", cwd=work)
    assert not_raw.returncode == 3 and b"16, 24 or 32 bytes" in not_raw.stderr
    raw_elsewhere = sc("encrypt", "--format", "native", "-k", "aes.key", "in.bin", cwd=work)
    assert raw_elsewhere.returncode == 3 and b"--format aws" in raw_elsewhere.stderr


def test_aws_signed_message_releases_nothing_before_its_signature(work: Path) -> None:
    """A signed AWS message whose signature fails: standard output gets nothing (the
    codec holds the plaintext until the signature verified), and an output file is never
    made (frames go into the atomic temporary, which is removed). The signature is the
    last bytes of the message: every frame before it is authentic under the data key."""
    write_secret(work / "aes.key", os.urandom(32))
    enc = sc("encrypt", "-k", "aes.key", "-o", "a.bin", "in.bin", cwd=work)
    assert enc.returncode == 0
    sealed = bytearray((work / "a.bin").read_bytes())
    sealed[-1] ^= 1
    (work / "forged.bin").write_bytes(sealed)
    to_stdout = sc("decrypt", "-k", "aes.key", "forged.bin", cwd=work)
    assert to_stdout.returncode != 0 and to_stdout.stdout == b""
    to_file = sc("decrypt", "-k", "aes.key", "-o", "out.bin", "forged.bin", cwd=work)
    assert to_file.returncode != 0
    assert not (work / "out.bin").exists() and not leftovers(work)
    good = sc("decrypt", "-k", "aes.key", "-o", "out.bin", "a.bin", cwd=work)
    assert good.returncode == 0 and (work / "out.bin").read_bytes() == DATA


# ------------------------------------------------------------------------------ tink


def test_tink_keyset_interop(work: Path) -> None:
    import tink
    from tink import cleartext_keyset_handle, streaming_aead

    streaming_aead.register()
    handle = tink.new_keyset_handle(streaming_aead.streaming_aead_key_templates.AES128_GCM_HKDF_4KB)
    text = io.StringIO()
    cleartext_keyset_handle.write(tink.JsonKeysetWriter(text), handle)
    write_secret(work / "ks.json", text.getvalue())
    enc = sc("encrypt", "-k", "ks.json", "--aad", "ctx", "-o", "t.tink", "in.bin", cwd=work)
    assert enc.returncode == 0
    primitive = handle.primitive(streaming_aead.StreamingAead)
    ciphertext = (work / "t.tink").read_bytes()
    with primitive.new_decrypting_stream(io.BytesIO(ciphertext), b"ctx") as stream:
        assert stream.read() == DATA
    dec = sc("decrypt", "-k", "ks.json", "--aad", "ctx", "t.tink", cwd=work)
    assert dec.returncode == 0 and dec.stdout == DATA
    wrong = sc("decrypt", "-k", "ks.json", "--aad", "nope", "-o", "x", "t.tink", cwd=work)
    assert wrong.returncode == 1 and not (work / "x").exists()


@pytest.mark.parametrize(
    "keyset",
    [
        '{"primaryKeyId": 1e400, "key": []}',  # was exit 1: cannot convert float infinity
        '{"primaryKeyId": 1, "key": [{"keyId": Infinity}]}',
        '{"a":' + "[" * 5000,  # was a RecursionError
        '{"primaryKeyId": 1, "primaryKeyId": 2, "key": []}',
    ],
)
def test_hostile_tink_keyset_is_a_key_problem(work: Path, keyset: str) -> None:
    """docs/CLI.md: a malformed key file exits 3 (issue 14)."""
    write_secret(work / "bad.json", keyset)
    proc = sc("decrypt", "--format", "tink", "-k", "bad.json", "-o", "x", "in.bin", cwd=work)
    assert proc.returncode == 3, proc.stderr
    assert b"bad.json" in proc.stderr and not (work / "x").exists()


# ------------------------------------------------------------------------------ hash


def test_hash_matches_hashlib_and_blake3(work: Path, key: Path) -> None:
    (work / "b.txt").write_bytes(b"hello\n")
    files = ("in.bin", "b.txt")
    expected = {
        "sha256": [hashlib.sha256((work / f).read_bytes()).hexdigest() for f in files],
        "sha512": [hashlib.sha512((work / f).read_bytes()).hexdigest() for f in files],
        "blake3": [blake3.blake3((work / f).read_bytes()).hexdigest() for f in files],
    }
    for algo, digests in expected.items():
        proc = sc("hash", "--algo", algo, *files, cwd=work)
        assert proc.returncode == 0
        want = "".join(f"{d}  {f}\n" for d, f in zip(digests, files, strict=True))
        assert proc.stdout.decode() == want
    stdin = sc("hash", cwd=work, stdin=b"abc")
    assert stdin.stdout.decode() == f"{hashlib.sha256(b'abc').hexdigest()}  -\n"
    raw_key = base64.b64decode(key_line(key))
    mac = sc("hash", "--hmac-key", key, "b.txt", cwd=work)
    assert mac.stdout.decode().split()[0] == hmac.new(raw_key, b"hello\n", "sha256").hexdigest()
    keyed = sc("hash", "--algo", "blake3", "--hmac-key", key, "b.txt", cwd=work)
    assert keyed.stdout.decode().split()[0] == blake3.blake3(b"hello\n", key=raw_key).hexdigest()
    partial = sc("hash", "nothere", "b.txt", cwd=work)
    assert partial.returncode == 4 and b"nothere" in partial.stderr
    assert (
        partial.stdout.decode() == f"{hashlib.sha256(b'hello' + bytes([10])).hexdigest()}  b.txt\n"
    )


# ------------------------------------------------------------------------------ sign


def test_sign_and_verify(work: Path, public: dict[str, str]) -> None:
    signer = public["sign.key"]
    (work / "sign.pub").write_text(signer + "\n")
    sig = sc("sign", "-k", "sign.key", "in.bin", cwd=work)
    assert sig.returncode == 0 and len(base64.b64decode(sig.stdout)) == 64
    (work / "in.sig").write_bytes(sig.stdout)
    ok = sc("verify", "-p", "sign.pub", "-s", "in.sig", "in.bin", cwd=work)
    assert ok.returncode == 0 and ok.stdout == b"in.bin: OK\n"
    from_stdin = sc("verify", "-p", signer, "-s", "in.sig", cwd=work, stdin=DATA)
    assert from_stdin.returncode == 0
    # the signature is Ed25519ph (RFC 8032), checked with PyNaCl's libsodium binding
    from nacl import bindings

    state = bindings.crypto_sign_ed25519ph_state()
    bindings.crypto_sign_ed25519ph_update(state, DATA)
    bindings.crypto_sign_ed25519ph_final_verify(
        state, base64.b64decode(sig.stdout), base64.b64decode(signer)
    )
    bad = bytearray(base64.b64decode(sig.stdout))
    bad[10] ^= 0x01
    (work / "bad.sig").write_bytes(base64.b64encode(bad))
    tampered = sc("verify", "-p", "sign.pub", "-s", "bad.sig", "in.bin", cwd=work)
    assert tampered.returncode == 1 and tampered.stdout == b""
    other_data = sc("verify", "-p", "sign.pub", "-s", "in.sig", cwd=work, stdin=DATA + b"!")
    assert other_data.returncode == 1
    write_secret(work / "sig-as.key", sig.stdout)  # the wrong kind of file, kept private
    wrong_kind = sc("sign", "-k", "sig-as.key", "in.bin", cwd=work)
    assert wrong_kind.returncode == 3


# ---------------------------------------------------------------- serve and connect


def _start_server(
    work: Path, *args: str | Path, stdin: bytes
) -> tuple[subprocess.Popen[bytes], int]:
    (work / "server-in").write_bytes(stdin)
    with (work / "server-in").open("rb") as server_stdin:
        server = subprocess.Popen(
            [sys.executable, "-m", "streamcrypt", "serve", "0", *map(str, args)],
            stdin=server_stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=work,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
    assert server.stderr is not None
    ready, _, _ = select.select([server.stderr], [], [], TIMEOUT)
    assert ready, "the server did not start"
    line = server.stderr.readline().decode()
    assert line.startswith("streamcrypt: listening on 127.0.0.1:"), line
    return server, int(line.rsplit(":", 1)[1])


@pytest.mark.parametrize("mode", ["psk", "static"])
def test_serve_connect_round_trip(work: Path, key: Path, public: dict[str, str], mode: str) -> None:
    if mode == "psk":
        server_args: tuple[str | Path, ...] = ("--psk-file", key)
        client_args: tuple[str | Path, ...] = ("--psk-file", key)
    else:
        server_args = ("-k", "id.x", "--allow", public["other.x"])
        client_args = ("-k", "other.x", "--server-key", public["id.x"])
    to_client = DATA[:100_000]
    server, port = _start_server(work, *server_args, stdin=to_client)
    try:
        client = sc("connect", "127.0.0.1", str(port), *client_args, cwd=work, stdin=DATA)
        out, err = server.communicate(timeout=TIMEOUT)
    finally:
        server.kill()
        server.wait()
    assert client.returncode == 0, client.stderr
    assert client.stdout == to_client
    assert server.returncode == 0, err
    assert out == DATA


def test_connect_with_the_wrong_psk_fails(work: Path, key: Path) -> None:
    server, port = _start_server(work, "--psk-file", key, stdin=b"secret reply")
    try:
        client = sc("connect", "127.0.0.1", str(port), "--psk-file", "other.key", cwd=work)
        assert client.returncode == 1 and b"secret" not in client.stdout
        assert server.poll() is None  # a failed handshake does not end the server
    finally:
        server.kill()
        _, err = server.communicate(timeout=TIMEOUT)
    assert b"the handshake with a client failed (HandshakeError: " in err
    refused = sc("connect", "127.0.0.1", "1", "--psk-file", key, cwd=work)
    assert refused.returncode == 4


@pytest.mark.parametrize("how", ["SIGINT", "SIGKILL"])
def test_serve_keeps_nothing_when_connect_is_killed_mid_pipe(
    work: Path, key: Path, how: str
) -> None:
    """A session the client did not finish is not a transfer: serve exits 1 and its -o
    file never appears (no temporary left either), whether the client was interrupted
    (it aborts) or killed (its connection just ends)."""
    import signal
    import time

    server, port = _start_server(work, "--psk-file", key, "-o", "got.bin", stdin=b"")
    client = subprocess.Popen(
        [sys.executable, "-m", "streamcrypt", "connect", "127.0.0.1", str(port), "--psk-file", key],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=work,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert client.stdin is not None
    try:
        client.stdin.write(DATA[:200_000])
        client.stdin.flush()
        deadline = time.monotonic() + TIMEOUT
        while not [p for p in work.iterdir() if p.name.startswith(".got.bin.")]:
            assert time.monotonic() < deadline, "the server never opened its output"
            time.sleep(0.05)
        time.sleep(0.5)  # let part of the data arrive
        client.send_signal(getattr(signal, how))
        client.wait(timeout=TIMEOUT)
        _, err = server.communicate(timeout=TIMEOUT)
    finally:
        client.stdin.close()
        for process in (client, server):
            process.kill()
            process.wait()
    assert server.returncode == 1, err
    assert b"close record" in err
    assert sorted(p.name for p in work.iterdir() if "got.bin" in p.name) == []


def test_serve_and_connect_write_their_output_files_once_the_session_ended(
    work: Path, key: Path
) -> None:
    server, port = _start_server(work, "--psk-file", key, "-o", "got.bin", stdin=b"reply")
    try:
        client = sc(
            "connect",
            "127.0.0.1",
            str(port),
            "--psk-file",
            key,
            "-o",
            "back.bin",
            cwd=work,
            stdin=DATA,
        )
        _, err = server.communicate(timeout=TIMEOUT)
    finally:
        server.kill()
        server.wait()
    assert client.returncode == 0 and server.returncode == 0, (client.stderr, err)
    assert (work / "got.bin").read_bytes() == DATA
    assert (work / "back.bin").read_bytes() == b"reply"


# ----------------------------------------------------------------------------- misc


def test_bench_runs_the_checkout_benchmarks_or_explains(work: Path) -> None:
    alone = sc("bench", cwd=work)
    assert alone.returncode == 2 and b"make bench" in alone.stderr
    (work / "bench").mkdir()
    (work / "bench" / "__init__.py").write_text("")
    (work / "bench" / "__main__.py").write_text("import sys\nprint('bench', sys.argv[1:])\n")
    ran = sc("bench", "--quick", cwd=work)
    assert ran.returncode == 0 and ran.stdout == b"bench ['--quick']\n"


def test_bench_is_not_listed(work: Path) -> None:
    """The installed command's --help does not offer bench, which needs a checkout."""
    listed = sc("--help", cwd=work)
    assert listed.returncode == 0 and b"clean" in listed.stdout
    assert b"bench" not in listed.stdout
    wrong = sc("frobnicate", cwd=work)
    assert wrong.returncode == 2 and b"'clean'" in wrong.stderr and b"bench" not in wrong.stderr
    described = sc("bench", "--help", cwd=work)
    assert described.returncode == 0 and b"--quick" in described.stdout


def test_version_and_help(work: Path) -> None:
    version = sc("--version", cwd=work)
    assert version.returncode == 0 and version.stdout.startswith(b"streamcrypt ")
    helptext = sc("encrypt", "--help", cwd=work)
    assert helptext.returncode == 0 and b"--passphrase" in helptext.stdout


def test_progress_bar_only_on_a_terminal(work: Path, key: Path) -> None:
    import pty

    quiet = sc("encrypt", "-k", key, "-o", "q.sc", "in.bin", cwd=work,
               env={"STREAMCRYPT_PROGRESS_DELAY": "0"})  # fmt: skip
    assert quiet.returncode == 0 and quiet.stderr == b""
    controller, terminal = pty.openpty()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "streamcrypt", "encrypt", "-k", key, "-o", "p.sc", "in.bin"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=terminal,
            cwd=work,
            timeout=TIMEOUT,
            env={**os.environ, "PYTHONPATH": str(REPO), "STREAMCRYPT_PROGRESS_DELAY": "0"},
        )
        os.close(terminal)
        terminal = -1
        shown = b""
        while select.select([controller], [], [], 0.5)[0]:
            try:
                chunk = os.read(controller, 65536)
            except OSError:
                break
            if not chunk:
                break
            shown += chunk
    finally:
        if terminal >= 0:
            os.close(terminal)
        os.close(controller)
    assert proc.returncode == 0
    assert b"encrypting" in shown


def test_signed_envelope(work: Path, public: dict[str, str]) -> None:
    signer, other = public["sign.key"], public["other-sign.key"]
    enc = sc(
        "encrypt", "-r", public["id.x"], "--sign-with", "sign.key", "-o", "s.sc", "in.bin",
        cwd=work,
    )  # fmt: skip
    assert enc.returncode == 0
    ok = sc("decrypt", "-i", "id.x", "--verify-with", signer, "-o", "ok.bin", "s.sc", cwd=work)
    assert ok.returncode == 0 and (work / "ok.bin").read_bytes() == DATA
    # The signature is checked at the end and stdout cannot be taken back: refused.
    to_stdout = sc("decrypt", "-i", "id.x", "--verify-with", signer, "s.sc", cwd=work)
    assert to_stdout.returncode == 2 and to_stdout.stdout == b""
    assert b"needs -o FILE" in to_stdout.stderr
    wrong = sc("decrypt", "-i", "id.x", "--verify-with", other, "-o", "x", "s.sc", cwd=work)
    assert wrong.returncode == 1 and not (work / "x").exists()
    sealed = bytearray((work / "s.sc").read_bytes())
    sealed[-3] ^= 0x01  # inside the signature
    (work / "t.sc").write_bytes(sealed)
    bad = sc("decrypt", "-i", "id.x", "--verify-with", signer, "-o", "x", "t.sc", cwd=work)
    assert bad.returncode == 1 and not (work / "x").exists() and leftovers(work) == []
    # Without --verify-with a signed envelope is refused before any output...
    unchecked = sc("decrypt", "-i", "id.x", "s.sc", cwd=work)
    assert unchecked.returncode == 1 and unchecked.stdout == b""
    assert b"--allow-unverified" in unchecked.stderr
    unchecked = sc("decrypt", "-i", "id.x", "-o", "u.bin", "s.sc", cwd=work)
    assert unchecked.returncode == 1 and not (work / "u.bin").exists()
    # ... unless the caller says by name to skip the check (then even a bad one reads).
    skipped = sc("decrypt", "-i", "id.x", "--allow-unverified", "t.sc", cwd=work)
    assert skipped.returncode == 0 and skipped.stdout == DATA
    both = sc(
        "decrypt", "-i", "id.x", "--verify-with", signer, "--allow-unverified",
        "-o", "x", "s.sc", cwd=work,
    )  # fmt: skip
    assert both.returncode == 2 and not (work / "x").exists()
    plain = sc("encrypt", "-r", public["id.x"], "-o", "p.sc", "in.bin", cwd=work)
    assert plain.returncode == 0
    unsigned = sc("decrypt", "-i", "id.x", "--allow-unverified", "p.sc", cwd=work)
    assert unsigned.returncode == 0 and unsigned.stdout == DATA


def test_verify_with_streams_an_envelope_into_a_file_only(
    work: Path, public: dict[str, str]
) -> None:
    """Into an atomic regular file (removed unless the signature verifies) segments go as
    they verify, so a large envelope streams; elsewhere --verify-with is refused before
    any work, and the codec would hold everything until the signature (max_buffered)."""
    from streamcrypt.cli import _crypt
    from streamcrypt.cli._errors import CliError

    keys = _crypt._Keys(passphrase="pw")
    signer = public["sign.key"]
    to_file = _namespace("decrypt", verify_with=signer, output=str(work / "out.bin"))
    options = _crypt._envelope_reading(to_file, keys)
    assert options.verify_with is not None and options.allow_unverified
    for output in (None, "-", os.devnull):
        args = _namespace("decrypt", verify_with=signer, output=output)
        assert not _crypt._envelope_reading(args, keys).allow_unverified
    both = _namespace("decrypt", verify_with=signer, allow_unverified=True, output="x")
    with pytest.raises(CliError, match="not both"):
        _crypt._envelope_reading(both, keys)
    enc = sc(
        "encrypt", "-r", public["id.x"], "--sign-with", "sign.key", "-o", "s.sc", "in.bin",
        cwd=work,
    )  # fmt: skip
    assert enc.returncode == 0
    special = sc(
        "decrypt", "-i", "id.x", "--verify-with", signer, "-o", os.devnull, "s.sc", cwd=work
    )
    assert special.returncode == 2 and b"--verify-with" in special.stderr


def _on_a_terminal(args: list[str], cwd: Path, answers: list[bytes]) -> tuple[int, bytes]:
    """Run the command with a pseudo-terminal as its controlling terminal; answer each
    prompt (a line ending in ': ') with the next of ``answers``."""
    import pty
    import time

    pid, fd = pty.fork()
    if pid == 0:  # the child: exec the command (its /dev/tty is the pty)
        os.chdir(cwd)
        os.environ["PYTHONPATH"] = str(REPO)
        os.execv(sys.executable, [sys.executable, "-m", "streamcrypt", *args])
    seen = b""
    deadline = time.monotonic() + TIMEOUT
    pending = list(answers)
    try:
        while time.monotonic() < deadline:
            if not select.select([fd], [], [], 0.2)[0]:
                continue
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
            if pending and seen.rstrip().endswith(b":"):
                os.write(fd, pending.pop(0) + b"\n")
                seen += b"<answered>"
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    return os.waitstatus_to_exitcode(status), seen


def test_passphrase_prompt_without_echo(work: Path) -> None:
    code, seen = _on_a_terminal(
        ["encrypt", "--passphrase", "--kdf", "interactive", "-o", "p.sc", "in.bin"],
        work,
        [b"open sesame", b"open sesame"],
    )
    assert code == 0, seen
    assert b"Passphrase:" in seen and b"Confirm passphrase:" in seen
    assert b"open sesame" not in seen  # no echo
    write_secret(work / "pw", "open sesame\n")
    back = sc("decrypt", "--passphrase-file", "pw", "p.sc", cwd=work)
    assert back.returncode == 0 and back.stdout == DATA
    code, seen = _on_a_terminal(["decrypt", "--passphrase", "-o", "x", "p.sc"], work, [b"nope"])
    assert code == 3 and not (work / "x").exists()
    # without a terminal, --passphrase does not read the data on stdin: usage error
    no_tty = subprocess.run(
        [sys.executable, "-m", "streamcrypt", "decrypt", "--passphrase", "p.sc"],
        capture_output=True,
        cwd=work,
        timeout=TIMEOUT,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        start_new_session=True,  # no controlling terminal
    )
    assert no_tty.returncode == 2 and b"--passphrase-file" in no_tty.stderr


# ------------------------------------------------------------------ outputs that fail


def test_output_directory_or_missing_directory_fails_before_any_work(work: Path, key: Path) -> None:
    (work / "d").mkdir()
    for args in (
        ["encrypt", "-k", key, "-o", "d", "in.bin"],
        ["decrypt", "-k", key, "-o", "d", "in.bin"],
        ["sign", "-k", "sign.key", "-o", "d", "in.bin"],
        ["keygen", "-o", "d"],
    ):
        # stdin never closes: a command that read its input first would hang, not fail
        proc = subprocess.Popen(
            [sys.executable, "-m", "streamcrypt", *map(str, args[:-1]), "-"]
            if args[0] in ("encrypt", "decrypt", "sign")
            else [sys.executable, "-m", "streamcrypt", *map(str, args)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=work,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        try:
            _, err = proc.communicate(timeout=TIMEOUT)
        finally:
            proc.kill()
        assert proc.returncode == 4, err
        assert err == b"streamcrypt: error: d is a directory; -o takes the name of a file\n"
    assert os.listdir(work / "d") == [] and leftovers(work) == []
    missing = sc("encrypt", "-k", key, "-o", "nodir/x.sc", "in.bin", cwd=work)
    assert missing.returncode == 4
    assert b"cannot write nodir/x.sc: the directory" in missing.stderr
    assert b"nodir does not exist" in missing.stderr and b".tmp" not in missing.stderr


def test_clean_removes_what_a_killed_run_left(work: Path, key: Path) -> None:
    import signal
    import time

    proc = subprocess.Popen(  # stdin stays open: the run is mid-stream when killed
        [sys.executable, "-m", "streamcrypt", "encrypt", "-k", str(key), "-o", "out.sc"],
        stdin=subprocess.PIPE,
        cwd=work,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert proc.stdin is not None
    proc.stdin.write(DATA)
    proc.stdin.flush()
    deadline = time.monotonic() + TIMEOUT
    while not leftovers(work) and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(TIMEOUT)
    proc.stdin.close()
    [tmp] = leftovers(work)
    assert not (work / "out.sc").exists()
    young = sc("clean", work, cwd=work)  # a run may still be writing a young temporary
    assert young.returncode == 0 and young.stdout == b"" and leftovers(work) == [tmp]
    assert b"kept 1 temporary" in young.stderr and b"--older-than 0" in young.stderr
    gone = sc("clean", "--older-than", "0", cwd=work)
    assert gone.returncode == 0 and leftovers(work) == []
    assert gone.stdout.decode().strip().endswith(tmp)


# -------------------------------------------------------------- age's command line


def test_age_style_command_line_with_recipients_file(work: Path, public: dict[str, str]) -> None:
    import pyrage

    (work / "recips.txt").write_text(
        f"# the team\n{public['id.age']}\n\n  {public['other.age']}  \n"
    )
    enc = sc("-R", "recips.txt", "-o", "a.age", "in.bin", cwd=work)  # no command word: age's
    assert enc.returncode == 0
    for name in ("id.age", "other.age"):
        secret = (work / name).read_text().split()[-1]
        sealed = (work / "a.age").read_bytes()
        assert pyrage.decrypt(sealed, [pyrage.x25519.Identity.from_str(secret)]) == DATA
        dec = sc("-d", "-i", name, "a.age", cwd=work)
        assert dec.returncode == 0 and dec.stdout == DATA
    armored = sc("-e", "-a", "-r", public["id.age"], cwd=work, stdin=DATA)
    assert armored.stdout.startswith(b"-----BEGIN AGE ENCRYPTED FILE-----")
    back = sc("--decrypt", "-i", "id.age", "-o", "back.bin", cwd=work, stdin=armored.stdout)
    assert back.returncode == 0 and (work / "back.bin").read_bytes() == DATA
    both = sc("-e", "-d", "-i", "id.age", "a.age", cwd=work)
    assert both.returncode == 2 and b"exclude each other" in both.stderr
    # -r given a file says to use -R, and never echoes what it read
    mistaken = sc("-r", "recips.txt", "in.bin", cwd=work)
    assert mistaken.returncode == 3 and b"give a file of recipients with -R" in mistaken.stderr
    write_secret(work / "bad.txt", f"{public['id.age']}\nAGE-SECRET-KEY-1NOTAKEY\n")
    bad = sc("-R", "bad.txt", "in.bin", cwd=work)
    assert bad.returncode == 3 and b"bad.txt line 2 does not parse" in bad.stderr
    assert b"NOTAKEY" not in bad.stderr


def test_short_passphrase_flag_prompts(work: Path) -> None:
    code, seen = _on_a_terminal(
        ["-p", "--work-factor", "10", "-o", "p.age", "in.bin"], work, [b"pw", b"pw"]
    )
    assert code == 0 and b"Confirm passphrase:" in seen, seen
    code, seen = _on_a_terminal(["-d", "-p", "-o", "back.bin", "p.age"], work, [b"pw"])
    assert code == 0 and (work / "back.bin").read_bytes() == DATA


def test_age_habits_write_age(work: Path, key: Path) -> None:
    """age's own line (``-p -o notes.age IN``, no command word, no format word) writes an
    age file age reads; so does any output named ``*.age`` unless -k or --format says
    otherwise, and then the command warns that the file is not age."""
    code, seen = _on_a_terminal(["-p", "-o", "notes.age", "in.bin"], work, [b"pw", b"pw"])
    assert code == 0, seen
    assert pyrage.passphrase.decrypt((work / "notes.age").read_bytes(), "pw") == DATA
    write_secret(work / "pw.txt", "pw\n")
    age_line = sc("--passphrase-file", "pw.txt", "-o", "notes.bin", "in.bin", cwd=work)
    named = sc("encrypt", "--passphrase-file", "pw.txt", "-o", "named.AGE", "in.bin", cwd=work)
    native = sc("encrypt", "--passphrase-file", "pw.txt", "-o", "native.sc", "in.bin", cwd=work)
    assert age_line.returncode == named.returncode == native.returncode == 0
    assert b"" == age_line.stderr == named.stderr == native.stderr
    for name in ("notes.bin", "named.AGE"):
        assert pyrage.passphrase.decrypt((work / name).read_bytes(), "pw") == DATA
    assert (work / "native.sc").read_bytes()[:4] == b"SCEV"  # the command word keeps native
    chosen = sc(
        "encrypt",
        "--format",
        "native",
        "--passphrase-file",
        "pw.txt",
        "-o",
        "a.age",
        "in.bin",
        cwd=work,
    )
    by_key = sc("encrypt", "-k", key, "-o", "b.age", "in.bin", cwd=work)
    for proc, name in ((chosen, "a.age"), (by_key, "b.age")):
        assert proc.returncode == 0 and (work / name).read_bytes()[:2] == b"SC"
        assert f"warning: {name} is a native file, not an age file".encode() in proc.stderr


def test_encrypt_help_lists_every_format_the_command_speaks() -> None:
    """The help's format list is the one the command's table uses (descriptors of the
    registry), so a format added to the table and not to the list fails here."""
    from streamcrypt.cli import _crypt
    from streamcrypt.cli._usage import COMMANDS, FORMATS
    from streamcrypt.codecs import FORMATS as REGISTRY

    spoken = {_crypt._CLI_NAME.get(name, name) for name, _ in _crypt._USES}
    assert spoken == set(FORMATS) and set(FORMATS) <= set(REGISTRY)
    helped = sc("encrypt", "--help", cwd=REPO).stdout.decode()
    top = sc("--help", cwd=REPO).stdout.decode()
    for name in FORMATS:
        assert name in COMMANDS["encrypt"] and name in helped and name in top.split("encrypt", 1)[1]


def test_keygen_to_stdout_and_public_half_with_y(work: Path, public: dict[str, str]) -> None:
    made = sc("keygen", "--type", "age", cwd=work)  # as age-keygen: key out, public to stderr
    assert made.returncode == 0 and made.stdout.decode().strip().split()[-1].startswith(
        "AGE-SECRET-KEY-1"
    )
    assert made.stderr.decode().startswith("Public key: age1")
    again = sc("keygen", "-y", cwd=work, stdin=made.stdout)
    assert again.returncode == 0 and again.stdout.decode() == made.stderr.decode()[12:]
    for name in ("id.age", "id.x", "sign.key"):  # -y gives what keygen printed
        half = sc("keygen", "-y", name, cwd=work)
        assert half.returncode == 0 and half.stdout.decode() == public[name] + "\n"
    sym = sc("keygen", "-y", "k.key", cwd=work)
    assert sym.returncode == 3 and b"no public half" in sym.stderr
    written = sc("keygen", "-y", "id.age", "-o", "id.pub", cwd=work)
    assert written.returncode == 0 and (work / "id.pub").read_text() == public["id.age"] + "\n"


def test_keygen_post_quantum_identity(work: Path) -> None:
    made = sc("keygen", "--type", "age-pq", "-o", "pq.key", cwd=work)
    assert made.returncode == 0
    recipient = made.stdout.decode().strip()
    assert recipient.startswith("age1pq1")
    assert "AGE-SECRET-KEY-PQ-1" in (work / "pq.key").read_text()
    assert stat.S_IMODE((work / "pq.key").stat().st_mode) == 0o600
    enc = sc("-r", recipient, "-o", "pq.age", "in.bin", cwd=work)
    assert enc.returncode == 0 and b"mlkem768x25519" in (work / "pq.age").read_bytes()[:300]
    dec = sc("-d", "-i", "pq.key", "pq.age", cwd=work)
    assert dec.returncode == 0 and dec.stdout == DATA


def test_decrypt_detects_the_format_and_says_so(work: Path, key: Path) -> None:
    assert sc("encrypt", "-k", key, "-o", "f.sc", "in.bin", cwd=work).returncode == 0
    wrong = sc("decrypt", "-i", "id.age", "f.sc", cwd=work)
    assert wrong.returncode == 2
    assert b"--format" not in wrong.stderr  # the user gave no --format
    assert b"the input is a native streamcrypt container" in wrong.stderr
    assert b"-k KEYFILE" in wrong.stderr
    forced = sc("decrypt", "--format", "native", "-i", "id.age", "f.sc", cwd=work)
    assert forced.returncode == 2 and b"does not apply to --format native" in forced.stderr


def test_hash_check_as_sha256sum_c(work: Path, key: Path) -> None:
    (work / "b.bin").write_bytes(b"second")
    made = sc("hash", "--algo", "blake3", "in.bin", "b.bin", cwd=work)
    (work / "SUMS").write_bytes(made.stdout)
    ok = sc("hash", "--algo", "blake3", "--check", "SUMS", cwd=work)
    assert ok.returncode == 0 and ok.stdout == b"in.bin: OK\nb.bin: OK\n"
    # sha256sum's own output, with the binary marker, read from stdin
    listed = f"{hashlib.sha256(DATA).hexdigest()} *in.bin\n".encode()
    assert sc("hash", "-c", cwd=work, stdin=listed).stdout == b"in.bin: OK\n"
    (work / "b.bin").write_bytes(b"altered")
    bad = sc("hash", "--algo", "blake3", "-c", "SUMS", cwd=work)
    assert bad.returncode == 1 and bad.stdout == b"in.bin: OK\nb.bin: FAILED\n"
    assert b"1 of 2 computed digests did not match" in bad.stderr
    wrong_algo = sc("hash", "-c", "SUMS", cwd=work)  # sha256 against BLAKE3 digests
    assert wrong_algo.returncode == 1
    (work / "b.bin").unlink()
    gone = sc("hash", "--algo", "blake3", "-c", "SUMS", cwd=work)
    assert gone.returncode == 4 and b"b.bin: FAILED open or read" in gone.stdout
    (work / "junk").write_text("not a checksum line\n")
    assert sc("hash", "-c", "junk", cwd=work).returncode == 2


def test_ctrl_c_while_reading_a_terminal_stops_at_once(work: Path, key: Path) -> None:
    """Ctrl-C on a terminal stops a command blocked reading that terminal: exit 130, one
    line, no traceback, no output file and no temporary left (before, it lingered until
    the input closed)."""
    import pty
    import time

    pid, fd = pty.fork()
    if pid == 0:  # the child: stdin, stdout and stderr are the pty
        os.chdir(work)
        os.environ["PYTHONPATH"] = str(REPO)
        os.execv(
            sys.executable,
            [sys.executable, "-m", "streamcrypt", "encrypt", "-k", str(key), "-o", "out.sc"],
        )
    seen = b""
    status = None
    try:
        deadline = time.monotonic() + TIMEOUT
        while not leftovers(work) and time.monotonic() < deadline:  # the output is open
            time.sleep(0.05)
        os.write(fd, b"typed but never ended\n")
        time.sleep(0.3)
        os.write(fd, b"\x03")  # the terminal's interrupt character: SIGINT
        interrupted = time.monotonic()
        while time.monotonic() < interrupted + 5 and status is None:
            if select.select([fd], [], [], 0.1)[0]:
                try:
                    seen += os.read(fd, 4096)
                except OSError:  # EIO: the child closed the terminal
                    pass
            done, st = os.waitpid(pid, os.WNOHANG)
            if done:
                status = os.waitstatus_to_exitcode(st)
    finally:
        if status is None:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        os.close(fd)
    assert status == 130, seen
    assert b"streamcrypt: interrupted" in seen and b"Traceback" not in seen
    assert not (work / "out.sc").exists() and leftovers(work) == []


# ------------------------------------------------------------------ which options apply


@functools.cache
def _parser() -> argparse.ArgumentParser:
    from streamcrypt.cli._parser import build_parser

    return build_parser()


def _namespace(command: str, **given: object) -> argparse.Namespace:
    args = _parser().parse_args([command])
    for name, value in given.items():
        setattr(args, name, value)
    return args


def test_one_table_says_which_options_each_format_takes() -> None:
    """Every option a format does not take is refused with the reason the table gives
    (or naming --format when the user gave it); every option it takes passes."""
    from streamcrypt.cli import _crypt
    from streamcrypt.cli._errors import EXIT_USAGE, CliError
    from streamcrypt.codecs import FORMATS

    dests = {*vars(_namespace("encrypt")), *vars(_namespace("decrypt"))}
    assert set(_crypt._FORMAT_OPTIONS) <= dests
    names = {name for name, _ in _crypt._USES}
    assert names <= set(FORMATS)
    assert set(_crypt._USES) == {(n, d) for n in names for d in (False, True)}
    samples: dict[str, object] = {"recipient": ["x"], "recipients_file": ["x"]}
    samples |= {"identity": ["x"], "context": ["a=b"], "armor": True, "passphrase": True}
    checked = 0
    for (name, decrypting), use in _crypt._USES.items():
        assert use.takes <= set(_crypt._FORMAT_OPTIONS), name
        keys = _crypt._Keys()
        command = "decrypt" if decrypting else "encrypt"
        for option in _crypt._FORMAT_OPTIONS:
            value = samples.get(option, "x")
            args = _namespace(command, **{option: value})
            if option in use.takes:
                _crypt._check_options(args, keys, name, decrypting)
                continue
            with pytest.raises(CliError) as raised:
                _crypt._check_options(args, keys, name, decrypting)
            flag = "--" + option.replace("_", "-")
            assert raised.value.code == EXIT_USAGE
            assert str(raised.value) == f"{flag} does not apply: {use.why}"
            forced = _namespace(command, format="native", **{option: value})
            with pytest.raises(CliError, match=f"^{flag} does not apply to --format "):
                _crypt._check_options(forced, keys, name, decrypting)
            checked += 1
    assert checked > 60
