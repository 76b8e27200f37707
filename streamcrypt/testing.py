"""Helpers to test code that uses streamcrypt's streams, as ``trio.testing`` does for trio.

* :func:`memory_stream_pair` — two connected in-memory anyio byte streams (no sockets).
* :func:`encrypted_stream_pair` — two :class:`~streamcrypt.transports.EncryptedStream`
  ends, handshaken over a memory pair (or over transports you give).
* :func:`check_byte_stream` — a conformance check for any two-way anyio byte stream
  (after trio's ``check_two_way_stream``): data both ways, large concurrent transfers,
  ``max_bytes``, ``send_eof`` and ``aclose`` semantics, and concurrent-use detection.
  It raises :class:`AssertionError` naming the first rule broken.
* :func:`check_segmented_codec` — a conformance check for a segmented encryption format
  (sans-I/O, synchronous): chunking, truncation at every boundary, reordered, duplicated,
  dropped and extended segments, no plaintext before its tag, range reads. The project
  runs it over every format it speaks (``tests/test_codec_conformance.py``);
  :func:`check_segmented_format` runs it over a format descriptor.
* :func:`softhsm_token` — a fresh SoftHSM2 token for this process, for testing code that
  uses :class:`~streamcrypt.keys.Pkcs11Key` (Debian's ``softhsm2``).
* :func:`reflink_mount` — a directory on a fresh XFS with reflinks (a loop mount, as
  root), where :func:`streamcrypt.rekey` clones a payload rather than copy it.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import math
import os
import random
import shutil
import subprocess
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TypedDict, Unpack

import anyio
from anyio import (
    BrokenResourceError,
    BusyResourceError,
    ClosedResourceError,
    EndOfStream,
    ResourceGuard,
)
from anyio.abc import AnyByteStream, ByteStream
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from .abc import Buffer, Transform
from .codecs import FormatOptions, ReadAt, SegmentCodec, SegmentedFormat, SegmentLayout
from .engine import OffloadPolicy
from .errors import StreamCryptError, TruncatedStreamError
from .keys import SecretKey, random_bytes
from .transports import AcceptPeer, Cipher, EncryptedStream, NoiseHash

__all__ = [
    "LayoutOf",
    "MemoryByteStream",
    "RangeReader",
    "SoftHsmToken",
    "WrapOptions",
    "check_byte_stream",
    "check_segmented_codec",
    "check_segmented_format",
    "encrypted_stream_pair",
    "memory_stream_pair",
    "reflink_mount",
    "softhsm_token",
]


@dataclass(eq=False)
class MemoryByteStream(ByteStream):
    """One end of :func:`memory_stream_pair`: a byte stream over two memory object streams.

    ``send_eof()`` closes the sending direction (the peer then gets
    :class:`anyio.EndOfStream`); after ``aclose()`` calls raise
    :class:`anyio.ClosedResourceError`, and the peer's sends raise
    :class:`anyio.BrokenResourceError`. Concurrent senders or receivers raise
    :class:`anyio.BusyResourceError`.
    """

    send_stream: MemoryObjectSendStream[bytes]
    receive_stream: MemoryObjectReceiveStream[bytes]
    _leftover: bytes = field(default=b"", init=False, repr=False)
    _send_closed: bool = field(default=False, init=False, repr=False)
    _send_guard: ResourceGuard = field(
        default_factory=lambda: ResourceGuard("sending to"), init=False, repr=False
    )
    _receive_guard: ResourceGuard = field(
        default_factory=lambda: ResourceGuard("reading from"), init=False, repr=False
    )

    async def send(self, item: bytes) -> None:
        with self._send_guard:
            data = bytes(item)  # a copy: the caller may reuse its buffer
            if not data:
                if self._send_closed:
                    raise ClosedResourceError
                await anyio.lowlevel.checkpoint()
                return
            await self.send_stream.send(data)

    async def receive(self, max_bytes: int = 65536) -> bytes:
        if max_bytes < 1:
            raise ValueError("max_bytes must be a positive integer")
        with self._receive_guard:
            if self._leftover:
                await anyio.lowlevel.checkpoint()
                data = self._leftover
            else:
                data = await self.receive_stream.receive()
            self._leftover = data[max_bytes:]
            return data[:max_bytes]

    async def send_eof(self) -> None:
        self._send_closed = True
        await self.send_stream.aclose()

    async def aclose(self) -> None:
        self._send_closed = True
        await self.send_stream.aclose()
        await self.receive_stream.aclose()


def memory_stream_pair(
    max_buffer_size: float = math.inf,
) -> tuple[MemoryByteStream, MemoryByteStream]:
    """Two connected in-memory byte streams; each ``send()`` is one chunk for the peer.

    ``max_buffer_size`` counts chunks in flight per direction (``0``: a send waits for
    the peer to receive it).
    """
    a_to_b_send, a_to_b_receive = anyio.create_memory_object_stream[bytes](max_buffer_size)
    b_to_a_send, b_to_a_receive = anyio.create_memory_object_stream[bytes](max_buffer_size)
    return MemoryByteStream(a_to_b_send, b_to_a_receive), MemoryByteStream(
        b_to_a_send, a_to_b_receive
    )


class WrapOptions(TypedDict, total=False):
    """The keywords of :meth:`EncryptedStream.wrap` (``server_side`` excepted), typed:
    what :func:`encrypted_stream_pair` passes on."""

    psk: Buffer | SecretKey | None
    static_key: Buffer | SecretKey | None
    server_public_key: Buffer | None
    accept_peer: AcceptPeer | None
    cipher: Cipher
    hash: NoiseHash
    rekey_interval: int | None
    handshake_timeout: float | None
    idle_timeout: float | None
    record_timeout: float | None
    policy: OffloadPolicy | None


async def encrypted_stream_pair(
    transports: tuple[AnyByteStream, AnyByteStream] | None = None,
    *,
    client: WrapOptions | None = None,
    server: WrapOptions | None = None,
    **common: Unpack[WrapOptions],
) -> tuple[EncryptedStream, EncryptedStream]:
    """Handshake two :class:`EncryptedStream` ends: ``(client, server)``.

    ``common`` options go to both sides' :meth:`EncryptedStream.wrap`, ``client`` and
    ``server`` to one side each. Without any key option both get one fresh random
    ``psk`` (NNpsk0). ``transports`` defaults to a new :func:`memory_stream_pair`.
    Raises what ``wrap`` raises (both sides run in one task group, so a failure comes
    as an exception group when both fail).
    """
    client_opts: WrapOptions = {**common, **(client or {})}
    server_opts: WrapOptions = {**common, **(server or {})}
    key_names = ("psk", "static_key", "server_public_key")
    if not any(k in client_opts or k in server_opts for k in key_names):
        psk = random_bytes(32)
        client_opts["psk"] = server_opts["psk"] = psk
    left, right = transports if transports is not None else memory_stream_pair()
    ends: dict[str, EncryptedStream] = {}

    async def run(name: str, transport: AnyByteStream, opts: WrapOptions) -> None:
        ends[name] = await EncryptedStream.wrap(transport, server_side=name == "server", **opts)

    async with anyio.create_task_group() as tg:
        tg.start_soon(run, "client", left, client_opts)
        tg.start_soon(run, "server", right, server_opts)
    return ends["client"], ends["server"]


# -- the conformance check ----------------------------------------------------------------

#: Seconds one step of a check may block before it counts as a failure.
_step_timeout: ContextVar[float] = ContextVar("_step_timeout", default=5.0)

MakePair = Callable[[], Awaitable[tuple[ByteStream, ByteStream]]]


def _expect(condition: bool, rule: str) -> None:
    if not condition:
        raise AssertionError(f"byte-stream conformance: {rule}")


async def _expect_raises(
    exc_type: type[BaseException] | tuple[type[BaseException], ...],
    call: Callable[[], Awaitable[object]],
    rule: str,
) -> BaseException:
    limit = _step_timeout.get()
    with anyio.move_on_after(limit):
        try:
            await call()
        except exc_type as exc:
            return exc
        raise AssertionError(f"byte-stream conformance: {rule}")
    raise AssertionError(f"byte-stream conformance: {rule} (it blocked for {limit} s)")


async def _receive_exactly(
    stream: ByteStream, size: int, rng: random.Random | None = None
) -> bytes:
    out = bytearray()
    while len(out) < size:
        limit = rng.randint(1, 70000) if rng is not None else 65536
        chunk = await stream.receive(limit)
        _expect(0 < len(chunk) <= limit, f"receive({limit}) returned {len(chunk)} bytes")
        out += chunk
    _expect(len(out) == size, f"received {len(out)} bytes where {size} were sent")
    return bytes(out)


async def _send_in_pieces(stream: ByteStream, data: bytes, rng: random.Random) -> None:
    pos = 0
    while pos < len(data):
        step = rng.choice((1, 17, 1000, 65519, 65520, 100_000, 300_000))
        await stream.send(data[pos : pos + step])
        pos += step


async def _close_both(a: ByteStream, b: ByteStream) -> None:
    with anyio.CancelScope(shield=True):
        await anyio.aclose_forcefully(a)
        await anyio.aclose_forcefully(b)


async def _check_exchange(a: ByteStream, b: ByteStream) -> None:
    await a.send(b"ping")
    _expect(await _receive_exactly(b, 4) == b"ping", "a -> b carries the bytes sent")
    await b.send(b"pong!")
    _expect(await _receive_exactly(a, 5) == b"pong!", "b -> a carries the bytes sent")
    await a.send(b"")  # sending nothing is allowed and delivers nothing
    await a.send(b"0123456789")
    first = await b.receive(3)
    _expect(0 < len(first) <= 3, "receive(max_bytes) never returns more than max_bytes")
    rest = await _receive_exactly(b, 10 - len(first))
    _expect(first + rest == b"0123456789", "data split across receives stays in order")
    await _expect_raises(ValueError, lambda: b.receive(0), "receive(0) raises ValueError")


async def _check_large(a: ByteStream, b: ByteStream) -> None:
    rng = random.Random(4)
    size = 3 << 20
    ab = rng.randbytes(size)
    ba = rng.randbytes(size)
    got: dict[str, bytes] = {}

    async def receiver(name: str, stream: ByteStream) -> None:
        got[name] = await _receive_exactly(stream, size, random.Random(name))

    async with anyio.create_task_group() as tg:
        tg.start_soon(receiver, "b", b)
        tg.start_soon(receiver, "a", a)
        tg.start_soon(_send_in_pieces, a, ab, random.Random(1))
        tg.start_soon(_send_in_pieces, b, ba, random.Random(2))
    _expect(got["b"] == ab, "3 MiB a -> b (sent in mixed pieces) arrives unchanged")
    _expect(got["a"] == ba, "3 MiB b -> a, at the same time, arrives unchanged")


async def _check_send_eof(a: ByteStream, b: ByteStream) -> None:
    await a.send(b"last words")
    await a.send_eof()
    _expect(await _receive_exactly(b, 10) == b"last words", "data before send_eof arrives")
    await _expect_raises(EndOfStream, b.receive, "receive after the peer's send_eof: EndOfStream")
    await _expect_raises(EndOfStream, b.receive, "EndOfStream again on the next receive")
    await _expect_raises(
        ClosedResourceError, lambda: a.send(b"x"), "send after send_eof: ClosedResourceError"
    )
    await b.send(b"reply")  # half-close: the other direction still works
    _expect(await _receive_exactly(a, 5) == b"reply", "the other direction works after send_eof")
    await b.send_eof()
    await _expect_raises(EndOfStream, a.receive, "both sides can send_eof")


async def _check_aclose(a: ByteStream, b: ByteStream) -> None:
    await a.send(b"bye")
    await a.aclose()
    await a.aclose()  # idempotent
    await _expect_raises(
        ClosedResourceError, lambda: a.send(b"x"), "send after aclose: ClosedResourceError"
    )
    await _expect_raises(
        ClosedResourceError, a.receive, "receive after aclose: ClosedResourceError"
    )
    _expect(await _receive_exactly(b, 3) == b"bye", "data sent before aclose arrives")
    await _expect_raises(
        (EndOfStream, TruncatedStreamError),
        b.receive,
        "the peer of a closed stream gets EndOfStream (TruncatedStreamError where a close "
        "without send_eof is an abort, as on an EncryptedStream)",
    )
    with anyio.fail_after(10):
        for _ in range(1000):
            try:
                await b.send(b"into the void" * 1000)
            except BrokenResourceError:
                break
            await anyio.sleep(0.001)
        else:
            raise AssertionError(
                "byte-stream conformance: sending to a closed peer never raised BrokenResourceError"
            )
    await b.aclose()


async def _check_concurrent_use(a: ByteStream, b: ByteStream) -> None:
    busy: list[str] = []
    payload = bytes(200_000)

    async def sender() -> None:
        try:
            await a.send(payload)
        except BusyResourceError:
            busy.append("send")

    async def receiver(into: list[bytes]) -> None:
        try:
            into.append(await b.receive())
        except BusyResourceError:
            busy.append("receive")

    async with anyio.create_task_group() as tg:
        tg.start_soon(sender)
        tg.start_soon(sender)
    _expect(busy == ["send"], "two concurrent send() calls: one raises BusyResourceError")
    _expect(
        await _receive_exactly(b, len(payload)) == payload,
        "the refused concurrent send sent nothing; the other arrived whole",
    )
    got: list[bytes] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(receiver, got)
        tg.start_soon(receiver, got)
        await anyio.wait_all_tasks_blocked()
        await a.send(b"one")
    _expect(busy == ["send", "receive"], "two concurrent receive() calls: one raises Busy")
    _expect(got == [b"one"], "the waiting receive got the data")


async def check_byte_stream(make_pair: MakePair, *, step_timeout: float = 5.0) -> None:
    """Run the conformance checks; ``await make_pair()`` gives a fresh connected pair.

    Each check gets its own pair and closes it. Raises :class:`AssertionError` naming
    the first rule a stream breaks (a step that should end but blocks for
    ``step_timeout`` seconds counts as broken).
    """
    token = _step_timeout.set(step_timeout)
    try:
        await _run_checks(make_pair)
    finally:
        _step_timeout.reset(token)


async def _run_checks(make_pair: MakePair) -> None:
    for check in (_check_exchange, _check_large, _check_send_eof, _check_aclose):
        for swap in (False, True):
            a, b = await make_pair()
            if swap:
                a, b = b, a
            try:
                with anyio.fail_after(30):
                    await check(a, b)
            finally:
                await _close_both(a, b)
    a, b = await make_pair()
    try:
        with anyio.fail_after(30):
            await _check_concurrent_use(a, b)
    finally:
        await _close_both(a, b)


# -- the segmented-codec conformance suite ----------------------------------------------

#: Plaintext ``[start, stop)`` of a whole ciphertext, read by random access.
RangeReader = Callable[[bytes, int, int], bytes]

#: Where the header and the segments of a whole ciphertext lie.
LayoutOf = Callable[[bytes], SegmentLayout]


def _codec_expect(condition: bool, rule: str) -> None:
    if not condition:
        raise AssertionError(f"segmented-codec conformance: {rule}")


@dataclass(frozen=True, slots=True)
class _Run:
    """What a decryptor released from some input, and the error that stopped it."""

    released: bytes
    error: BaseException | None


def _decrypt(decryptor: Transform, pieces: list[bytes]) -> _Run:
    out = bytearray()
    try:
        for piece in pieces:
            out += decryptor.update(piece)
        out += decryptor.finalize()
    except Exception as exc:
        return _Run(bytes(out), exc)
    return _Run(bytes(out), None)


def _pieces(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), max(size, 1))]


def _random_pieces(data: bytes, rng: random.Random, largest: int) -> list[bytes]:
    out: list[bytes] = []
    pos = 0
    while pos < len(data):
        step = rng.choice((0, 1, rng.randint(1, max(largest, 1))))
        out.append(data[pos : pos + step])
        pos += step
    return out


def _encrypt(encryptor: Transform, pieces: list[bytes]) -> bytes:
    out = bytearray()
    for piece in pieces:
        out += encryptor.update(piece)
    out += encryptor.finalize()
    return bytes(out)


@dataclass(frozen=True, slots=True)
class _Sample:
    plaintext: bytes
    ciphertext: bytes
    layout: SegmentLayout

    def segment(self, index: int) -> tuple[int, int]:
        """Ciphertext ``[start, stop)`` of segment ``index``."""
        lay = self.layout
        if index == lay.segment_count - 1:
            _, offset, length = lay.final_segment()
            return offset, offset + length
        return lay.ciphertext_offset(index), lay.ciphertext_offset(index + 1)

    @property
    def trailer(self) -> bytes:
        """What follows the final segment (a signature, say); usually nothing."""
        return self.ciphertext[self.segment(self.layout.segment_count - 1)[1] :]


def _layout_from_decryptor(decrypt: Callable[[], Transform]) -> LayoutOf:
    def layout(ciphertext: bytes) -> SegmentLayout:
        dec = decrypt()
        run = _decrypt(dec, [ciphertext])
        codec = getattr(dec, "codec", None)
        if run.error is not None or not isinstance(codec, SegmentCodec):
            raise TypeError(
                "check_segmented_codec: the decryptor is not a SegmentedDecryptor that "
                "decrypts the encryptor's output; pass layout= to say where its segments lie"
            ) from run.error
        bare = SegmentLayout.for_plaintext(codec, 0, len(run.released))
        return SegmentLayout(codec, len(ciphertext) - bare.stream_size, len(ciphertext))

    return layout


def _expect_failure(
    run: _Run, plaintext: bytes, what: str, *, verified: int, may_succeed: bool = False
) -> None:
    """``run`` of a damaged stream: a typed error, and nothing released but a prefix of
    the plaintext no longer than ``verified`` bytes (the segments before the damage)."""
    if run.error is None:
        _codec_expect(
            may_succeed and plaintext.startswith(run.released),
            f"{what}: decryption succeeded ({len(run.released)} bytes); it must raise",
        )
        return
    _codec_expect(
        isinstance(run.error, StreamCryptError),
        f"{what}: raised {run.error!r}, not a streamcrypt.errors.StreamCryptError",
    )
    _codec_expect(
        plaintext.startswith(run.released),
        f"{what}: released {len(run.released)} bytes that are not the plaintext's",
    )
    _codec_expect(
        len(run.released) <= verified,
        f"{what}: released {len(run.released)} plaintext bytes, but only the first "
        f"{verified} lie in segments before the damage (a segment was released before "
        "its tag verified)",
    )


def _check_chunking(
    encrypt: Callable[[], Transform],
    decrypt: Callable[[], Transform],
    sizes: list[int],
    largest: int,
    rng: random.Random,
) -> None:
    for size in sizes:
        plaintext = rng.randbytes(size)
        whole = _encrypt(encrypt(), [plaintext])
        run = _decrypt(decrypt(), [whole])
        _codec_expect(
            run.error is None and run.released == plaintext,
            f"a {size}-byte plaintext does not survive a round trip ({run.error!r})",
        )
        for attempt in range(3):
            sealed = _encrypt(encrypt(), _random_pieces(plaintext, rng, largest))
            run = _decrypt(decrypt(), [sealed])
            _codec_expect(
                run.error is None and run.released == plaintext,
                f"a {size}-byte plaintext encrypted in random pieces (try {attempt}) does "
                f"not decrypt to itself ({run.error!r})",
            )
            run = _decrypt(decrypt(), _random_pieces(whole, rng, largest))
            _codec_expect(
                run.error is None and run.released == plaintext,
                f"a {size}-byte stream decrypted in random pieces (try {attempt}) gives "
                f"other bytes ({run.error!r})",
            )


def _check_truncation(
    decrypt: Callable[[], Transform], sample: _Sample, *, boundary_detected: bool
) -> None:
    lay, ct, pt = sample.layout, sample.ciphertext, sample.plaintext
    cuts = {0, 1, lay.header_size // 2, lay.header_size - 1, lay.header_size, len(ct) - 1}
    boundaries = {lay.header_size}
    for index in range(lay.segment_count):
        start, stop = sample.segment(index)
        boundaries.add(start)
        cuts.update((start - 1, start, start + 1, (start + stop) // 2, stop - 1))
    for cut in sorted(c for c in cuts if 0 <= c < len(ct)):
        run = _decrypt(decrypt(), [ct[:cut]])
        _expect_failure(
            run,
            pt,
            f"the stream cut after {cut} of {len(ct)} bytes",
            verified=len(pt),
            may_succeed=not boundary_detected and cut in boundaries,
        )


def _check_segment_attacks(
    decrypt: Callable[[], Transform], sample: _Sample, *, boundary_detected: bool
) -> None:
    lay, ct, pt = sample.layout, sample.ciphertext, sample.plaintext
    count = lay.segment_count
    head = ct[: lay.header_size]
    segs = [ct[slice(*sample.segment(i))] for i in range(count)]

    def body(order: list[int]) -> bytes:
        return head + b"".join(segs[i] for i in order) + sample.trailer

    every = list(range(count))
    for i in range(count - 1):
        order = [*every[:i], i + 1, i, *every[i + 2 :]]
        _expect_failure(
            _decrypt(decrypt(), [body(order)]),
            pt,
            f"segments {i} and {i + 1} swapped",
            verified=lay.plaintext_offset(i),
        )
    for i in range(count):
        _expect_failure(
            _decrypt(decrypt(), [body(every[: i + 1] + every[i:])]),
            pt,
            f"segment {i} duplicated",
            verified=lay.plaintext_offset(i + 1) if i < count - 1 else len(pt),
        )
        _expect_failure(
            _decrypt(decrypt(), [body(every[:i] + every[i + 1 :])]),
            pt,
            f"segment {i} of {count} dropped",
            verified=lay.plaintext_offset(i),
            may_succeed=not boundary_detected and i == count - 1,
        )
    extensions = {
        "a copy of the final segment": segs[-1],
        "a copy of segment 0": segs[0],
        "one zero byte": b"\x00",
        "a segment's worth of zero bytes": bytes(len(segs[0])),
    }
    for name, extra in extensions.items():
        _expect_failure(
            _decrypt(decrypt(), [ct + extra]),
            pt,
            f"the stream extended by {name}",
            verified=len(pt),
        )


def _check_release_after_tag(decrypt: Callable[[], Transform], sample: _Sample, piece: int) -> None:
    lay, ct, pt = sample.layout, sample.ciphertext, sample.plaintext
    for index in range(lay.segment_count):
        start, stop = sample.segment(index)
        for pos, where in ((stop - 1, "last"), ((start + stop) // 2, "middle")):
            damaged = bytearray(ct)
            damaged[pos] ^= 0x01
            for size in (piece, len(ct)):
                _expect_failure(
                    _decrypt(decrypt(), _pieces(bytes(damaged), size)),
                    pt,
                    f"the {where} byte of segment {index} flipped (fed in {size}-byte pieces)",
                    verified=lay.plaintext_offset(index),
                )


def _check_ranges(read_range: RangeReader, sample: _Sample) -> None:
    lay, ct, pt = sample.layout, sample.ciphertext, sample.plaintext
    points = {0, 1, len(pt) - 1, len(pt)}
    for index in range(lay.segment_count):
        offset = lay.plaintext_offset(index)
        points.update((offset - 1, offset, offset + 1))
    points = {p for p in points if 0 <= p <= len(pt)}
    for start in sorted(points):
        for stop in sorted(points):
            if stop < start:
                continue
            try:
                got = read_range(ct, start, stop)
            except Exception as exc:
                raise AssertionError(
                    f"reading plaintext [{start}, {stop}) by range raised {exc!r}"
                ) from exc
            _codec_expect(
                got == pt[start:stop],
                f"reading plaintext [{start}, {stop}) by range gives other bytes than "
                "full decryption",
            )
    for index in range(lay.segment_count):
        start, stop = sample.segment(index)
        damaged = bytearray(ct)
        damaged[stop - 1] ^= 0x01
        first = lay.plaintext_offset(index)
        try:
            got = read_range(
                bytes(damaged), first, len(pt) if index == lay.segment_count - 1 else first + 1
            )
        except StreamCryptError:
            continue
        except Exception as exc:
            raise AssertionError(
                f"a range read over damaged segment {index} raised {exc!r}, not a "
                "streamcrypt.errors.StreamCryptError"
            ) from exc
        raise AssertionError(
            f"a range read over damaged segment {index} returned {len(got)} bytes; it must raise"
        )


def check_segmented_codec(
    encryptor: Callable[[], Transform],
    decryptor: Callable[[], Transform],
    *,
    read_range: RangeReader | None = None,
    layout: LayoutOf | None = None,
    detects_truncation_at_boundary: bool = True,
    segments: int = 4,
    seed: int = 0,
) -> None:
    """A conformance check for a segmented streaming-encryption format (after trio's
    ``check_two_way_stream``), usable from any test runner.

    ``encryptor()`` and ``decryptor()`` give fresh, matching transforms (same key, same
    associated data); small segments keep the check fast. The rules checked:

    * any chunking of the plaintext or of the ciphertext (empty pieces included) gives
      the same plaintext, at sizes around the segment size;
    * a stream cut at every segment boundary, one byte either side of it, inside the
      header and inside each segment raises a :class:`~streamcrypt.errors.StreamCryptError`;
    * segments swapped, duplicated, dropped, or the stream extended (by a segment, a
      byte, zeros) raise one;
    * no plaintext byte of a segment is released before that segment's tag verified: with
      a byte flipped in segment *i*, the decryptor releases at most the segments before
      *i* (fed whole or in pieces), and whatever it releases is the plaintext's;
    * ``read_range(ciphertext, start, stop)``, where given, returns exactly the bytes full
      decryption gives for every range between segment boundaries, and raises a typed
      error over a damaged segment.

    ``layout(ciphertext)`` says where header and segments lie
    (:class:`~streamcrypt.codecs.SegmentLayout`); leave it out when ``decryptor()`` is a
    :class:`~streamcrypt.codecs.SegmentedDecryptor` (its codec gives the geometry).
    ``detects_truncation_at_boundary=False`` is for a format without an end marker
    (rclone crypt without ``expected_size``): a stream cut exactly at a segment boundary,
    or missing its final segment, may then decrypt, but only to a prefix of the
    plaintext. ``segments`` is how many segments the main sample spans (at least 2). Raises
    :class:`AssertionError` naming the first rule broken.
    """
    if segments < 2:
        raise ValueError("the sample must span at least 2 segments")
    rng = random.Random(seed)
    layout_of = layout or _layout_from_decryptor(decryptor)
    probe = layout_of(_encrypt(encryptor(), [b""]))
    first, full = probe.codec.full_plaintext(0), probe.codec.full_plaintext(1)
    sizes = sorted({0, 1, first - 1, first, first + 1, first + full, first + full + 1})
    _check_chunking(encryptor, decryptor, [s for s in sizes if s >= 0], first + full, rng)
    plaintext = rng.randbytes(first + (segments - 2) * full + full // 2)
    ciphertext = _encrypt(encryptor(), [plaintext])
    sample = _Sample(plaintext, ciphertext, layout_of(ciphertext))
    _codec_expect(
        sample.layout.segment_count == segments and sample.layout.plaintext_size == len(plaintext),
        f"the layout of a {len(plaintext)}-byte sample gives {sample.layout.segment_count} "
        f"segments and {sample.layout.plaintext_size} plaintext bytes, not {segments} and "
        f"{len(plaintext)}",
    )
    boundary = detects_truncation_at_boundary
    _check_truncation(decryptor, sample, boundary_detected=boundary)
    _check_segment_attacks(decryptor, sample, boundary_detected=boundary)
    _check_release_after_tag(decryptor, sample, max(1, full // 3))
    if read_range is not None:
        _check_ranges(read_range, sample)


def check_segmented_format(
    fmt: SegmentedFormat,
    write: FormatOptions,
    read: FormatOptions | None = None,
    *,
    layout: LayoutOf | None = None,
    segments: int = 4,
    seed: int = 0,
) -> None:
    """:func:`check_segmented_codec` over a format descriptor (an entry of
    :data:`streamcrypt.codecs.FORMATS`, or one of your own): encryptors from ``write``,
    decryptors, range reads and the geometry from ``read`` (``write`` when None), the
    truncation rule from ``fmt.detects_truncation_at_boundary``. Give ``layout`` for a
    format without random access whose decryptor is no ``SegmentedDecryptor``."""
    options = write if read is None else read

    def reader(ciphertext: bytes) -> ReadAt:
        return lambda offset, length: ciphertext[offset : offset + length]

    def read_range(ciphertext: bytes, start: int, stop: int) -> bytes:
        return fmt.read_range(options, reader(ciphertext), len(ciphertext), start, stop)

    if fmt.layout is not None and layout is None:
        fmt_layout = fmt.layout

        def layout(ciphertext: bytes) -> SegmentLayout:
            return fmt_layout(options, reader(ciphertext), len(ciphertext))

    check_segmented_codec(
        lambda: fmt.encryptor(write),
        lambda: fmt.decryptor(options),
        read_range=read_range if fmt.layout is not None else None,
        layout=layout,
        detects_truncation_at_boundary=fmt.detects_truncation_at_boundary,
        segments=segments,
        seed=seed,
    )


# ------------------------------------------------------------------ a PKCS#11 token

#: Where distributions install SoftHSM2's PKCS#11 module.
SOFTHSM_MODULES = (
    "/usr/lib/softhsm/libsofthsm2.so",
    "/usr/lib/x86_64-linux-gnu/softhsm/libsofthsm2.so",
    "/usr/lib/aarch64-linux-gnu/softhsm/libsofthsm2.so",
)


@dataclass(frozen=True)
class SoftHsmToken:
    """A SoftHSM2 test token: module path, token label, its (test) PIN, its config file."""

    module: str
    token: str
    pin: str
    conf: str

    def uri(self, label: str, *, pin_env: str | None = None) -> str:
        """The RFC 7512 URI of the key ``label`` in this token."""
        query = f"module-path={self.module}"
        if pin_env is not None:
            query += f"&pin-source=env:{pin_env}"
        return f"pkcs11:token={self.token};object={label}?{query}"

    def pin_source(self) -> str:
        """The PIN, as ``Pkcs11Key(pin=...)`` asks for it (a test token's PIN is no secret)."""
        return self.pin


@functools.cache
def softhsm_token() -> SoftHsmToken:
    """A fresh SoftHSM2 token (label ``streamcrypt-test``, PIN ``123456``) in a temporary
    directory removed at exit, the same one on every call: SoftHSM2 reads its
    configuration (``SOFTHSM2_CONF``, set here in ``os.environ``) once per process, when
    the module initializes, so call this before the first PKCS#11 use. Raises
    :class:`RuntimeError` where SoftHSM2 is not installed,
    :class:`subprocess.CalledProcessError` if ``softhsm2-util`` fails."""
    module = next((p for p in SOFTHSM_MODULES if os.path.exists(p)), None)
    util = shutil.which("softhsm2-util")
    if module is None or util is None:
        raise RuntimeError("SoftHSM2 is not installed (Debian: apt-get install softhsm2)")
    root = tempfile.mkdtemp(prefix="streamcrypt-softhsm-")
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    tokens = os.path.join(root, "tokens")
    os.mkdir(tokens)
    conf = os.path.join(root, "softhsm2.conf")
    with open(conf, "w") as f:
        f.write(
            f"directories.tokendir = {tokens}\nobjectstore.backend = file\n"
            "log.level = ERROR\nslots.removable = false\n"
        )
    os.environ["SOFTHSM2_CONF"] = conf
    token, pin = "streamcrypt-test", "123456"
    subprocess.run(
        [util, "--init-token", "--free", "--label", token, "--pin", pin, "--so-pin", pin + "0"],
        check=True,
        capture_output=True,
    )
    return SoftHsmToken(module, token, pin, conf)


@contextlib.contextmanager
def reflink_mount(size: int = 512 << 20) -> Iterator[str]:
    """A directory on a fresh XFS with reflinks: ``mkfs.xfs -m reflink=1`` on a sparse
    image of ``size`` bytes (XFS takes 300 MiB at least; only what is written takes disk
    space) in a temporary directory, mounted with ``-o loop`` there; on exit unmounted
    (the loop device goes with it) and removed. Needs root, ``mkfs.xfs`` (Debian's
    ``xfsprogs``) and the kernel's xfs: raises :class:`RuntimeError` naming what failed
    and what the tool said."""
    root = tempfile.mkdtemp(prefix="streamcrypt-xfs-")
    image, mountpoint = os.path.join(root, "xfs.img"), os.path.join(root, "mnt")
    mounted = False
    try:
        with open(image, "wb") as f:
            f.truncate(size)
        os.mkdir(mountpoint)
        for argv in (
            ["mkfs.xfs", "-q", "-m", "reflink=1", image],
            ["mount", "-t", "xfs", "-o", "loop", image, mountpoint],
        ):
            try:
                run = subprocess.run(argv, capture_output=True, text=True)
            except FileNotFoundError:
                raise RuntimeError(f"{argv[0]} is not installed (make peers: xfsprogs)") from None
            if run.returncode:
                raise RuntimeError(
                    f"{argv[0]} failed ({run.returncode}): "
                    f"{(run.stderr or run.stdout).strip()} (a loop mount needs root and xfs)"
                )
        mounted = True
        yield mountpoint
    finally:
        if mounted:
            subprocess.run(["umount", mountpoint], check=True, capture_output=True)
        shutil.rmtree(root, ignore_errors=True)
