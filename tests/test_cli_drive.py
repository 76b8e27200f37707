"""How the command drives its stages (streamcrypt.cli._drive): in turns by several threads
for a regular file, sequentially otherwise. Run in-process with small pieces, so that many
pieces, segments straddling pieces and several threads are exercised on little data."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from streamcrypt.abc import Buffer, Transform
from streamcrypt.cli import _drive
from streamcrypt.codecs._segmented import SegmentedEncryptor
from streamcrypt.codecs.age import AgeCodec, AgeDecryptor, AgeEncryptor, X25519Identity
from streamcrypt.codecs.armor import ArmorDecoder, ArmorEncoder
from streamcrypt.errors import AuthenticationError, TruncatedStreamError

KEY = bytes(range(32))
CHUNK = 65536
IDENTITY = X25519Identity.generate()
SIZES = [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK, 5 * CHUNK + 12345]


def reader(data: bytes, fail_at: int | None = None) -> tuple[Callable[[int], bytes], list[int]]:
    """A ``read(n)`` over ``data`` that checks it is never called by two threads at once
    (and raises OSError on call number ``fail_at``); also the sizes it was asked for."""
    pos = 0
    busy = threading.Lock()
    asked: list[int] = []

    def read(n: int) -> bytes:
        nonlocal pos
        assert busy.acquire(blocking=False), "read called by two threads at once"
        try:
            asked.append(n)
            if fail_at is not None and len(asked) == fail_at:
                raise OSError(5, "Input/output error")
            # Pieces of random length up to n: a read may return less than asked.
            take = random.randint(1, n) if pos < len(data) else 0
            piece = data[pos : pos + take]
            pos += len(piece)
            return piece
        finally:
            busy.release()

    return read, asked


def run(
    stages: list[Transform], data: bytes, threads: int, **kw: int | None
) -> tuple[bytes, BaseException | None]:
    out: list[bytes] = []

    def write(b: Buffer) -> None:
        out.append(bytes(b))

    read, _ = reader(data, **kw)
    try:
        _drive.drive(stages, read, write, threads=threads)
    except Exception as exc:
        return b"".join(out), exc
    return b"".join(out), None


@pytest.fixture(autouse=True)
def small_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_drive, "PIECE_SIZE", 10_000)
    monkeypatch.setattr(_drive, "SEQUENTIAL_SIZE", 30_000)
    random.seed(7)


@pytest.mark.parametrize("jitter", [False, True])
@pytest.mark.parametrize("threads", [1, 2, 4])
@pytest.mark.parametrize("size", SIZES)
def test_output_is_the_sequential_transforms(
    threads: int, size: int, jitter: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In turns or not, the output is byte for byte what the transform gives at once,
    also when pieces finish out of order (``jitter``: each run sleeps 0-2 ms first)."""
    if jitter:
        from streamcrypt.engine import run_verified as real

        def late(*args: Any, **kw: Any) -> tuple[bytes, Exception | None]:
            time.sleep(random.random() / 500)
            return real(*args, **kw)

        monkeypatch.setattr(_drive, "run_verified", late)
    data = random.Random(size).randbytes(size)
    reference = SegmentedEncryptor(AgeCodec(KEY), b"HEADER")
    expected = reference.update(data) + reference.finalize()
    got, error = run([SegmentedEncryptor(AgeCodec(KEY), b"HEADER")], data, threads)
    assert error is None and got == expected


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("armored", [False, True])
def test_round_trip_with_plain_stages_before_and_after(threads: int, armored: bool) -> None:
    """A plain stage after the segmented one (armor) and before it (armor decoding)."""
    data = random.randbytes(4 * CHUNK + 777)
    encrypt: list[Transform] = [AgeEncryptor(recipients=IDENTITY.recipient)]
    decrypt: list[Transform] = [AgeDecryptor(identities=IDENTITY)]
    if armored:
        encrypt.append(ArmorEncoder())
        decrypt.insert(0, ArmorDecoder())
    sealed, error = run(encrypt, data, threads)
    assert error is None and sealed.startswith(b"-----BEGIN AGE" if armored else b"age-")
    opened, error = run(decrypt, sealed, threads)
    assert error is None and opened == data


@pytest.mark.parametrize("threads", [1, 3])
def test_a_failure_comes_after_everything_that_verified(threads: int) -> None:
    """A tampered chunk: every chunk before it is written, nothing after, then the
    failure; a truncated stream likewise."""
    data = random.randbytes(6 * CHUNK)
    sealed, _ = run([AgeEncryptor(recipients=IDENTITY.recipient)], data, 1)
    header = len(sealed) - 6 * (CHUNK + 16)  # the sixth chunk is the final one
    bad = bytearray(sealed)
    bad[header + 3 * (CHUNK + 16) + 5] ^= 1  # in chunk 3
    opened, error = run([AgeDecryptor(identities=IDENTITY)], bytes(bad), threads)
    assert isinstance(error, AuthenticationError)
    assert opened == data[: 3 * CHUNK]
    cut = sealed[: header + 4 * (CHUNK + 16)]
    opened, error = run([AgeDecryptor(identities=IDENTITY)], cut, threads)
    assert isinstance(error, TruncatedStreamError) and opened == data[: 3 * CHUNK]


@pytest.mark.parametrize("threads", [1, 3])
def test_a_read_error_comes_after_the_pieces_before_it(threads: int) -> None:
    data = bytes(200_000)
    out, error = run([SegmentedEncryptor(AgeCodec(KEY), b"H")], data, threads, fail_at=6)
    assert isinstance(error, OSError) and error.errno == 5
    reference = SegmentedEncryptor(AgeCodec(KEY), b"H")
    whole = reference.update(data) + reference.finalize()
    assert whole.startswith(out)  # in order, nothing out of place


def workers() -> int:
    """Threads of the engine's pool running work (the helpers of the turns)."""
    from streamcrypt.engine import _offload

    return _offload._pool.busy if _offload._pool is not None else 0


def test_turns_ask_for_pieces_and_stop_their_threads() -> None:
    """In turns, reads ask for PIECE_SIZE bytes, at most MAX_THREADS threads work (the
    calling one and helpers on the engine's pool), and no helper outlives the call."""
    read, asked = reader(bytes(300_000))
    seen: list[int] = []

    def counting(n: int) -> bytes:
        seen.append(workers())
        time.sleep(0.002)  # slow enough that every helper has started
        return read(n)

    stage = SegmentedEncryptor(AgeCodec(KEY), b"")
    _drive.drive([stage], counting, lambda b: None, threads=3 * _drive.MAX_THREADS)
    assert set(asked) == {_drive.PIECE_SIZE}
    assert max(seen) == _drive.MAX_THREADS - 1
    assert workers() == 0


def test_a_failing_write_stops_every_thread() -> None:
    calls = 0

    def write(b: Buffer) -> None:
        nonlocal calls
        calls += 1
        if calls == 3:
            raise BrokenPipeError(32, "Broken pipe")

    read, _ = reader(bytes(300_000))
    with pytest.raises(BrokenPipeError):
        _drive.drive([SegmentedEncryptor(AgeCodec(KEY), b"")], read, write, threads=4)
    assert calls == 3 and workers() == 0


def test_age_tight_loop_reports_the_failing_chunk() -> None:
    """Jobs of many chunks (age's own loop): a tampered chunk in the middle gives the
    error open_segment gives it, after the chunks before it."""
    from streamcrypt.engine import run_verified

    data = random.randbytes(8 * CHUNK)
    sealed, _ = run([AgeEncryptor(recipients=IDENTITY.recipient)], data, 1)
    header = len(sealed) - 8 * (CHUNK + 16)
    bad = bytearray(sealed)
    bad[header + 5 * (CHUNK + 16) + 100] ^= 1
    decryptor = AgeDecryptor(identities=IDENTITY)
    jobs = decryptor.feed(bytes(bad))
    # The last chunk is held; the tampered one is inside a job of many chunks.
    assert sum(job.count for job in jobs) == 7 and jobs[-1].count >= 6
    out, error = run_verified(jobs, None)
    assert isinstance(error, AuthenticationError) and "chunk 5 " in str(error)
    assert out == data[: 5 * CHUNK]
