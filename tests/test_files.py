"""Async encrypted files: round trips, random access, atomic writes, crashes, memory."""

from __future__ import annotations

import gc
import io
import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
import weakref
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
import pyrage
import pytest
from anyio.abc import ByteReceiveStream, ByteSendStream

import streamcrypt
from streamcrypt import decrypt_bytes, encrypt_bytes
from streamcrypt.codecs import SegmentJob, aws, container, rclone
from streamcrypt.codecs.age import X25519Identity
from streamcrypt.engine import DEFAULT_POLICY, OffloadPolicy, _memory
from streamcrypt.errors import (
    AuthenticationError,
    BrokenTransformError,
    FormatError,
    InvalidParameterError,
    InvalidSignatureError,
    LimitExceededError,
    TruncatedStreamError,
    UnknownKeyError,
    UnsupportedFormatError,
)
from streamcrypt.transports import EncryptedFile, _file_read, open_file, remove_stale_temporaries

pytestmark = pytest.mark.anyio

KEY = bytes(range(32))
AGE_ID = X25519Identity.generate()
OTHER_KEY = bytes(range(1, 33))
SEG = 1024
CT_SEG = SEG + 16
#: Forces every seal and open batch onto worker threads, in many small batches.
THREADED = OffloadPolicy(inline_limit=0, batch_size=4096, max_in_flight=2, adaptive=False)
POLICIES = [pytest.param(None, id="inline"), pytest.param(THREADED, id="threaded")]
ROOT = Path(__file__).resolve().parent.parent


def plaintext(size: int, seed: int = 0) -> bytes:
    return random.Random(seed).randbytes(size)


async def write_file(
    path: Path, data: bytes, *, policy: OffloadPolicy | None = None, pieces: int = 1, **kw: Any
) -> None:
    rng = random.Random(len(data))
    cuts = sorted(rng.randrange(len(data) + 1) for _ in range(pieces - 1))
    async with open_file(path, "wb", key=KEY, segment_size=SEG, policy=policy, **kw) as f:
        prev = 0
        for cut in [*cuts, len(data)]:
            assert await f.write(data[prev:cut]) == cut - prev
            prev = cut
        assert await f.tell() == len(data)


def header_size(path: Path) -> int:
    raw = path.read_bytes()
    return container.layout(KEY, raw, len(raw)).header_size


def only_file(directory: Path) -> list[str]:
    return sorted(os.listdir(directory))


# ---------------------------------------------------------------------------------------
# Round trips
# ---------------------------------------------------------------------------------------

SIZES = [
    0,
    1,
    SEG - 1,
    SEG,
    SEG + 1,
    2 * SEG - 1,
    2 * SEG,
    2 * SEG + 1,
    5000,
    10 * SEG,
    10 * SEG + 1,
]


@pytest.mark.parametrize("policy", POLICIES)
async def test_round_trip_sizes(tmp_path: Path, policy: OffloadPolicy | None) -> None:
    for size in SIZES:
        data = plaintext(size, size)
        path = tmp_path / f"f{size}.enc"
        await write_file(path, data, policy=policy, pieces=1 + size % 7)
        assert decrypt_bytes(path.read_bytes(), KEY) == data  # a valid container
        async with open_file(path, "rb", key=KEY, policy=policy) as f:
            assert f.size == size
            assert f.seekable
            assert await f.read() == data
            assert await f.read() == b""
            assert await f.tell() == size
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]


async def test_round_trip_default_policy_and_suites(tmp_path: Path) -> None:
    data = plaintext(300_000)
    for suite in container.SUITE_IDS:
        path = tmp_path / f"{suite}.enc"
        async with open_file(path, "wb", key=KEY, suite=suite) as f:
            await f.write(bytearray(data))  # a mutable buffer is copied, not kept
        async with open_file(path, "rb", key=KEY) as f:
            assert await f.read() == data
        assert container.read_header(path.read_bytes())[0].suite == suite  # type: ignore[index]


async def test_await_form_and_reuse_of_caller_buffer(tmp_path: Path) -> None:
    path = tmp_path / "a.enc"
    f = await open_file(path, "wb", key=KEY, segment_size=SEG)
    buf = bytearray(b"x" * 3000)
    await f.write(buf)
    buf[:] = b"y" * 3000  # reusing the buffer after write() must not change the file
    await f.aclose()
    await f.aclose()  # twice is harmless
    assert f.closed
    async with await open_file(path, "rb", key=KEY) as r:
        assert await r.read() == b"x" * 3000


# ---------------------------------------------------------------------------------------
# Random access
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("policy", POLICIES)
async def test_seek_tell_read_random(tmp_path: Path, policy: OffloadPolicy | None) -> None:
    data = plaintext(20 * SEG + 333, 7)
    path = tmp_path / "r.enc"
    await write_file(path, data)
    model = io.BytesIO(data)
    rng = random.Random(11)
    async with open_file(path, "rb", key=KEY, policy=policy) as f:
        for _ in range(300):
            op = rng.randrange(4)
            if op == 0:
                whence = rng.randrange(3)
                offset = (
                    rng.randrange(-len(data), len(data))
                    if whence
                    else rng.randrange(len(data) + 50)
                )
                if [0, model.tell(), len(data)][whence] + offset < 0:
                    with pytest.raises(InvalidParameterError):
                        await f.seek(offset, whence)
                    continue
                assert await f.seek(offset, whence) == model.seek(offset, whence)
            elif op == 1:
                n = rng.choice([0, 1, 17, SEG - 1, SEG, SEG + 1, 3 * SEG + 5, -1])
                assert await f.read(n) == model.read(n)
            elif op == 2:
                assert await f.tell() == model.tell()
            else:
                buf = bytearray(rng.randrange(1, 4000))
                got = await f.readinto(buf)
                want = model.read(len(buf))
                assert got == len(want)
                assert bytes(buf[:got]) == want


async def test_readinto_and_iteration(tmp_path: Path) -> None:
    data = plaintext(10 * SEG + 77, 3)
    path = tmp_path / "i.enc"
    await write_file(path, data, pieces=5)
    async with open_file(path, "rb", key=KEY, policy=THREADED) as f:
        buf = bytearray(100)
        assert await f.readinto(memoryview(buf)) == 100
        assert buf == data[:100]
        chunks = [chunk async for chunk in f]
        assert len(chunks) > 1  # pieces of the policy's batch size
        assert b"".join(chunks) == data[100:]
        assert await f.readinto(buf) == 0
        await f.seek(-10, io.SEEK_END)
        assert b"".join([c async for c in f]) == data[-10:]


async def test_reads_only_needed_segments(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = plaintext(100 * SEG + 10, 5)
    path = tmp_path / "n.enc"
    await write_file(path, data)
    read: list[int] = []
    real, real_into = os.pread, os.preadv

    def counting(fd: int, n: int, offset: int) -> bytes:
        out = real(fd, n, offset)
        read.append(len(out))
        return out

    def counting_into(fd: int, buffers: list[memoryview], offset: int) -> int:
        n = real_into(fd, buffers, offset)
        read.append(n)
        return n

    monkeypatch.setattr(os, "pread", counting)
    monkeypatch.setattr(os, "preadv", counting_into)
    async with open_file(path, "rb", key=KEY) as f:
        opened = sum(read)
        # the first bytes that tell the format, the header, and the final segment (10
        # bytes + tag) whose flag proves the length
        assert opened <= 64 + 4096 + 10 + 16
        read.clear()
        await f.seek(50 * SEG + 10)
        assert await f.read(20) == data[50 * SEG + 10 : 50 * SEG + 30]
        assert sum(read) == CT_SEG  # exactly one segment
        read.clear()
        await f.seek(80 * SEG + 1000)  # random reads: exactly the segments they cover
        assert await f.read(3 * SEG) == data[80 * SEG + 1000 : 83 * SEG + 1000]
        assert sum(read) == 4 * CT_SEG
        read.clear()
        await f.seek(-5, io.SEEK_END)
        assert await f.read() == data[-5:]
        assert sum(read) == 10 + 16  # the final (short) segment only
        read.clear()
        await f.seek(20 * SEG + 30)
        for pos in range(20 * SEG + 30, 23 * SEG, 100):  # small sequential reads
            assert await f.read(100) == data[pos : pos + 100]
    # Segments 20-23, each read once, and (reads going forward) read-ahead in spans that
    # start at one read's size (one segment) and double: the three spans the reads
    # consumed (1, 2 and 4 segments) and at most a window of spans queued after them (as
    # many as half batch_size x max_in_flight holds in spans of _SPAN, at least
    # max_in_flight); closing waited for the read-ahead in flight.
    policy = OffloadPolicy()
    window = policy.batch_size * policy.max_in_flight // 2 // _file_read._SPAN
    spans = 3 + max(policy.max_in_flight, window)
    assert 4 * CT_SEG <= sum(read) <= (2**spans - 1) * CT_SEG
    assert all(n == CT_SEG for n in read)


async def test_sequential_reads_return_the_objects_decrypted_into(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reads that continue each other, of whole segments, return the very objects the
    workers decrypted into (issue 28: a read costs the read and the decryption, no copy
    and no per-segment planning on the loop)."""
    data = plaintext(64 * SEG, 8)
    path = tmp_path / "u.enc"
    await write_file(path, data)
    made: list[bytes] = []  # kept alive, so identities stay unique
    real = _memory.Fresh.finish

    def finish(self: _memory.Fresh, written: int) -> bytes:
        out = real(self, written)
        made.append(out)
        return out

    monkeypatch.setattr(_memory.Fresh, "finish", finish)
    policy = OffloadPolicy(inline_limit=0, batch_size=32 * SEG, adaptive=False)
    async with open_file(path, "rb", key=KEY, policy=policy) as f:
        for i in range(8):
            got = await f.read(8 * SEG)
            assert got == data[i * 8 * SEG : (i + 1) * 8 * SEG]
            assert any(got is m for m in made), i


async def test_inline_reads_read_the_next_piece_while_this_one_is_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``policy=None`` the cipher runs on the loop and the reads on a worker: while
    reads go forward, the next piece's ciphertext is read while this one is opened."""
    data = plaintext(6 * 16 * SEG, 9)
    path = tmp_path / "o.enc"
    await write_file(path, data)
    events: list[tuple[str, int]] = []
    real_pread = _file_read._pread_into
    real_open = SegmentJob.run_into

    def pread(fd: int, offset: int, view: memoryview) -> int:
        events.append(("read", offset))
        return real_pread(fd, offset, view)

    def open_(self: SegmentJob, out: memoryview) -> tuple[int, Exception | None]:
        time.sleep(0.05)  # a slow cipher: the worker has time to start the next read
        events.append(("opened", self.first_index))
        return real_open(self, out)

    async with open_file(path, "rb", key=KEY, policy=None) as f:
        monkeypatch.setattr(_file_read, "_pread_into", pread)
        monkeypatch.setattr(SegmentJob, "run_into", open_)
        for i in range(6):
            assert await f.read(16 * SEG) == data[i * 16 * SEG : (i + 1) * 16 * SEG]
    reads = [n for kind, n in events if kind == "read"]
    assert len(reads) >= 6
    for k in range(5):  # the read of piece k + 1 started before piece k was opened
        assert events.index(("read", reads[k + 1])) < events.index(("opened", 16 * k)), events


async def test_reads_ahead_read_the_next_piece_while_this_one_is_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 28: with a policy, reads that go forward (from the first one on) have the
    next piece's ciphertext read while this piece is opened, on another worker. Observed,
    not timed: opening a piece waits until the read of the next one has begun; were the
    next read only issued once this piece is taken back, the wait would run out."""
    pieces, piece = 6, 16 * SEG  # one read = one span = one job
    data = plaintext(pieces * piece, 10)
    path = tmp_path / "p.enc"
    await write_file(path, data)
    first = header_size(path)
    began = [threading.Event() for _ in range(pieces)]
    overlapped: list[tuple[int, bool]] = []
    real_read = _file_read._pread_into

    def read(fd: int, offset: int, view: memoryview) -> int:
        began[(offset - first) // (16 * CT_SEG)].set()
        return real_read(fd, offset, view)

    policy = OffloadPolicy(batch_size=piece, max_in_flight=2)
    async with open_file(path, "rb", key=KEY, policy=policy) as f:
        codec = type(f._impl._layout.codec)  # type: ignore[union-attr]
        real_open = codec.run_segments

        def open_(
            self: Any, sealing: bool, index: int, count: int, *args: Any
        ) -> tuple[int, Exception | None]:
            k = index // 16
            if k + 1 < pieces:
                overlapped.append((k, began[k + 1].wait(timeout=5)))
            return real_open(self, sealing, index, count, *args)

        monkeypatch.setattr(_file_read, "_pread_into", read)
        monkeypatch.setattr(codec, "run_segments", open_)
        for k in range(pieces):
            assert await f.read(piece) == data[k * piece : (k + 1) * piece]
    assert overlapped == [(k, True) for k in range(pieces - 1)]


async def test_a_read_job_reads_its_object_in_one_pread_and_opens_it_in_one_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 28: from a descriptor, each output object (about a read) is one job: one
    ``pread`` of its segments' ciphertext (up to ``_READ`` plaintext bytes' worth) and
    one batch loop opening them straight into the object the read returns. The old
    reader cut each 1 MiB span into four jobs of 256 KiB: four ``pread`` calls, which
    copy out of the page cache at a higher cost per byte, and four job set-ups."""
    data = plaintext(2048 * SEG, 14)
    path = tmp_path / "j.enc"
    await write_file(path, data)
    preads: list[int] = []
    runs: list[int] = []
    real_read = _file_read._pread_into

    def read(fd: int, offset: int, view: memoryview) -> int:
        preads.append(len(view))
        return real_read(fd, offset, view)

    read_size = 512 * SEG  # 512 KiB: the old reader cut it in two jobs
    policy = OffloadPolicy(batch_size=read_size, max_in_flight=2)
    async with open_file(path, "rb", key=KEY, policy=policy) as f:
        codec = type(f._impl._layout.codec)  # type: ignore[union-attr]
        real_run = codec.run_segments

        def run(self: Any, sealing: bool, index: int, count: int, *args: Any) -> Any:
            runs.append(count)
            return real_run(self, sealing, index, count, *args)

        monkeypatch.setattr(_file_read, "_pread_into", read)
        monkeypatch.setattr(codec, "run_segments", run)
        for k in range(4):
            assert await f.read(read_size) == data[k * read_size : (k + 1) * read_size]
        # The last object also holds the empty final segment (the file ends on a
        # segment boundary). Workers run jobs in any order.
        assert sorted(preads) == [512 * CT_SEG] * 3 + [512 * CT_SEG + 16]
        assert sorted(runs) == [512, 512, 512, 513]
        # A job reads at most _READ plaintext bytes' segments at a time.
        monkeypatch.setattr(_file_read, "_READ", 200 * SEG)
        preads.clear()
        runs.clear()
        await f.seek(0)  # one read's span, alone: read-ahead starts with the next read
        assert await f.read(read_size) == data[:read_size]
        assert preads == [200 * CT_SEG, 200 * CT_SEG, 112 * CT_SEG]
        assert runs == [200, 200, 112]


@pytest.mark.parametrize("at_once", [1, 3000], ids=["one-segment", "several"])
@pytest.mark.parametrize("fmt", ["native", "age", "rclone", "aws-0x0478", "aws-0x0578"])
async def test_every_format_reads_the_same_in_pieces_of_any_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str, at_once: int
) -> None:
    """A read job reads its segments ``_READ`` plaintext bytes' worth at a time; the
    piece holding the final segment may be longer than a full one (an AWS final frame
    carries 8 bytes more than a regular one): whatever the piece size, every format
    reads back the bytes it wrote, whole, from a seek and to the end."""
    monkeypatch.setattr(_file_read, "_READ", at_once)
    policy = OffloadPolicy(inline_limit=0, batch_size=1 << 20, adaptive=False)
    path = tmp_path / "f"
    identity = X25519Identity.generate()
    size = 3 * 65536
    opts: dict[str, Any] = {"identities": [identity]} if fmt == "age" else {"password": "pw"}
    if fmt == "native":
        size, opts = 40 * SEG, {"key": KEY}
    elif fmt.startswith("aws"):
        size, opts = 40 * FRAME, {"key": RING, "encryption_context": AWS_CONTEXT}

    async def write(data: bytes) -> None:
        if fmt == "native":
            await write_file(path, data)
        elif fmt.startswith("aws"):
            await _write_aws(path, data, fmt[4:])
        else:
            theirs = {"recipients": [identity.recipient]} if fmt == "age" else opts
            async with open_file(path, "wb", format=fmt, **theirs) as f:
                await f.write(data)

    for cut in (size, size - 3):  # ending on a segment boundary, and 3 bytes short of it
        data = plaintext(cut, 15)
        await write(data)
        async with open_file(path, "rb", policy=policy, **opts) as f:
            assert await f.read() == data
            await f.seek(cut // 3)
            assert await f.read(cut // 2) == data[cut // 3 : cut // 3 + cut // 2]
            assert await f.read() == data[cut // 3 + cut // 2 :]


async def test_read_ahead_deepens_only_when_the_workers_run_out_of_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 28: how many spans are read ahead is measured, not a constant. It starts at
    one per worker plus the one a read waits for; a consumer slower than the workers
    leaves them with nothing to do, so it grows, one span a read, never past the cap
    (half ``batch_size x max_in_flight`` in spans); workers slower than the consumer are
    never short of work, so it stays where it started."""
    data = plaintext(512 * SEG, 16)
    path = tmp_path / "d.enc"
    await write_file(path, data)
    read = 16 * SEG  # one span, one output object
    policy = OffloadPolicy(batch_size=read, max_in_flight=8, workers=2)
    cap = policy.max_in_flight  # more than half batch_size x max_in_flight holds
    in_flight: list[int] = []
    async with open_file(path, "rb", key=KEY, policy=policy) as f:
        reader = f._impl
        assert isinstance(reader, _file_read._RandomReader)
        assert reader._depth == policy.workers + 1
        for k in range(24):  # a slow consumer
            assert await f.read(read) == data[k * read : (k + 1) * read]
            in_flight.append(len(reader._spans))
            await anyio.sleep(0.01)
        assert reader._depth == cap, (reader._depth, in_flight)
        assert max(in_flight) <= cap
    async with open_file(path, "rb", key=KEY, policy=policy) as f:
        reader = f._impl
        assert isinstance(reader, _file_read._RandomReader)
        codec = type(reader._layout.codec)
        real_run = codec.run_segments

        def slow(self: Any, *args: Any) -> Any:
            time.sleep(0.05)  # slow workers
            return real_run(self, *args)

        monkeypatch.setattr(codec, "run_segments", slow)
        for k in range(12):
            assert await f.read(read) == data[k * read : (k + 1) * read]
        # The workers always had a span to take when a read came for its own (a loop
        # delayed past a whole span on a loaded machine may add one).
        assert reader._depth <= policy.workers + 2, reader._depth


async def test_read_ahead_holds_the_loop_for_one_span_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 28: the window of spans in flight grows by one span a read-ahead call, so
    the loop is held for one span's jobs at a time, however deep the window (filled at
    once, a window of six held it for 165-460 us on the first read). Counted: the spans
    a read queues before it returns are at most its own and one ahead on each side of
    the wait."""
    data = plaintext(4 << 20, 13)
    path = tmp_path / "w.enc"
    await write_file(path, data)
    queued: list[int] = []
    real = _file_read._RandomReader._queue_span

    def count(self: Any, start: int, span: int) -> None:
        queued.append(start)
        real(self, start, span)

    monkeypatch.setattr(_file_read._RandomReader, "_queue_span", count)
    read = 64 * SEG
    per_read: list[int] = []
    async with open_file(path, "rb", key=KEY) as f:  # the default: a window of six
        for k in range(len(data) // read):
            queued.clear()
            assert await f.read(read) == data[k * read : (k + 1) * read]
            per_read.append(len(queued))
    assert max(per_read) <= 3, per_read
    assert sum(per_read) > len(data) // (1 << 20)  # read-ahead ran: spans of up to 1 MiB


def ciphertext_buffers(monkeypatch: pytest.MonkeyPatch) -> list[weakref.ref[Any]]:
    """Weak references to every ciphertext buffer the reader makes from now on."""
    live: list[weakref.ref[Any]] = []
    real_mmap = _file_read.mmap.mmap

    class Mmap:
        @staticmethod
        def mmap(fileno: int, size: int) -> Any:
            buffer = real_mmap(fileno, size)
            live.append(weakref.ref(buffer))
            return buffer

    monkeypatch.setattr(_file_read, "mmap", Mmap)
    return live


async def test_seeks_drop_the_read_ahead_they_leave(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review 6 F3: a seek drops the spans read ahead; memory stays within the cap
    docs/ENGINE.md states (plaintext in flight: at most ``batch_size x max_in_flight``;
    ciphertext: one buffer per job running at once) however many seeks there were.
    Counted, not measured: the live read jobs (each holds its output slot) and the live
    ciphertext buffers; a dropped scheduler that kept its batches kept their jobs."""
    data = plaintext(8 << 20, 11)
    path = tmp_path / "s.enc"
    await write_file(path, data)
    live = ciphertext_buffers(monkeypatch)
    policy = OffloadPolicy(batch_size=1 << 20, max_in_flight=4)
    read = 16 * SEG
    async with open_file(path, "rb", key=KEY, policy=policy) as f:
        rng = random.Random(12)
        for _ in range(30):
            at = rng.randrange(len(data) - 2 * read)
            await f.seek(at)
            assert await f.read(read) == data[at : at + read]
            assert await f.read(read) == data[at + read : at + 2 * read]  # reads ahead
        await anyio.sleep(0.2)  # what still ran finishes
        gc.collect()
        in_flight = [job for job in gc.get_objects() if isinstance(job, _file_read._PreadJob)]
        assert sum(job.out_size for job in in_flight) <= policy.batch_size * policy.max_in_flight
        buffers = [buffer for ref in live if (buffer := ref()) is not None]
        assert len(buffers) <= threading.active_count(), len(buffers)
        assert all(len(buffer) <= 2 * read for buffer in buffers)
    assert len(in_flight) > 4  # the spans read ahead were in flight


@pytest.mark.parametrize("policy", [DEFAULT_POLICY, None], ids=["default", "None"])
async def test_a_closed_reader_keeps_no_plaintext_or_buffers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, policy: OffloadPolicy | None
) -> None:
    """Review 8a: after ``aclose`` the file object a caller keeps held its last span's
    plaintext and its ciphertext buffers; now they go with the file."""
    data = plaintext(4 << 20, 12)
    path = tmp_path / "c.enc"
    await write_file(path, data)
    live = ciphertext_buffers(monkeypatch)
    f = await open_file(path, "rb", key=KEY, policy=policy)
    assert await f.read(1 << 20) == data[: 1 << 20]
    await f.aclose()
    gc.collect()
    assert live and [ref for ref in live if ref() is not None] == []
    readers = [o for o in gc.get_objects() if isinstance(o, _file_read._RandomReader)]
    assert len(readers) == 1 and readers[0]._cache == []
    del f


@pytest.mark.parametrize("seed", range(4))
async def test_a_cancelled_inline_read_has_no_effect(tmp_path: Path, seed: int) -> None:
    """Cancelling a ``policy=None`` read (its read-ahead in flight) changes nothing: the
    position stays, and the file reads on correctly."""
    rng = random.Random(seed)
    data = rng.randbytes(1 << 20)
    path = tmp_path / "x.enc"
    await write_file(path, data)
    async with open_file(path, "rb", key=KEY, policy=None) as r:
        got = bytearray()
        for _ in range(12):
            with anyio.move_on_after(rng.random() * 0.002) as scope:
                got += await r.read(rng.choice([1 << 14, 1 << 16, 100_000]))
            if scope.cancelled_caught:
                assert await r.tell() == len(got)
        got += await r.read()
        assert bytes(got) == data


class CountingFile:
    """An async file-like wrapper counting the bytes read through it."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.count = 0

    async def read(self, n: int = -1) -> bytes:
        data: bytes = await self.inner.read(n)
        self.count += len(data)
        return data

    async def seek(self, offset: int, whence: int = 0) -> int:
        pos: int = await self.inner.seek(offset, whence)
        return pos

    async def tell(self) -> int:
        pos: int = await self.inner.tell()
        return pos

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_wrap_anyio_file_random_access(tmp_path: Path) -> None:
    data = plaintext(40 * SEG, 9)
    path = tmp_path / "w.enc"
    prefix = b"PREFIX-BEFORE-THE-CONTAINER"
    async with await anyio.open_file(path, "wb") as raw:
        await raw.write(prefix)
        async with EncryptedFile.wrap(
            raw, "wb", key=KEY, segment_size=SEG, close_wrapped=False
        ) as f:
            await f.write(data)
        await raw.write(b"")
    async with await anyio.open_file(path, "rb") as raw:
        await raw.seek(len(prefix))  # the container starts at the current position
        counting = CountingFile(raw)
        async with EncryptedFile.wrap(counting, "rb", key=KEY) as f:
            assert f.seekable and f.size == len(data)
            start = counting.count
            await f.seek(20 * SEG + 1)
            assert await f.read(SEG - 1) == data[20 * SEG + 1 : 21 * SEG]
            assert counting.count - start == CT_SEG
            await f.seek(0)
            assert await f.read() == data


class ChunkReceiver(ByteReceiveStream):
    """A non-seekable byte stream handing out fixed chunks."""

    def __init__(self, data: bytes, step: int) -> None:
        self.chunks = [data[i : i + step] for i in range(0, len(data), step)]
        self.closed = False

    async def receive(self, max_bytes: int = 65536) -> bytes:
        if not self.chunks:
            raise anyio.EndOfStream
        return self.chunks.pop(0)

    async def aclose(self) -> None:
        self.closed = True


class Collector(ByteSendStream):
    def __init__(self) -> None:
        self.data = bytearray()
        self.closed = False

    async def send(self, item: bytes) -> None:
        self.data += item

    async def aclose(self) -> None:
        self.closed = True


@pytest.mark.parametrize("policy", POLICIES)
async def test_wrap_byte_streams_sequential(policy: OffloadPolicy | None) -> None:
    data = plaintext(7 * SEG + 99, 4)
    sink = Collector()
    async with EncryptedFile.wrap(sink, "wb", key=KEY, segment_size=SEG, policy=policy) as f:
        await f.write(data[:1000])
        await f.write(data[1000:])
    assert sink.closed
    assert decrypt_bytes(bytes(sink.data), KEY) == data
    source = ChunkReceiver(bytes(sink.data), 333)
    async with EncryptedFile.wrap(source, "rb", key=KEY, policy=policy) as f:
        assert not f.seekable and f.size is None
        assert await f.read(10) == data[:10]
        buf = bytearray(5)
        assert await f.readinto(buf) == 5 and buf == data[10:15]
        with pytest.raises(InvalidParameterError, match="cannot seek"):
            await f.seek(0)
        rest = b"".join([chunk async for chunk in f])
        assert rest == data[15:]
        assert await f.tell() == len(data)
    assert source.closed

    async def gen() -> AsyncIterator[bytes]:
        for i in range(0, len(sink.data), 1000):
            yield bytes(sink.data[i : i + 1000])

    async with EncryptedFile.wrap(gen(), "rb", key=KEY, policy=policy) as f:
        assert await f.read() == data


# ---------------------------------------------------------------------------------------
# Failures: keys, tampering, truncation, arguments
# ---------------------------------------------------------------------------------------


async def test_wrong_key_fails_at_open(tmp_path: Path) -> None:
    path = tmp_path / "k.enc"
    await write_file(path, plaintext(5000))
    with pytest.raises(AuthenticationError):
        async with open_file(path, "rb", key=OTHER_KEY):
            pytest.fail("the body must not run")
    with pytest.raises(AuthenticationError):
        async with open_file(path, "rb", key=KEY, aad=b"other context"):
            pytest.fail("the body must not run")
    with pytest.raises(AuthenticationError):
        async with EncryptedFile.wrap(ChunkReceiver(path.read_bytes(), 50), "rb", key=OTHER_KEY):
            pytest.fail("the body must not run")
    (tmp_path / "not.enc").write_bytes(b"hello, this is not a container at all")
    with pytest.raises(FormatError):
        async with open_file(tmp_path / "not.enc", "rb", key=KEY):
            pytest.fail("the body must not run")


@pytest.mark.parametrize("at_once", [None, 2 * SEG], ids=["whole", "pieces"])
async def test_tampered_segment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, at_once: int | None
) -> None:
    """One verdict whatever the reads and however a job reads its segments (``pieces``:
    the tampered segment is in a job's second ``pread``)."""
    if at_once is not None:
        monkeypatch.setattr(_file_read, "_READ", at_once)
    data = plaintext(10 * SEG + 500, 8)
    path = tmp_path / "t.enc"
    await write_file(path, data)
    raw = bytearray(path.read_bytes())
    raw[header_size(path) + 3 * CT_SEG + 5] ^= 1
    path.write_bytes(raw)
    async with open_file(path, "rb", key=KEY) as f:
        await f.seek(3 * SEG + 100)
        with pytest.raises(AuthenticationError):
            await f.read(10)
        assert await f.tell() == 3 * SEG + 100  # a failed read does not move
        await f.seek(2 * SEG)
        assert await f.read(SEG) == data[2 * SEG : 3 * SEG]
        await f.seek(4 * SEG)
        assert await f.read() == data[4 * SEG :]
        await f.seek(0)
        with pytest.raises(AuthenticationError):
            await f.read()
    async with open_file(path, "rb", key=KEY) as f:
        got = bytearray()
        with pytest.raises(AuthenticationError):
            async for chunk in f:
                got += chunk
        assert data.startswith(got)
    with pytest.raises(AuthenticationError):  # sequential: verified data, then the error
        async with EncryptedFile.wrap(ChunkReceiver(bytes(raw), 700), "rb", key=KEY) as f:
            await f.read()


async def test_truncated_files(tmp_path: Path) -> None:
    data = plaintext(10 * SEG + 500, 2)
    path = tmp_path / "full.enc"
    await write_file(path, data)
    raw = path.read_bytes()
    hs = header_size(path)
    at_open: list[tuple[int, type[Exception]]] = [
        (0, TruncatedStreamError),
        (10, TruncatedStreamError),
        (hs - 1, TruncatedStreamError),
        (hs, TruncatedStreamError),
        (hs + 3 * CT_SEG, TruncatedStreamError),  # as the stream path says
        (hs + 3 * CT_SEG + 5, TruncatedStreamError),
        (len(raw) - 500 - 16 + 3, TruncatedStreamError),
    ]
    for cut, error in at_open:
        cut_path = tmp_path / f"cut{cut}.enc"
        cut_path.write_bytes(raw[:cut])
        with pytest.raises(error):
            async with open_file(cut_path, "rb", key=KEY):
                pytest.fail("the body must not run")
    # Cut inside the final segment, past its tag size: opening checks the final segment,
    # which fails (a shortened final segment cannot be told from a tampered one).
    cut_path = tmp_path / "cut_tail.enc"
    cut_path.write_bytes(raw[:-100])
    with pytest.raises(AuthenticationError):
        async with open_file(cut_path, "rb", key=KEY):
            pytest.fail("the body must not run")
    # Cut at a segment boundary with a forged 16-byte "empty final segment" appended:
    # the length arithmetic accepts it, the final segment's tag does not.
    for k in (1, 5, 10):
        forged = tmp_path / f"forged{k}.enc"
        forged.write_bytes(raw[: hs + k * CT_SEG] + bytes(16))
        with pytest.raises(AuthenticationError):
            async with open_file(forged, "rb", key=KEY):
                pytest.fail("the body must not run")
    # Read front to back, a cut at a segment boundary is a truncation.
    with pytest.raises(TruncatedStreamError):
        async with EncryptedFile.wrap(
            ChunkReceiver(raw[: hs + 4 * CT_SEG], 1000), "rb", key=KEY
        ) as f:
            await f.read()


@pytest.mark.parametrize("mode", ["r", "w", "rt", "wt", "a", "ab", "r+b", "w+b", "x", "xb", "br"])
async def test_bad_modes(tmp_path: Path, mode: str) -> None:
    with pytest.raises(InvalidParameterError, match=r"text modes .* out of scope.*'rb' or 'wb'"):
        open_file(tmp_path / "m.enc", mode, key=KEY)
    with pytest.raises(InvalidParameterError, match="text modes"):
        EncryptedFile.wrap(Collector(), mode, key=KEY)
    assert not os.listdir(tmp_path)


async def test_bad_arguments(tmp_path: Path) -> None:
    path = tmp_path / "x.enc"
    with pytest.raises(UnsupportedFormatError, match="native"):
        open_file(path, "wb", key=KEY, format="tink")
    with pytest.raises(InvalidParameterError, match="key="):
        open_file(path, "wb")
    with pytest.raises(InvalidParameterError):
        open_file(path, "wb", key=KEY, passphrase="pw")
    with pytest.raises(InvalidParameterError):
        open_file(path, "rb", key=KEY, segment_size=4096)
    with pytest.raises(InvalidParameterError):
        open_file(path, "wb", format="age", key=KEY)
    with pytest.raises(InvalidParameterError):
        open_file(path, "wb", format="age", passphrase="pw", segment_size=SEG)
    with pytest.raises(InvalidParameterError, match="recipients="):
        open_file(path, "wb", format="age")
    with pytest.raises(InvalidParameterError, match="identities="):
        open_file(path, "rb", format="age", recipients=["age1xyz"])
    with pytest.raises(InvalidParameterError):  # the container's own check, at entry
        async with open_file(path, "wb", key=KEY, segment_size=10):
            pytest.fail("the body must not run")
    assert not os.listdir(tmp_path)
    with pytest.raises(FileNotFoundError):
        async with open_file(path, "rb", key=KEY):
            pytest.fail("the body must not run")


async def test_sequential_reader_stays_broken(tmp_path: Path) -> None:
    data = plaintext(10 * SEG, 13)
    raw = bytearray(encrypt_bytes(data, KEY, segment_size=SEG))
    hs = len(raw) - 10 * CT_SEG - 16
    raw[hs + 5 * CT_SEG + 1] ^= 0x80
    async with EncryptedFile.wrap(ChunkReceiver(bytes(raw), 700), "rb", key=KEY, policy=None) as f:
        with pytest.raises(AuthenticationError):
            await f.read()
        assert await f.read() == data[: 5 * SEG]  # verified before the failure
        for _ in range(2):  # never a silent end of file after a failure
            with pytest.raises(BrokenTransformError):
                await f.read(1)


async def test_bad_write_argument_does_not_break(tmp_path: Path) -> None:
    path = tmp_path / "b.enc"
    async with open_file(path, "wb", key=KEY) as f:
        with pytest.raises(TypeError):
            await f.write("text is out of scope")  # type: ignore[arg-type]
        await f.write(b"bytes")
    async with open_file(path, "rb", key=KEY) as r:
        assert await r.read() == b"bytes"


async def test_mode_and_closed_errors(tmp_path: Path) -> None:
    path = tmp_path / "c.enc"
    async with open_file(path, "wb", key=KEY) as w:
        with pytest.raises(InvalidParameterError, match="writing"):
            await w.read()
        with pytest.raises(InvalidParameterError):
            await w.seek(0)
        await w.write(b"abc")
    with pytest.raises(anyio.ClosedResourceError):
        await w.write(b"more")
    async with open_file(path, "rb", key=KEY) as r:
        with pytest.raises(InvalidParameterError, match="reading"):
            await r.write(b"x")
        with pytest.raises(InvalidParameterError):
            await r.seek(0, 7)
    with pytest.raises(anyio.ClosedResourceError):
        await r.read()
    assert "abc" not in repr(r) and "rb" in repr(r)


# ---------------------------------------------------------------------------------------
# Atomic writes
# ---------------------------------------------------------------------------------------


class Boom(Exception):
    pass


async def test_exception_in_block_leaves_destination(tmp_path: Path) -> None:
    path = tmp_path / "dest.enc"
    old = plaintext(5000, 1)
    await write_file(path, old)
    os.chmod(path, 0o640)
    before = path.read_bytes()
    with pytest.raises(Boom):
        async with open_file(path, "wb", key=KEY, segment_size=SEG, policy=THREADED) as f:
            await f.write(plaintext(50_000, 2))
            temps = [n for n in os.listdir(tmp_path) if n != "dest.enc"]
            assert len(temps) == 1 and temps[0].startswith(".dest.enc.streamcrypt-")
            assert temps[0].endswith(".tmp")
            raise Boom
    assert path.read_bytes() == before
    assert only_file(tmp_path) == ["dest.enc"]
    # a clean write replaces it, keeping the old file's permissions
    await write_file(path, b"new")
    assert only_file(tmp_path) == ["dest.enc"]
    assert os.stat(path).st_mode & 0o777 == 0o640
    async with open_file(path, "rb", key=KEY) as r:
        assert await r.read() == b"new"
    # no destination before: none after
    fresh = tmp_path / "fresh.enc"
    with pytest.raises(Boom):
        async with open_file(fresh, "wb", key=KEY) as f:
            await f.write(b"data")
            raise Boom
    assert only_file(tmp_path) == ["dest.enc"]


async def test_cancelled_write_leaves_destination(tmp_path: Path) -> None:
    path = tmp_path / "dest.enc"
    await write_file(path, b"old content")
    before = path.read_bytes()
    with anyio.move_on_after(0.05) as scope:
        async with open_file(path, "wb", key=KEY, policy=THREADED) as f:
            while True:
                await f.write(bytes(100_000))
    assert scope.cancelled_caught
    assert path.read_bytes() == before
    assert only_file(tmp_path) == ["dest.enc"]


async def test_io_runs_on_worker_threads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    loop_thread = threading.get_ident()
    calls: list[tuple[str, int]] = []

    def spy(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls.append((name, threading.get_ident()))
            return real(*args, **kwargs)

        return wrapper

    names = ("pread", "preadv", "write", "writev", "fsync", "replace", "open", "fstat", "close")
    for name in names:
        monkeypatch.setattr(os, name, spy(name, getattr(os, name)))
    path = tmp_path / "t.enc"
    data = plaintext(3 * SEG)
    await write_file(path, data, policy=None, pieces=3)
    async with open_file(path, "rb", key=KEY, policy=None) as f:
        assert await f.read() == data
    assert {"preadv", "writev", "fsync", "replace", "open"} <= {name for name, _ in calls}
    assert all(ident != loop_thread for _, ident in calls), calls
    # With a policy, the workers read and open the pieces; the loop, waiting for them,
    # never runs one of those jobs (it would read the file on the loop), not even one
    # that no worker has started: here the only worker is busy for a while.
    calls.clear()
    data = plaintext(64 * SEG)
    await write_file(path, data)
    with ThreadPoolExecutor(1) as executor:
        for policy in (THREADED, OffloadPolicy(batch_size=8 * SEG, executor=executor)):
            async with open_file(path, "rb", key=KEY, policy=policy) as f:
                executor.submit(time.sleep, 0.2)
                for k in range(16):
                    assert await f.read(4 * SEG) == data[k * 4 * SEG : (k + 1) * 4 * SEG]
                await f.seek(SEG // 2)
                assert await f.read(3 * SEG) == data[SEG // 2 : SEG // 2 + 3 * SEG]
    assert "preadv" in {name for name, _ in calls}
    assert all(ident != loop_thread for _, ident in calls), calls


# ---------------------------------------------------------------------------------------
# age
# ---------------------------------------------------------------------------------------


async def test_age_round_trip_and_interop(tmp_path: Path) -> None:
    identity = X25519Identity.generate()
    data = plaintext(3 * 65536 + 123, 6)
    path = tmp_path / "a.age"
    async with open_file(path, "wb", format="age", recipients=[identity.recipient]) as f:
        await f.write(data)
    theirs = pyrage.x25519.Identity.from_str(identity.to_string())
    assert pyrage.decrypt(path.read_bytes(), [theirs]) == data
    async with open_file(path, "rb", format="age", identities=[identity]) as f:
        assert f.size == len(data)
        await f.seek(2 * 65536 - 3)
        assert await f.read(10) == data[2 * 65536 - 3 : 2 * 65536 + 7]
        await f.seek(0)
        assert await f.read() == data
    # a file written by the age implementation, read by random access and sequentially
    recipient = pyrage.x25519.Recipient.from_str(str(identity.recipient))
    path.write_bytes(pyrage.encrypt(data, [recipient]))
    async with open_file(path, "rb", format="age", identities=[identity.to_string()]) as f:
        await f.seek(65536)
        assert await f.read(65536) == data[65536 : 2 * 65536]
    async with EncryptedFile.wrap(
        ChunkReceiver(path.read_bytes(), 4000), "rb", format="age", identities=[identity]
    ) as f:
        assert await f.read() == data
    with pytest.raises(UnknownKeyError):
        async with open_file(path, "rb", format="age", identities=[X25519Identity.generate()]):
            pytest.fail("the body must not run")


def test_open_takes_every_option_of_the_formats_it_opens() -> None:
    """open and EncryptedFile.wrap take every option a file format's writes / reads name,
    by the top-level calls' names and types (one vocabulary)."""
    import inspect

    from streamcrypt.transports._files import FORMATS

    calls = {
        "wb": inspect.signature(streamcrypt.encrypt).parameters,
        "rb": inspect.signature(streamcrypt.decrypt).parameters,
    }
    for opener in (open_file, EncryptedFile.wrap):
        params = inspect.signature(opener).parameters
        for fmt in FORMATS.values():
            for mode, names in (("wb", fmt.writes), ("rb", fmt.reads)):
                for name in names:
                    assert name in params, (opener, fmt.name, name)
                    want = calls[mode][name]
                    assert params[name].kind is inspect.Parameter.KEYWORD_ONLY
                    assert (params[name].annotation, params[name].default) == (
                        want.annotation,
                        want.default,
                    ), (opener, name)


async def test_open_passes_the_reading_and_writing_options(tmp_path: Path) -> None:
    """The options beyond key/suite/segment size reach the format's encryptor and layout;
    the one a file cannot honour (armor: no random access) is refused typed."""
    path = tmp_path / "f"
    # age: work_factor= is written, max_work_factor= caps it on reading.
    async with open_file(path, "wb", format="age", passphrase="pw", work_factor=3) as f:
        await f.write(b"capped")
    assert b"scrypt" in path.read_bytes()[:200] and b" 3\n" in path.read_bytes()[:200]
    with pytest.raises(LimitExceededError):
        async with open_file(path, "rb", passphrase="pw", max_work_factor=2):
            pass
    async with open_file(path, "rb", passphrase="pw", max_work_factor=3) as f:
        assert await f.read() == b"capped"
    with pytest.raises(InvalidParameterError, match="random access"):
        open_file(path, "wb", format="age", passphrase="pw", armor=True)
    # rclone: expected_size= catches a file cut at a block boundary.
    data = plaintext(3 * 65536)
    async with open_file(path, "wb", format="rclone", password="pw") as f:
        await f.write(data)
    path.write_bytes(path.read_bytes()[: rclone.encrypted_size(65536)])
    async with open_file(path, "rb", password="pw") as f:  # no end marker: shorter
        assert f.size == 65536
    with pytest.raises(TruncatedStreamError):
        async with open_file(path, "rb", password="pw", expected_size=len(data)):
            pass
    # AWS: legacy suites with allow_legacy=, the data-key cap, unverified reads.
    async with open_file(
        path, "wb", format="aws", key=RING, suite="0x0178", allow_legacy=True
    ) as f:
        await f.write(b"legacy")
    with pytest.raises(UnsupportedFormatError):
        async with open_file(path, "rb", key=RING):
            pass
    async with open_file(path, "rb", key=RING, allow_legacy=True) as f:
        assert await f.read() == b"legacy"
    async with open_file(path, "wb", format="aws", key=[RING, RING]) as f:
        await f.write(b"two keys")
    with pytest.raises(LimitExceededError):
        async with open_file(path, "rb", key=RING, max_encrypted_data_keys=1):
            pass
    async with open_file(path, "rb", key=RING, allow_unverified=True) as f:
        assert await f.read() == b"two keys"


def test_age_passphrase_keeps_the_loop_responsive(tmp_path: Path) -> None:
    """scrypt (~0.6 s here) runs on a worker thread: the loop keeps ticking meanwhile.

    Measured against the operations' own time in the same run (a loop blocked by scrypt
    would miss a tick for as long as one operation takes), not a fixed bound that a
    loaded machine's scheduling alone can exceed."""
    path = tmp_path / "p.age"
    data = plaintext(70_000, 12)

    async def main() -> tuple[bytes, float, float]:
        gaps: list[float] = []
        took: list[float] = []

        async def ticker() -> None:
            last = time.monotonic()
            while True:
                await anyio.sleep(0.01)
                now = time.monotonic()
                gaps.append(now - last)
                last = now

        async with anyio.create_task_group() as tg:
            tg.start_soon(ticker)
            start = time.monotonic()
            async with open_file(path, "wb", format="age", passphrase="correct horse") as f:
                await f.write(data)
            took.append(time.monotonic() - start)
            start = time.monotonic()
            async with open_file(path, "rb", format="age", passphrase="correct horse") as f:
                got = await f.read()
            took.append(time.monotonic() - start)
            start = time.monotonic()
            with pytest.raises(UnknownKeyError, match="passphrase"):
                async with open_file(path, "rb", format="age", passphrase="wrong"):
                    pytest.fail("the body must not run")
            took.append(time.monotonic() - start)
            tg.cancel_scope.cancel()
        return got, max(gaps), min(took)

    got, worst_gap, shortest = anyio.run(main)
    assert got == data
    assert shortest > 0.05  # scrypt ran (the work factor is not trivial)
    assert worst_gap < shortest / 2, (worst_gap, shortest)
    assert pyrage.passphrase.decrypt(path.read_bytes(), "correct horse") == data


# ---------------------------------------------------------------------------------------
# rclone crypt (interop with the rclone binary: tests/test_rclone_interop.py)
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("size", [0, 1, 65535, 65536, 65537, 5 * 65536 + 321])
async def test_rclone_round_trip_and_random_access(
    tmp_path: Path, size: int, policy: OffloadPolicy | None
) -> None:
    data = plaintext(size, 21)
    path = tmp_path / "f.bin"
    opts: dict[str, Any] = {"format": "rclone", "password": "pw", "password2": "salt"}
    async with open_file(path, "wb", policy=policy, **opts) as f:
        for off in range(0, size, 40_000):
            await f.write(data[off : off + 40_000])
    assert path.read_bytes()[:8] == rclone.MAGIC
    assert path.stat().st_size == rclone.encrypted_size(size)
    keys = rclone.RcloneKeys.from_password("pw", "salt")
    assert streamcrypt.decrypt_bytes(path.read_bytes(), keys, format="rclone") == data
    async with open_file(path, "rb", policy=policy, **opts) as f:
        assert f.seekable and f.size == size
        assert await f.read() == data
        for start in (0, 1, 65535, 65536, size // 2, size - 1):
            if 0 <= start < size:
                await f.seek(start)
                assert await f.read(70_000) == data[start : start + 70_000]
    async with EncryptedFile.wrap(ChunkReceiver(path.read_bytes(), 3000), "rb", **opts) as f:
        assert await f.read() == data


async def test_rclone_wrong_password_and_arguments(tmp_path: Path) -> None:
    path = tmp_path / "f.bin"
    data = plaintext(3 * 65536, 22)
    async with open_file(path, "wb", format="rclone", password="pw") as f:
        await f.write(data)
    for wrong in ({"password": "px"}, {"password": "pw", "password2": "other salt"}):
        with pytest.raises(AuthenticationError, match="wrong password"):
            async with open_file(path, "rb", format="rclone", **wrong):
                pytest.fail("the body must not run")
    native = tmp_path / "native.enc"
    await write_file(native, data)
    with pytest.raises(FormatError, match="magic"):
        async with open_file(native, "rb", format="rclone", password="pw"):
            pytest.fail("the body must not run")
    with pytest.raises(InvalidParameterError, match="password="):
        open_file(path, "rb", format="rclone")
    with pytest.raises(InvalidParameterError):
        open_file(path, "wb", format="rclone", password="pw", segment_size=SEG)
    with pytest.raises(InvalidParameterError, match="rclone"):
        open_file(path, "wb", key=KEY, password="pw")
    with pytest.raises(InvalidParameterError, match="rclone"):
        open_file(path, "rb", format="age", passphrase="pw", password2="salt")


# ---------------------------------------------------------------------------------------
# The AWS Encryption SDK message format (interop with the SDK: tests/test_aws_interop.py)
# ---------------------------------------------------------------------------------------

RING = aws.RawAesKeyring("streamcrypt-test", "files", KEY)
FRAME = 512
AWS_CONTEXT = {"purpose": "files"}


async def _write_aws(path: Path, data: bytes, suite: str, policy: Any = None) -> None:
    async with open_file(
        path,
        "wb",
        format="aws",
        key=RING,
        suite=suite,
        segment_size=FRAME,
        encryption_context=AWS_CONTEXT,
        policy=policy,
    ) as f:
        for off in range(0, len(data), 7000):
            await f.write(data[off : off + 7000])


def _open_aws(path: Path, **kw: Any) -> Any:
    return open_file(path, "rb", format="aws", key=RING, **kw)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("suite", ["0x0478", "0x0578"])
@pytest.mark.parametrize("size", [0, 1, FRAME - 1, FRAME, FRAME + 1, 40 * FRAME + 77])
async def test_aws_round_trip_and_ranged_reads(
    tmp_path: Path, size: int, suite: str, policy: OffloadPolicy | None
) -> None:
    data = plaintext(size, 31)
    path = tmp_path / "f.aws"
    await _write_aws(path, data, suite, policy)
    ct = path.read_bytes()
    header = aws.parse_header(ct)
    assert header is not None and header.suite.id == suite
    assert header.frame_length == FRAME and header.encryption_context["purpose"] == "files"
    assert streamcrypt.decrypt_bytes(ct, RING, encryption_context=AWS_CONTEXT, format="aws") == data
    async with _open_aws(path, policy=policy, encryption_context=AWS_CONTEXT) as f:
        assert f.seekable and f.size == size
        assert await f.read() == data
        rng = random.Random(size)
        for _ in range(12):
            a = rng.randint(0, size)
            b = rng.randint(a, size + FRAME)
            await f.seek(a)
            assert await f.read(b - a) == data[a:b]
    # A seekable wrapped object (its layout reads through the loop) and a stream.
    async with await anyio.open_file(path, "rb") as raw:
        async with EncryptedFile.wrap(raw, "rb", format="aws", key=RING, close_wrapped=False) as f:
            assert f.seekable and f.size == size
            await f.seek(size // 3)
            assert await f.read() == data[size // 3 :]
    async with EncryptedFile.wrap(ChunkReceiver(ct, 1000), "rb", format="aws", key=RING) as f:
        assert not f.seekable
        assert await f.read() == data


async def test_aws_wrapped_writer_signs(tmp_path: Path) -> None:
    data = plaintext(10 * FRAME + 3, 32)
    path = tmp_path / "w.aws"
    async with await anyio.open_file(path, "wb") as raw:
        async with EncryptedFile.wrap(
            raw, "wb", format="aws", key=RING, segment_size=FRAME, close_wrapped=False
        ) as f:
            await f.write(data)
    assert streamcrypt.decrypt_bytes(path.read_bytes(), RING, format="aws") == data


@pytest.mark.parametrize("suite", ["0x0478", "0x0578"])
async def test_aws_tampering_and_truncation_are_typed(tmp_path: Path, suite: str) -> None:
    data = plaintext(20 * FRAME + 100, 33)
    path = tmp_path / "f.aws"
    await _write_aws(path, data, suite)
    ct = path.read_bytes()
    header = aws.parse_header(ct)
    assert header is not None
    full = FRAME + 32
    signed = suite == "0x0578"

    async def opening(blob: bytes, **kw: Any) -> None:
        bad = tmp_path / "bad.aws"
        bad.write_bytes(blob)
        async with _open_aws(bad, **kw) as f:
            await f.read()

    # A flipped byte in frame 3's ciphertext.
    middle = bytearray(ct)
    middle[header.size + 3 * full + 20] ^= 1
    if signed:  # the signature covers it: nothing is released
        with pytest.raises(InvalidSignatureError):
            await opening(bytes(middle))
    else:  # the frame fails; frames before it read
        bad = tmp_path / "mid.aws"
        bad.write_bytes(bytes(middle))
        async with _open_aws(bad) as f:
            assert await f.read(3 * FRAME) == data[: 3 * FRAME]
            with pytest.raises(AuthenticationError, match="frame 4"):
                await f.read(FRAME)
            await f.seek(5 * FRAME)
            assert await f.read(FRAME) == data[5 * FRAME : 6 * FRAME]
    cases: list[tuple[bytes, type[Exception]]] = [
        (ct[: header.size + 5 * full], TruncatedStreamError),  # cut at a frame boundary
        (ct[:-1], TruncatedStreamError),
        (ct + b"\0", TruncatedStreamError),
        (ct[: header.size - 3], TruncatedStreamError),
    ]
    final = bytearray(ct)
    final[len(ct) - (110 if signed else 5)] ^= 1  # inside the final frame's tag
    cases.append((bytes(final), AuthenticationError))
    tagged = bytearray(ct)
    tagged[header.size - 1] ^= 1  # the header's tag
    cases.append((bytes(tagged), AuthenticationError))
    if signed:
        footer = bytearray(ct)
        footer[-2] ^= 1
        cases.append((bytes(footer), InvalidSignatureError))
    for blob, error in cases:
        with pytest.raises(error):
            await opening(blob)
    with pytest.raises(UnknownKeyError):
        async with open_file(path, "rb", format="aws", key=aws.RawAesKeyring("x", "y", KEY)):
            pytest.fail("the body must not run")
    with pytest.raises(AuthenticationError, match="encryption context"):
        async with _open_aws(path, encryption_context={"purpose": "other"}):
            pytest.fail("the body must not run")


async def test_aws_arguments_are_checked_at_the_call(tmp_path: Path) -> None:
    path = tmp_path / "f.aws"
    for bad in (
        {"key": KEY},
        {"key": RING, "suite": "0x0178"},
        {"key": RING, "suite": "nonsense"},
        {"key": RING, "suite": "AES_256_GCM_HKDF_SHA512_COMMIT_KEY"},  # one spelling: 0x0478
        {"key": RING, "segment_size": 0},
        {"key": RING, "aad": b"x"},
        {"key": RING, "password": "pw"},
        {"key": RING, "encryption_context": {"aws-crypto-x": "y"}},
        {"key": RING, "encryption_context": {"k": 1}},
    ):
        with pytest.raises(InvalidParameterError):
            open_file(path, "wb", format="aws", **bad)
    with pytest.raises(InvalidParameterError, match="does not take segment_size= when reading"):
        open_file(path, "rb", format="aws", key=RING, segment_size=FRAME)
    with pytest.raises(InvalidParameterError, match='format="aws"'):
        open_file(path, "wb", key=KEY, encryption_context={"k": "v"})
    async with open_file(path, "wb", format="aws", key=RING, suite="0x0478") as f:
        await f.write(b"unsigned")
    assert aws.parse_header(path.read_bytes()).suite.id == "0x0478"  # type: ignore[union-attr]
    # Non-framed messages and legacy suites are for the codec, not for files.
    unframed = aws.AwsEncryptor(RING, frame_length=0)
    for blob in (
        unframed.update(b"x" * 100) + unframed.finalize(),
        streamcrypt.encrypt_bytes(
            b"x" * 100, RING, suite="0x0178", allow_legacy=True, format="aws"
        ),
    ):
        path.write_bytes(blob)
        with pytest.raises(UnsupportedFormatError):
            async with _open_aws(path):
                pytest.fail("the body must not run")


# ---------------------------------------------------------------------------------------
# Crashes and memory (child processes)
# ---------------------------------------------------------------------------------------


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def test_sigkill_mid_write_leaves_destination(tmp_path: Path) -> None:
    dest = tmp_path / "big.enc"
    old_plain = b"the old, complete file\n" * 1000
    dest.write_bytes(encrypt_bytes(old_plain, KEY))
    before = dest.read_bytes()
    child = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "_kill_writer.py"), str(dest), KEY.hex()],
        stdout=subprocess.PIPE,
        env=_child_env(),
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == b"writing\n"
        deadline = time.monotonic() + 60
        grown = False
        while time.monotonic() < deadline and not grown:
            for name in os.listdir(tmp_path):
                if name.endswith(".tmp") and (tmp_path / name).stat().st_size > 24 << 20:
                    grown = True
            time.sleep(0.01)
        assert grown, "the child never wrote 24 MiB into its temporary file"
        assert child.poll() is None, "the child finished before it could be killed"
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait(timeout=30) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        if child.stdout is not None:
            child.stdout.close()
    assert dest.read_bytes() == before
    assert decrypt_bytes(dest.read_bytes(), KEY) == old_plain
    stale = [n for n in os.listdir(tmp_path) if n != "big.enc"]
    assert len(stale) == 1 and stale[0].startswith(".big.enc.streamcrypt-"), stale
    assert remove_stale_temporaries(tmp_path) == []  # too recent for the default age
    removed = remove_stale_temporaries(tmp_path, older_than=0)
    assert [p.name for p in removed] == stale
    assert only_file(tmp_path) == ["big.enc"]
    assert dest.read_bytes() == before


_RSS_SCRIPT = textwrap.dedent(
    """
    import hashlib, json, os, sys
    import anyio
    from streamcrypt.transports import open_file

    def hwm():
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024

    async def main(path, size):
        key = bytes(32)
        chunk = os.urandom(1 << 20)
        written, read = hashlib.blake2b(), hashlib.blake2b()
        async with open_file(path + ".warm", "wb", key=key) as f:  # warm the pools
            await f.write(chunk)
        async with open_file(path + ".warm", "rb", key=key) as f:
            await f.read()
        base = hwm()
        async with open_file(path, "wb", key=key) as f:
            for i in range(size >> 20):
                piece = i.to_bytes(8, "big") + chunk[8:]
                written.update(piece)
                await f.write(piece)
        after_write = hwm()
        async with open_file(path, "rb", key=key) as f:
            assert f.size == size
            async for part in f:
                read.update(part)
        assert read.digest() == written.digest()
        print(json.dumps({"base": base, "write": after_write, "read": hwm()}))

    backend = sys.argv[3]
    options = {"use_uvloop": True} if backend == "uvloop" else {}
    anyio.run(
        main, sys.argv[1], int(sys.argv[2]),
        backend="trio" if backend == "trio" else "asyncio", backend_options=options,
    )
    """
)


def _rss_growth(tmp_path: Path, size: int, backend: str) -> dict[str, int]:
    out = subprocess.run(
        [sys.executable, "-c", _RSS_SCRIPT, str(tmp_path / "rss.enc"), str(size), backend],
        check=True,
        capture_output=True,
        env=_child_env(),
        timeout=240,
    ).stdout
    result: dict[str, int] = json.loads(out)
    assert (tmp_path / "rss.enc").stat().st_size > size
    return result


@pytest.mark.parametrize("backend", ["asyncio", "uvloop", "trio"])
def test_bounded_memory_256_mib(tmp_path: Path, backend: str) -> None:
    """Write and read back 256 MiB in a fresh process: peak RSS grows by under 64 MiB."""
    r = _rss_growth(tmp_path, 256 << 20, backend)
    assert r["write"] - r["base"] < 64 << 20, r
    assert r["read"] - r["base"] < 64 << 20, r


@pytest.mark.slow
def test_bounded_memory_1_gib(tmp_path: Path) -> None:
    """Four times the length, the same bound: memory does not follow the file size."""
    r = _rss_growth(tmp_path, 1 << 30, "asyncio")
    assert r["write"] - r["base"] < 64 << 20, r
    assert r["read"] - r["base"] < 64 << 20, r


@pytest.mark.parametrize("seed", range(6))
async def test_a_cancelled_write_or_read_is_complete_or_refused(tmp_path: Path, seed: int) -> None:
    """Cancel a write, then a read, at a random moment and carry on: the file is complete
    and correct, or every later call is refused with a typed error (issue 27: every
    driver breaks on cancellation); never a committed short file, never wrong bytes."""
    rng = random.Random(seed)
    data = rng.randbytes(3 << 20)
    policy = OffloadPolicy(inline_limit=0, batch_size=64 << 10, adaptive=False)
    path = tmp_path / "c.enc"
    await write_file(path, b"old")
    before = path.read_bytes()
    refused = False
    victim = rng.randrange(12)
    try:
        async with open_file(path, "wb", key=KEY, segment_size=16384, policy=policy) as f:
            for i in range(12):
                piece = data[i << 18 : (i + 1) << 18]
                if i == victim:
                    with anyio.move_on_after(rng.random() * 0.003):
                        await f.write(piece)
                else:
                    await f.write(piece)
    except BrokenTransformError:
        refused = True
    if refused:
        assert path.read_bytes() == before  # nothing committed
        with pytest.raises(BrokenTransformError):
            await f.write(b"more")
    else:
        async with open_file(path, "rb", key=KEY) as r:
            assert await r.read() == data
    await write_file(path, data)
    async with open_file(path, "rb", key=KEY, policy=policy) as r:
        got = bytearray()
        victim = rng.randrange(12)
        for i in range(12):
            if i == victim:
                with anyio.move_on_after(rng.random() * 0.003) as scope:
                    got += await r.read(1 << 18)
                if scope.cancelled_caught:  # a read cancelled had no effect
                    assert await r.tell() == len(got)
            got += await r.read(1 << 18)
        got += await r.read()
        assert bytes(got) == data


async def test_a_detected_format_open_cannot_read_is_refused_typed(tmp_path: Path) -> None:
    """A read that detects its format names the one it found when streamcrypt.open
    cannot read that format (an envelope: no random access), with a typed error; before,
    the file reader failed on an assertion."""
    from streamcrypt.keys import Argon2Params

    path = tmp_path / "x.sc"
    path.write_bytes(
        streamcrypt.encrypt_bytes(
            b"hello", format="envelope", passphrase="pw", work_factor=Argon2Params(1, 8192)
        )
    )
    with pytest.raises(UnsupportedFormatError, match=r"envelope file.*streamcrypt\.decrypt"):
        async with open_file(path, "rb", passphrase="pw"):
            pytest.fail("the body must not run")
    with pytest.raises(UnsupportedFormatError, match="envelope file"):
        wrapped = anyio.wrap_file(io.BytesIO(path.read_bytes()))
        async with EncryptedFile.wrap(wrapped, "rb", passphrase="pw"):
            pytest.fail("the body must not run")


@pytest.mark.parametrize(
    ("fmt", "writing", "reading", "segment"),
    [
        ("native", {"key": KEY, "segment_size": 4096}, {"key": KEY}, 4096 + 16),
        ("age", {"recipients": [AGE_ID.recipient]}, {"identities": [AGE_ID]}, 65536 + 16),
    ],
    ids=["native", "age"],
)
@pytest.mark.parametrize("tail", [0, 5])
def test_a_file_cut_after_a_whole_segment_gets_the_stream_paths_verdict(
    tmp_path: Path,
    fmt: str,
    writing: dict[str, Any],
    reading: dict[str, Any],
    segment: int,
    tail: int,
) -> None:
    """Random access (the layout from the file's size) and the stream path give one verdict:
    a cut just after a whole segment (plus fewer bytes than a tag) is a truncation, not a
    FormatError through open() and a TruncatedStreamError through decrypt_bytes."""
    sealed = encrypt_bytes(plaintext(3 * 65536 + 100, 3), format=fmt, **writing)
    header = len(sealed) - (3 * 65536 + 100) - 16 * ((3 * 65536 + 100) // (segment - 16) + 1)
    cut = sealed[: header + segment + tail]
    with pytest.raises(TruncatedStreamError) as streamed:
        decrypt_bytes(cut, format=fmt, **reading)
    path = tmp_path / "cut"
    path.write_bytes(cut)

    async def read() -> bytes:
        async with open_file(path, "rb", format=fmt, **reading) as f:
            return await f.read()

    with pytest.raises(TruncatedStreamError) as opened:
        anyio.run(read)
    assert str(opened.value) == str(streamed.value)


@pytest.mark.parametrize("fmt", [None, "age"])
def test_an_armored_age_file_is_refused_by_name_with_the_way_to_read_it(
    tmp_path: Path, fmt: str | None
) -> None:
    """Armored text has no random access: open() says so and names decrypt, whether the
    format was detected or named (it said FormatError "not an age file")."""
    path = tmp_path / "armored.age"
    sealed = encrypt_bytes(b"hello", format="age", recipients=[AGE_ID.recipient], armor=True)
    path.write_bytes(sealed)

    async def read() -> bytes:
        async with open_file(path, "rb", format=fmt, identities=[AGE_ID]) as f:
            return await f.read()

    with pytest.raises(UnsupportedFormatError, match=r"armored age file.*streamcrypt\.decrypt"):
        anyio.run(read)
    assert decrypt_bytes(sealed, identities=[AGE_ID]) == b"hello"
