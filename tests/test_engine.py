"""The async engine: ordering, offload, backpressure, error ordering, on every backend."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor

import anyio
import pytest
from support import age_decrypt, envelope_decrypt

import streamcrypt as sc
from streamcrypt.abc import Buffer, Chain
from streamcrypt.codecs.container import StreamDecryptor, StreamEncryptor
from streamcrypt.engine import OffloadPolicy
from streamcrypt.errors import AuthenticationError, InvalidParameterError, TruncatedStreamError

pytestmark = pytest.mark.anyio

KEY = bytes(range(32))
# Tiny batches and no inline limit, so that small tests exercise the worker path.
THREADED = OffloadPolicy(batch_size=16 << 10, inline_limit=0, max_in_flight=3, adaptive=False)
POLICIES = [pytest.param(None, id="inline"), pytest.param(THREADED, id="threads")]


async def chunks_of(data: bytes, seed: int = 0, max_piece: int = 5000) -> AsyncIterator[bytes]:
    rng = random.Random(seed)
    i = 0
    while i < len(data):
        n = rng.randint(1, max_piece)
        yield data[i : i + n]
        i += n
        await anyio.lowlevel.checkpoint()


async def collect(it: AsyncIterator[bytes]) -> bytes:
    return b"".join([c async for c in it])


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("suite", ["aes-256-gcm", "chacha20-poly1305", "xchacha20-poly1305"])
async def test_async_round_trip(policy: OffloadPolicy | None, suite: str) -> None:
    data = random.Random(7).randbytes(300_000)
    ct = await collect(
        sc.encrypt(chunks_of(data), KEY, suite=suite, segment_size=1024, policy=policy)
    )
    assert sc.decrypt_bytes(ct, KEY) == data
    assert await collect(sc.decrypt(chunks_of(ct, 1), KEY, policy=policy)) == data


@pytest.mark.parametrize("policy", POLICIES)
async def test_empty_source_still_gives_a_complete_stream(policy: OffloadPolicy | None) -> None:
    async def nothing() -> AsyncIterator[bytes]:
        return
        yield b""

    ct = await collect(sc.encrypt(nothing(), KEY, policy=policy))
    assert sc.decrypt_bytes(ct, KEY) == b""


async def test_user_executor_and_sink_callback() -> None:
    data = random.Random(8).randbytes(200_000)
    got: list[bytes] = []

    async def sink(view: memoryview) -> None:
        got.append(bytes(view))

    with ThreadPoolExecutor(2) as pool:
        policy = OffloadPolicy(batch_size=8192, inline_limit=0, executor=pool, adaptive=False)
        await sc.pipeline(StreamEncryptor(KEY, segment_size=1024), policy=policy).run(
            chunks_of(data), sink
        )
    assert sc.decrypt_bytes(b"".join(got), KEY) == data


async def test_anyio_byte_stream_as_source_and_sink() -> None:
    data = random.Random(9).randbytes(100_000)
    send, receive = anyio.create_memory_object_stream[bytes](4)

    async def produce() -> None:
        async with send:
            async for c in chunks_of(data):
                await send.send(c)

    out: list[bytes] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(produce)
        async with receive:
            out.extend([c async for c in sc.encrypt(receive, KEY, policy=THREADED)])
    assert sc.decrypt_bytes(b"".join(out), KEY) == data


@pytest.mark.parametrize("policy", POLICIES)
async def test_tampering_releases_verified_prefix_then_fails(policy: OffloadPolicy | None) -> None:
    data = random.Random(10).randbytes(64 * 1024)
    ct = bytearray(sc.encrypt_bytes(data, KEY, segment_size=1024))
    header = len(ct) - 64 * (1024 + 16) - 16
    ct[header + 40 * (1024 + 16) + 5] ^= 0x80  # segment 40
    got = b""
    with pytest.raises(AuthenticationError):
        async for c in sc.decrypt(chunks_of(bytes(ct), 2), KEY, policy=policy):
            got += c
    assert got == data[: 40 * 1024]


@pytest.mark.parametrize("policy", POLICIES)
async def test_truncated_stream_fails_at_the_end(policy: OffloadPolicy | None) -> None:
    data = random.Random(11).randbytes(10 * 1024)
    ct = sc.encrypt_bytes(data, KEY, segment_size=1024)
    got = b""
    with pytest.raises(TruncatedStreamError):
        async for c in sc.decrypt(chunks_of(ct[: len(ct) - 16], 3), KEY, policy=policy):
            got += c
    assert got == data


async def test_pipeline_composes_with_plain_stages_and_chains() -> None:
    data = random.Random(12).randbytes(50_000)
    enc = StreamEncryptor(KEY, segment_size=1024)
    pipe = sc.pipeline(enc, policy=THREADED) | _Upper()
    assert isinstance(pipe, sc.Pipeline) and len(pipe.stages) == 2
    out = await pipe.collect(chunks_of(data))
    assert out == out.upper()
    chain = StreamDecryptor(KEY) | _Counter()
    assert isinstance(chain, Chain)
    counter = chain.stages[1]
    plain = await sc.pipeline(chain, policy=THREADED).collect(sc.encrypt_bytes(data, KEY))
    assert plain == data and isinstance(counter, _Counter) and counter.seen == len(data)


async def test_bad_sources_and_policies() -> None:
    with pytest.raises(InvalidParameterError):
        await sc.pipeline(StreamEncryptor(KEY)).collect(12345)  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError):
        OffloadPolicy(batch_size=0)
    with pytest.raises(InvalidParameterError):
        sc.pipeline()


class _PassThrough:
    """A plain transform that returns its input as it is (as a tap does)."""

    def __init__(self) -> None:
        self.given: list[object] = []

    def update(self, data: bytes | bytearray | memoryview, /) -> bytes:
        self.given.append(data)
        return data  # type: ignore[return-value]  # as it came: the test checks its type

    def finalize(self) -> bytes:
        return b""


@pytest.mark.parametrize("policy", [sc.engine.DEFAULT_POLICY, None], ids=["default", "inline"])
async def test_a_plain_stage_after_a_segmented_one_gets_bytes_it_may_pass_on(
    policy: OffloadPolicy | None,
) -> None:
    """A segmented stage feeding a plain one writes new ``bytes`` (never views of a
    buffer it reuses), and the plain stage gets them whole (up to its batch size): a
    pass-through (a tap, the AWS signature gate of an unsigned message) hands on the very
    objects, uncopied."""
    data = random.Random(5).randbytes(3 * (1 << 20) + 123)
    ct = sc.encrypt_bytes(data, KEY)
    tail = _PassThrough()

    async def chunks() -> AsyncIterator[bytes]:
        for off in range(0, len(ct), 1 << 20):
            yield ct[off : off + (1 << 20)]

    out = [
        piece
        async for piece in sc.pipeline(StreamDecryptor(KEY), tail, policy=policy).stream(chunks())
    ]
    assert b"".join(out) == data
    assert tail.given and all(type(g) is bytes for g in tail.given)
    assert len(out) == len(tail.given) and all(o is g for o, g in zip(out, tail.given, strict=True))


@pytest.mark.parametrize("verb", ["encrypt", "decrypt"])
@pytest.mark.parametrize("chunk", [1 << 20, 64 << 10], ids=["1MiB", "64KiB"])
@pytest.mark.parametrize("policy", [sc.engine.DEFAULT_POLICY, None], ids=["default", "inline"])
async def test_event_loop_never_waits_long(
    policy: OffloadPolicy | None, chunk: int, verb: str
) -> None:
    """A 1 ms ticker's longest gap while 256 MiB stream through from a source that never
    yields to the loop by itself: only the engine's checkpoints (between inline batches,
    while waiting for workers) let it run. Without them the gap would be the whole
    stream's time (about 0.2 s here). The loop thread's CPU time between ticks is what
    the engine decides (a descheduled process, on a loaded machine, stretches the wall
    time of one 1 MiB piece to tens of ms, but not its CPU time); the wall-clock gap
    must still stay well under the whole stream (a blocking wait would not use CPU).
    Chunks under a batch, each run at once without one, count toward the same bound
    (64 KiB chunks once held the loop for the whole stream). Decrypting, a chunk that
    is one segment's worth goes the way the stream hands out itself (no emit chain): the
    same bound."""
    data = bytes(chunk)
    gaps: list[float] = []
    cpu_gaps: list[float] = []
    ct = memoryview(sc.encrypt_bytes(bytes(256 << 20), KEY)) if verb == "decrypt" else None

    async def source() -> AsyncIterator[Buffer]:
        for off in range(0, 256 << 20, chunk):
            yield data if ct is None else ct[off : off + chunk]
        if ct is not None:
            yield ct[256 << 20 :]

    async def ticker() -> None:
        last, last_cpu = time.perf_counter(), time.thread_time()
        while True:
            await anyio.sleep(0.001)
            now, now_cpu = time.perf_counter(), time.thread_time()
            gaps.append(now - last)
            cpu_gaps.append(now_cpu - last_cpu)
            last, last_cpu = now, now_cpu

    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        await anyio.sleep(0.005)
        n = 0
        started = time.perf_counter()
        run = sc.encrypt if ct is None else sc.decrypt
        async for c in run(source(), KEY, policy=policy):
            n += len(c)
        elapsed = time.perf_counter() - started
        tg.cancel_scope.cancel()
    assert n >= 256 << 20
    assert len(gaps) > 10
    assert max(cpu_gaps) < 0.04, f"the loop ran {max(cpu_gaps) * 1e3:.1f} ms of CPU unbroken"
    longest = max(gaps)
    assert longest < elapsed / 2, f"the loop was held {longest * 1e3:.1f} of {elapsed * 1e3:.0f} ms"


@pytest.mark.parametrize("policy", [sc.engine.DEFAULT_POLICY, None], ids=["default", "inline"])
async def test_records_that_hand_out_nothing_still_give_the_loop_its_turn(
    policy: OffloadPolicy | None,
) -> None:
    """An RFC 8188 body of 128 MiB of records that hold no data (each all padding: its
    job runs and hands out nothing), read in chunks of a quarter record from a source
    that never yields to the loop: the loop still gets its turn every inline batch of
    work. A push that ran jobs is never taken for one that was only held (``_HELD``,
    which drivers skip, turn check included: no job ran, no turn is owed), whatever it
    hands out."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    from streamcrypt.codecs import ece

    rs, count, ikm, salt = 64 << 10, 2048, KEY[:16], bytes(16)
    cek, nonce = ece._derive(ikm, salt)
    aead, base = AESGCM(cek), int.from_bytes(nonce, "big")
    records = [
        aead.encrypt((base ^ i).to_bytes(12, "big"), pad, None)
        for i, pad in enumerate([b"\x01" + bytes(rs - 17)] * (count - 1) + [b"\x02"])
    ]
    body = memoryview(b"".join([ece.EceHeader(salt, rs).to_bytes(), *records]))
    chunk = rs // 4
    gaps: list[float] = []

    async def source() -> AsyncIterator[Buffer]:
        for off in range(0, len(body), chunk):
            yield body[off : off + chunk]

    async def ticker() -> None:
        last = time.perf_counter()
        while True:
            await anyio.sleep(0.001)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        await anyio.sleep(0.005)
        gaps.clear()
        started = time.perf_counter()
        out = [c async for c in sc.pipeline(ece.EceDecryptor(ikm), policy=policy).stream(source())]
        elapsed = time.perf_counter() - started
        tg.cancel_scope.cancel()
    assert out == []
    assert len(gaps) > 10, f"the loop ran {len(gaps)} times in {elapsed * 1e3:.0f} ms"
    longest = max(gaps)
    assert longest < elapsed / 2, f"the loop was held {longest * 1e3:.1f} of {elapsed * 1e3:.0f} ms"


@pytest.mark.parametrize("which", ["age", "envelope"])
async def test_encryptor_kdf_runs_off_the_loop(which: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """An encryptor's password KDF (scrypt for age, Argon2id for the envelope) runs where
    the engine runs its first feed: on a worker, never on the event loop."""
    import threading

    from streamcrypt.codecs import age as age_codec
    from streamcrypt.codecs import envelope as envelope_codec
    from streamcrypt.codecs.age import _scrypt as age_scrypt
    from streamcrypt.codecs.envelope import _recipients as envelope_recipients

    loop_thread = threading.current_thread()
    threads: list[bool] = []
    if which == "age":
        real_scrypt = age_scrypt._scrypt

        def spy_scrypt(*args: object) -> bytes:
            threads.append(threading.current_thread() is loop_thread)
            return real_scrypt(*args)  # type: ignore[arg-type]

        monkeypatch.setattr(age_scrypt, "_scrypt", spy_scrypt)
        enc: object = age_codec.AgeEncryptor(passphrase="correct horse", work_factor=10)
    else:
        real_derive = envelope_recipients.derive_key_from_password

        def spy_derive(*args: object, **kwargs: object) -> object:
            threads.append(threading.current_thread() is loop_thread)
            return real_derive(*args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(envelope_recipients, "derive_key_from_password", spy_derive)
        enc = envelope_codec.EnvelopeEncryptor(
            passphrase="correct horse", work_factor=sc.keys.INTERACTIVE
        )
    assert threads == []  # nothing derived in the constructor
    out = await sc.pipeline(enc).collect(chunks_of(b"x" * 100_000))  # type: ignore[arg-type]
    assert threads == [False]
    if which == "age":
        assert age_decrypt(out, passphrase="correct horse") == b"x" * 100_000
    else:
        got = envelope_decrypt(out, passphrase="correct horse")
        assert got == b"x" * 100_000


class _Upper:
    def update(self, data: bytes | bytearray | memoryview) -> bytes:
        return bytes(data).upper()

    def finalize(self) -> bytes:
        return b""


class _Counter:
    def __init__(self) -> None:
        self.seen = 0

    def update(self, data: bytes | bytearray | memoryview) -> bytes:
        self.seen += len(data)
        return bytes(data)

    def finalize(self) -> bytes:
        return b""


@pytest.mark.parametrize("policy", POLICIES)
async def test_feeder_push_mode(policy: OffloadPolicy | None) -> None:
    data = random.Random(13).randbytes(100_000)
    out: list[bytes] = []

    async def sink(view: memoryview) -> None:
        out.append(bytes(view))

    feeder = sc.pipeline(StreamEncryptor(KEY, segment_size=1024), policy=policy).feeder(sink)
    async for c in chunks_of(data):
        await feeder.send(bytearray(c))  # a writable buffer is copied, never kept
    await feeder.aclose()
    await feeder.aclose()  # idempotent
    assert sc.decrypt_bytes(b"".join(out), KEY) == data
    with pytest.raises(sc.errors.AlreadyFinalizedError):
        await feeder.send(b"late")


@pytest.mark.parametrize("policy", POLICIES)
async def test_feeder_flush_emits_complete_segments_at_once(policy: OffloadPolicy | None) -> None:
    out: list[bytes] = []

    async def sink(view: memoryview) -> None:
        out.append(bytes(view))

    big = (
        OffloadPolicy(batch_size=1 << 30, inline_limit=0, adaptive=False)
        if policy is not None
        else None
    )
    feeder = sc.pipeline(StreamDecryptor(KEY), policy=big).feeder(sink)
    data = random.Random(14).randbytes(5000)
    ct = sc.encrypt_bytes(data, KEY, segment_size=1024)
    await feeder.send(ct[:3000])  # the header and two whole segments
    if big is not None:
        assert out == []  # held for a batch that never fills
    await feeder.flush()
    assert b"".join(out) == data[:2048]  # exactly the complete segments, nothing partial
    await feeder.send(ct[3000:])
    await feeder.aclose()
    assert b"".join(out) == data


@pytest.mark.parametrize("to_stream", [False, True], ids=["callable", "byte-stream"])
async def test_small_pushes_run_at_once_and_fail_after_their_verified_part(
    to_stream: bool,
) -> None:
    """A push under the inline limit with nothing in flight is opened before send()
    returns (no batch gathered, no flush needed), into a reused buffer for a callable
    sink and new objects for a byte stream; a tampered segment releases the segments
    before it, then raises AuthenticationError, and the feeder stays failed."""
    data = random.Random(16).randbytes(20_000)
    ct = bytearray(sc.encrypt_bytes(data, KEY, segment_size=1024))
    out: list[bytes] = []

    async def sink(view: memoryview) -> None:
        out.append(bytes(view))

    class _ByteSink(anyio.abc.ByteSendStream):
        async def send(self, item: bytes) -> None:
            assert isinstance(item, bytes)  # a stream keeps what it is given: no views
            out.append(item)

        async def aclose(self) -> None:
            pass

    policy = sc.OffloadPolicy()  # inline_limit 256 KiB: every push below is small
    chain = sc.pipeline(StreamDecryptor(KEY), policy=policy)
    feeder = chain.feeder(_ByteSink() if to_stream else sink)
    seg = 1024 + 16
    head = len(ct) - 19 * seg - (20_000 - 19 * 1024 + 16)  # 19 whole segments, then the last
    await feeder.send(bytes(ct[: head + 100]))  # the header: read through a batch
    await feeder.flush()
    assert out == []
    await feeder.send(bytes(ct[head + 100 : head + 3 * seg + 10]))
    assert b"".join(out) == data[:3072]  # three whole segments, before any flush
    ct[head + 4 * seg + 7] ^= 1  # inside the fifth segment
    with pytest.raises(AuthenticationError):
        await feeder.send(bytes(ct[head + 3 * seg + 10 : head + 8 * seg]))
    assert b"".join(out) == data[:4096]  # the fourth verified and came out; nothing after
    with pytest.raises(sc.errors.StreamCryptError):
        await feeder.send(bytes(ct[head + 8 * seg :]))
    assert b"".join(out) == data[:4096]


async def test_a_sink_failing_under_a_small_push_breaks_the_feeder() -> None:
    """Output lost to a failing consumer must never be skipped over: after it, every
    push raises instead of emitting later segments after a gap."""
    data = random.Random(18).randbytes(10_000)
    ct = sc.encrypt_bytes(data, KEY, segment_size=1024)
    out: list[bytes] = []
    fail = [True]

    async def sink(view: memoryview) -> None:
        if fail[0]:
            fail[0] = False
            raise OSError("the consumer's connection went away")
        out.append(bytes(view))

    feeder = sc.pipeline(StreamDecryptor(KEY), policy=sc.OffloadPolicy()).feeder(sink)
    await feeder.send(ct[:100])  # the header, read through a batch: nothing to emit yet
    await feeder.flush()
    with pytest.raises(OSError):
        await feeder.send(ct[100:3000])  # small: run at once; the sink fails
    with pytest.raises(sc.errors.BrokenTransformError):
        await feeder.send(ct[3000:6000])
    assert out == []


async def test_a_feeder_cancelled_handing_out_an_inline_push_is_broken_for_good() -> None:
    """A push the feeder runs at once hands its output pieces to the sink itself (no
    runner around it, issue 28): cancelled between two of them, the feeder is broken
    for good, its send and flush raise, and nothing after the lost piece is emitted;
    an idle feeder's flush emits nothing."""
    data = random.Random(19).randbytes(1 << 20)
    ct = sc.encrypt_bytes(data, KEY, segment_size=1024)
    out: list[bytes] = []

    async def sink(view: memoryview) -> None:
        out.append(bytes(view))
        await anyio.sleep(1 if len(out) == 2 else 0)

    policy = OffloadPolicy(inline_limit=1 << 20)
    feeder = sc.pipeline(StreamDecryptor(KEY), policy=policy).feeder(sink)
    await feeder.send(ct[:100])  # the header, read through a batch
    await feeder.flush()
    await feeder.send(ct[100:20_000])  # run at once: one piece
    await feeder.flush()
    emitted = len(out)
    assert emitted == 1
    with anyio.move_on_after(0.2):
        await feeder.send(ct[20_000:800_000])  # run at once: more than one output piece
    assert len(out) == 2  # cancelled while the sink held the second
    with pytest.raises(sc.errors.BrokenTransformError):
        await feeder.flush()
    with pytest.raises(sc.errors.BrokenTransformError):
        await feeder.send(ct[800_000:])
    assert len(out) == 2 and b"".join(out) == data[: sum(map(len, out))]


@pytest.mark.parametrize("policy", POLICIES)
async def test_a_kept_feeder_hands_its_sink_bytes_to_keep(policy: OffloadPolicy | None) -> None:
    """feeder(sink, kept=True): the callable gets bytes objects it may keep (never views of
    a buffer reused later), through the small-push path and the batch path alike."""
    data = random.Random(17).randbytes(3 << 20)
    ct = sc.encrypt_bytes(data, KEY, segment_size=4096)
    kept: list[object] = []

    async def sink(piece: object) -> None:
        kept.append(piece)

    feeder = sc.pipeline(StreamDecryptor(KEY), policy=policy).feeder(sink, kept=True)
    await feeder.send(ct[:5000])
    await feeder.flush()
    for off in range(5000, len(ct), 100_000):  # small pushes, then one large below
        await feeder.send(ct[off : off + 100_000])
        await feeder.flush()
        if off > 1 << 20:
            await feeder.send(ct[off + 100_000 :])
            break
    await feeder.aclose()
    assert all(type(piece) is bytes for piece in kept)
    assert b"".join(kept) == data  # every piece intact after all later work


@pytest.mark.parametrize(
    "policy", [None, sc.OffloadPolicy(), THREADED], ids=["inline", "default", "threads"]
)
async def test_chained_segmented_stages_rekey_exactly(policy: OffloadPolicy | None) -> None:
    """decrypt | encrypt under another key: the downstream stage must never keep views of
    the upstream's recycled output buffers (this once sealed overwritten plaintext)."""
    other = bytes(range(32, 64))
    data = random.Random(15).randbytes(24 << 20)
    ct = sc.encrypt_bytes(data, KEY)
    rekeyed = await sc.pipeline(
        StreamDecryptor(KEY), StreamEncryptor(other), policy=policy
    ).collect(ct)
    assert sc.decrypt_bytes(rekeyed, other) == data
    twice = sc.encrypt_bytes(sc.encrypt_bytes(data, other), KEY)
    chain = sc.pipeline(StreamDecryptor(KEY), StreamDecryptor(other), policy=policy)
    assert await chain.collect(twice) == data


async def test_header_is_read_off_the_event_loop() -> None:
    """Reading a header may run scrypt or Argon2id: the engine does it on a worker."""
    import threading

    on_loop: list[bool] = []
    loop_thread = threading.current_thread()

    class Spy(StreamDecryptor):
        def feed(self, data: bytes | bytearray | memoryview) -> list:  # type: ignore[type-arg]
            on_loop.append(threading.current_thread() is loop_thread)
            return super().feed(data)

    data = random.Random(16).randbytes(200_000)
    ct = sc.encrypt_bytes(data, KEY, segment_size=1024)
    assert await sc.pipeline(Spy(KEY), policy=THREADED).collect(chunks_of(ct)) == data
    assert on_loop[0] is False  # the header phase ran on a worker thread
    assert all(on_loop[1:])  # after it, feed is cheap bookkeeping on the loop


def _cancel_trial(seed: int, stages: str) -> str:
    """Feed 4 MiB through ``stages`` in 256 KiB sends, cancel one send at a random moment,
    carry on sending, close; returns how it ended. The only acceptable outcomes: the
    output is complete and correct, or a later call is refused with a typed error."""
    from streamcrypt.errors import BrokenTransformError, StreamCryptError
    from streamcrypt.primitives import Sha256Tap
    from streamcrypt.primitives.hazmat import AesCtrDecryptor, AesCtrEncryptor

    rng = random.Random(seed)
    data = rng.randbytes(4 << 20)
    iv = bytes(16)
    policy = OffloadPolicy(inline_limit=0, batch_size=64 << 10, adaptive=False)
    if stages == "ctr":
        chain: list[object] = [AesCtrEncryptor(KEY, iv)]
    elif stages == "tap":
        chain = [Sha256Tap()]
    else:
        chain = [AesCtrEncryptor(KEY, iv), StreamEncryptor(KEY, segment_size=4096)]
    out = bytearray()

    async def sink(view: memoryview) -> None:
        out.extend(view)

    async def main() -> str:
        feeder = sc.pipeline(*chain, policy=policy).feeder(sink)  # type: ignore[arg-type]
        victim = rng.randrange(16)
        delay = rng.random() * 0.004
        try:
            for i in range(16):
                piece = data[i << 18 : (i + 1) << 18]
                if i == victim:
                    with anyio.move_on_after(delay):
                        await feeder.send(piece)
                else:
                    await feeder.send(piece)
            await feeder.aclose()
        except BrokenTransformError:
            return "refused"
        except StreamCryptError as exc:  # pragma: no cover - any other typed error
            return f"refused: {type(exc).__name__}"
        return "complete"

    ended = anyio.run(main)
    if ended == "complete":
        if stages == "ctr":
            assert AesCtrDecryptor(KEY, iv).update(bytes(out)) == data, "short or wrong output"
        elif stages == "tap":
            assert bytes(out) == data, "short output"
        else:
            plain = sc.decrypt_bytes(bytes(out), KEY)
            assert AesCtrDecryptor(KEY, iv).update(plain) == data, "short or wrong output"
    return ended


@pytest.mark.parametrize("stages", ["ctr", "tap", "ctr-then-segmented"])
def test_a_cancelled_send_never_runs_a_stateful_stage_twice_at_once(stages: str) -> None:
    """Cancel ``Feeder.send`` at random points while a plain (stateful) stage runs on a
    worker: the pipeline is broken for good (later calls raise BrokenTransformError
    naming the first failure), never ``RuntimeError: Already borrowed`` from a second
    ``update`` beside the first, never silently short output (issue 27 #5)."""
    ends = [_cancel_trial(seed, stages) for seed in range(12)]
    assert "refused" in ends  # the cancellation did land in a send


@pytest.mark.parametrize("chunk", [1 << 20, 64 << 10], ids=["1MiB", "64KiB"])
async def test_a_stream_keeps_no_reference_to_a_piece_it_handed_out(chunk: int) -> None:
    """Every piece of ``encrypt()`` / ``decrypt()`` is the consumer's alone once handed
    out: a reference the stream kept while the next push makes its output objects would
    keep their memory from the allocator (1 MiB chunks decrypted 1.8 us a segment slower,
    and peak memory grows by what is held)."""
    import sys

    data = random.Random(30).randbytes(4 << 20)
    ct = sc.encrypt_bytes(data, KEY)
    for run, given in ((sc.encrypt, data), (sc.decrypt, ct)):
        pieces = run(chunks_of(given, max_piece=chunk), KEY, policy=None)
        # The comprehension's own reference and the argument's: 2.
        counts = [sys.getrefcount(piece) async for piece in pieces]
        assert len(counts) > 4 and set(counts) == {2}, counts


async def test_a_cancelled_wait_for_a_worker_leaves_the_work_and_the_loop_alone() -> None:
    """``wait_future``: a wait cancelled before the work ends leaves the work running, a
    later wait gets its result, and the first wait's wake-up, arriving after it stopped
    waiting, is dropped (on asyncio: resolving its cancelled future would hand the loop
    an ``InvalidStateError``)."""
    import sniffio

    from streamcrypt.engine import wait_future
    from streamcrypt.engine._offload import start

    errors: list[object] = []
    if sniffio.current_async_library() == "asyncio":
        import asyncio

        asyncio.get_running_loop().set_exception_handler(lambda _loop, ctx: errors.append(ctx))
    gate = threading.Event()
    task = start(gate.wait, 5.0)
    with anyio.move_on_after(0.05) as scope:
        await wait_future(task)
    assert scope.cancelled_caught and not task.done()
    gate.set()
    assert await wait_future(task) is True
    await anyio.sleep(0.05)  # the loop runs the first wait's late wake-up
    assert errors == []

