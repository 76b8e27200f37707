"""Encrypted anyio byte streams: ``EncryptedStream`` and friends, over the record layer.

Theory of operation
-------------------
The protocol (preamble, Noise handshake framing, records, rekeying) is the sans-I/O
:mod:`streamcrypt.codecs.records`; this module moves bytes between it and a transport,
the way anyio's ``TLSStream`` sits over ``ssl.MemoryBIO``: :meth:`EncryptedStream.wrap`
pumps the :class:`~streamcrypt.codecs.records.Handshake` (vetting peer keys with
``accept_peer``, under ``handshake_timeout``), then ``send()`` hands the
:class:`~streamcrypt.codecs.records.RecordStream`'s sealing jobs to the engine's one
scheduler and writes each batch as it comes, and ``receive()`` feeds it what the
transport gives and returns what its opening jobs verified.

Transports. :func:`connect` and :func:`serve` on asyncio (uvloop included) run over
``ProtocolStream`` (private, ``_socket.py``), streamcrypt's asyncio protocol (one
reused receive buffer, no per-read pause and resume; measured 1.7-5x anyio's TCP stream
for plaintext), and then seal each batch into recycled buffers, since its ``send()``
returns only once the kernel has every byte; on trio, and under
:meth:`EncryptedStream.wrap` of any other byte stream, nothing changes. The protocol on
the wire is the same either way.

Options are explicit keywords of :meth:`EncryptedStream.wrap` (documented there),
:func:`connect`, :func:`serve` and :class:`EncryptedListener` (``_listener.py``),
checked into one private frozen ``StreamConfig`` (``_config.py``).

Limits. Every wait on the peer is bounded: the handshake by ``handshake_timeout``; a
``receive()`` by ``idle_timeout`` while nothing of the next record has come, and each
record by ``record_timeout`` from the read that brought its first byte to its last (a
peer that sends a record header and stalls, or trickles the record a byte at a time, is
cut ``record_timeout`` after the record began); a ``send()`` that cannot hand a batch to
the transport for ``idle_timeout``. A timeout raises :class:`~streamcrypt.errors.PeerTimeoutError` and
breaks the stream. Over a ``ProtocolStream`` the timeouts
are its own (``read``/``write`` with a ``stall_limit``: a float per wait and one lazily
armed loop timer per direction, nothing per call); over another transport on asyncio a
deadline is armed only once a call really waits, as one loop timer that cancels the
awaited future (``_deadline.py``); elsewhere it is an anyio cancel scope (on the
small-message path a cancel scope cost as much as the crypto). A read that is exactly
one small data record is opened from the chunk read, without the record buffer or the
scheduler. Buffered ciphertext per connection is at most one transport read
(``MAX_READ``, 1 MiB: the record layer parses each read in place) plus one record
(65 KiB: the one record spanning two reads is the only ciphertext copied), plus, over a
``ProtocolStream``, the bytes its receive buffer holds for
the next read (at most ``READ_BUFFER``, 1 MiB; reading
pauses while it is full); opened plaintext waiting for
``receive()`` is at most what the receive scheduler took in one go (one 1 MiB batch when
it runs inline, its window when it offloads, which only a peer holding the key can cause).

Ending. The authenticated close record means the sender finished, so one method
(``EncryptedStream._end``) decides when it is sent: by :meth:`~EncryptedStream.send_eof`,
when ``async with`` is left without an exception, and when a listener's handler returns.
Everything else is an abort, the transport closed without it: ``async with`` left by
an exception or a cancellation, a handler that raised, a stream broken by a failed or
cancelled send, and :meth:`~EncryptedStream.aclose` not preceded by ``send_eof()``. The
peer of an abort gets :class:`~streamcrypt.errors.TruncatedStreamError` (or anyio's
:class:`~anyio.BrokenResourceError`), never :class:`anyio.EndOfStream`.

Failure rules: a record that does not authenticate raises
:class:`~streamcrypt.errors.AuthenticationError` (replays, reordering and tampering land
here) and breaks the stream; the transport ending inside a record, or without the close
record, raises :class:`~streamcrypt.errors.TruncatedStreamError`; a length shorter than a
tag raises :class:`~streamcrypt.errors.FormatError`. Once a sealed record may have been
lost in sending (an error, a timeout or a cancellation during the transport send), the
counters of the two sides can no longer agree and the stream is broken for good. After
any such failure every call raises :class:`anyio.BrokenResourceError`. A cancelled
``receive()`` loses nothing: records whose counters advanced stay with the scheduler and
the next call returns them.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Final, cast

import anyio
from anyio import (
    BrokenResourceError,
    BusyResourceError,
    ClosedResourceError,
    EndOfStream,
    ResourceGuard,
    TypedAttributeSet,
    aclose_forcefully,
    typed_attribute,
)
from anyio.abc import (
    AnyByteStream,
    ByteReceiveStream,
    ByteStream,
)
from anyio.lowlevel import cancel_shielded_checkpoint, checkpoint_if_cancelled

from ..abc import Buffer
from ..codecs.records import (
    CLOSE,
    CONFIRM,
    DATA,
    DEFAULT_REKEY_INTERVAL,
    MAX_RECORD_DATA,
    Complete,
    Handshake,
    NeedData,
    ProtocolConfig,
    RecordStream,
    VetPeer,
)
from ..engine import DEFAULT_POLICY, OffloadPolicy, OrderedBatches
from ..errors import (
    FormatError,
    HandshakeError,
    PeerRejectedError,
    PeerTimeoutError,
    StreamCryptError,
    TruncatedStreamError,
)
from ._config import (
    DEFAULT_HANDSHAKE_TIMEOUT,
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_RECORD_TIMEOUT,
    AcceptPeer,
    Cipher,
    KeyInput,
    NoiseHash,
    StreamConfig,
    config_of,
)
from ._deadline import timed_out, with_timeout
from ._socket import ProtocolStream, on_asyncio

#: ``max_bytes`` asked of the transport per read while records are opened inline; while
#: the receive scheduler offloads, a read may take up to ``MAX_READ`` so that one read can
#: hold a run worth a worker. 256 KiB measured best for the inline path (1 MiB reads cut
#: ChaChaPoly over asyncio streams from 0.72 to 0.57 GB/s: one large inline decrypt per
#: read overlaps less with the sender).
_RECV_SIZE: Final = 1 << 18
#: Most ciphertext bytes asked of the transport in one read (1 MiB): with one record, the
#: bound on buffered ciphertext per connection.
MAX_READ: Final = 1 << 20

#: Most buffered bytes the small-read path opens record by record, without jobs: small
#: messages, while bulk reads (full 64 KiB records) keep the scheduler path they were
#: measured on.
_SMALL_READ: Final = 16 << 10

#: Verified pieces waiting for ``receive()`` are joined into one ``bytes`` only up to this
#: size (64 KiB); a larger piece is returned alone, uncopied, even if ``max_bytes`` would
#: take more: a fresh multi-MiB join costs a page fault per 4 KiB, more than the AES-GCM
#: that made it, while a second ``receive()`` call costs a few microseconds.
_JOIN_LIMIT: Final = 64 << 10


class EncryptedStreamAttribute(TypedAttributeSet):
    """Typed extra attributes of an :class:`EncryptedStream` (merged over the transport's)."""

    #: the peer's static X25519 public key (32 bytes), or ``None`` (NNpsk0, NK server side)
    peer_static_key: bytes | None = typed_attribute()
    #: the Noise handshake hash: a channel binding both sides share
    handshake_hash: bytes = typed_attribute()
    #: the full Noise protocol name, e.g. ``"Noise_XX_25519_AESGCM_BLAKE2s"``
    protocol_name: str = typed_attribute()
    #: ``True`` on the side that accepted the connection
    server_side: bool = typed_attribute()


#: What a send that timed out waited for.
_NO_TAKER: Final = "the transport took no data"


class _State(enum.Enum):
    """Where an :class:`EncryptedStream` is: the one place its life is kept.

    ``HANDSHAKING`` -> ``OPEN``; the close record sent (``send_eof``) -> ``SEND_CLOSED``,
    the peer's received -> ``RECEIVE_CLOSED``, both -> ``ENDED``; any failure ->
    ``BROKEN`` (for good); ``aclose()`` -> ``CLOSED`` from anywhere.
    """

    HANDSHAKING = "handshaking"
    OPEN = "open"
    SEND_CLOSED = "send-closed"
    RECEIVE_CLOSED = "receive-closed"
    ENDED = "ended"
    BROKEN = "broken"
    CLOSED = "closed"


# The members as module globals: an Enum attribute lookup costs ~80 ns on 3.11, and
# send()/receive() test the state on every call.
_HANDSHAKING, _OPEN, _SEND_CLOSED, _RECEIVE_CLOSED, _ENDED, _BROKEN, _CLOSED = _State
#: After the close record was sent (this side) / received (the peer's).
_SENT_CLOSE: Final = {_OPEN: _SEND_CLOSED, _RECEIVE_CLOSED: _ENDED}
_GOT_CLOSE: Final = {_OPEN: _RECEIVE_CLOSED, _SEND_CLOSED: _ENDED}


@dataclass(eq=False, repr=False)
class EncryptedStream(ByteStream):
    """An anyio :class:`~anyio.abc.ByteStream` encrypted with Noise; create with :meth:`wrap`.

    ``send()`` seals at once; ``receive()`` returns verified plaintext only and raises
    :class:`~streamcrypt.errors.AuthenticationError`,
    :class:`~streamcrypt.errors.TruncatedStreamError`,
    :class:`~streamcrypt.errors.FormatError` or
    :class:`~streamcrypt.errors.PeerTimeoutError` (then the stream is broken and later
    calls raise :class:`anyio.BrokenResourceError`); :class:`anyio.EndOfStream` only after
    the peer's authenticated close. Two concurrent senders (or receivers) raise
    :class:`anyio.BusyResourceError`. Extra attributes: :class:`EncryptedStreamAttribute`.

    :var transport_stream: the wrapped stream
    """

    transport_stream: AnyByteStream
    _config: StreamConfig
    _server_side: bool
    _records: RecordStream | None = field(default=None, init=False)
    _protocol_name: str = field(default="", init=False)
    _peer_static: bytes | None = field(default=None, init=False)
    _handshake_hash: bytes = field(default=b"", init=False)
    #: verified plaintext waiting for receive(), then possibly the failure found after it
    _pending: deque[bytes | StreamCryptError] = field(default_factory=deque, init=False)
    _pending_pos: int = field(default=0, init=False)
    _sending: OrderedBatches = field(init=False)
    _small_send: int = field(default=0, init=False)
    _small_receive: int = field(default=0, init=False)
    _lazy_deadlines: bool = field(default=False, init=False)
    _sized_reads: bool = field(default=False, init=False)
    _protocol_stream: ProtocolStream | None = field(default=None, init=False)
    _read_size: int = field(default=_RECV_SIZE, init=False)
    #: ``(records received when the partial record began, its deadline)``
    _record_clock: tuple[int, float] | None = field(default=None, init=False)
    _receiving: OrderedBatches = field(init=False)
    _state: _State = field(default=_HANDSHAKING, init=False)
    #: the failure that broke the stream (named by later calls' BrokenResourceError)
    _failure: BaseException | None = field(default=None, init=False)
    _send_guard: ResourceGuard = field(
        default_factory=lambda: ResourceGuard("sending to"), init=False
    )
    _receive_guard: ResourceGuard = field(
        default_factory=lambda: ResourceGuard("reading from"), init=False
    )

    def __post_init__(self) -> None:
        policy = self._config.policy
        # Work below the policy's inline limit never leaves the loop: a write of one
        # record, or a small buffer of received records, skips the scheduler altogether.
        limit = MAX_RECORD_DATA + 1 if policy is None else policy.inline_limit
        self._small_send = min(MAX_RECORD_DATA, limit - 1)
        self._small_receive = min(_SMALL_READ, limit - 1)
        self._lazy_deadlines = on_asyncio()
        self._sized_reads = isinstance(self.transport_stream, ByteReceiveStream)
        # Over a ProtocolStream this stream reads and writes through its guard-free
        # ``read``/``write``, with the timeouts its waits keep (no wrapper, no timer per
        # call). A sealed batch goes to the transport in one write (a 1 MiB send() is one
        # write); the write returns only once the loop gave everything to the kernel, so
        # batches are sealed into a few recycled buffers ("reuse"): fresh output would
        # cost a page fault per 4 KiB, more than sealing it.
        if isinstance(self.transport_stream, ProtocolStream):
            self._protocol_stream = self.transport_stream
        reuse = self._protocol_stream is not None
        self._sending = OrderedBatches(policy, site="socket-send", piece=1 << 62, reuse=reuse)
        self._receiving = self._new_receiver()
        self._read_size = self._reads_for(self._receiving)

    @staticmethod
    def _reads_for(sched: OrderedBatches) -> int:
        """``max_bytes`` per transport read: a run worth the scheduler's budget, within
        ``MAX_READ``. The budget moves only as batches run, so it is read again after
        each, not on every small read."""
        return min(MAX_READ, max(_RECV_SIZE, sched.budget))

    def _new_receiver(self) -> OrderedBatches:
        return OrderedBatches(self._config.policy, site="socket-receive")

    @classmethod
    async def wrap(
        cls,
        transport_stream: AnyByteStream,
        *,
        server_side: bool = False,
        psk: KeyInput | None = None,
        static_key: KeyInput | None = None,
        server_public_key: Buffer | None = None,
        accept_peer: AcceptPeer | None = None,
        cipher: Cipher = "auto",
        hash: NoiseHash = "BLAKE2s",
        rekey_interval: int | None = DEFAULT_REKEY_INTERVAL,
        handshake_timeout: float | None = DEFAULT_HANDSHAKE_TIMEOUT,
        idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
        record_timeout: float | None = DEFAULT_RECORD_TIMEOUT,
        policy: OffloadPolicy | None = DEFAULT_POLICY,
    ) -> EncryptedStream:
        """Run the handshake over ``transport_stream`` and return the encrypted stream.

        Keys: ``psk`` (32 bytes, both sides: NNpsk0); ``static_key`` (32-byte X25519
        private key) and, on the client, ``server_public_key`` (NK, or IK when the client
        has a static key too); a client with ``static_key`` alone runs XX and must give
        ``accept_peer``. ``accept_peer(public_key) -> bool`` (sync or async) vets the
        peer's static key: on the client as it arrives, on the server once the client
        has proved it holds this session's keys (its last handshake message or key
        confirmation record), so a replayed handshake never reaches it; a server with
        ``accept_peer`` refuses anonymous (NK) clients. A server returns from ``wrap``
        only once the client is so confirmed.

        ``cipher``: ``"auto"`` (accept both; as a client propose AES-GCM where the CPU
        has AES and carry-less multiply instructions, ChaCha20-Poly1305 elsewhere or when
        the flags are unknown), or ``"AESGCM"`` / ``"ChaChaPoly"`` to insist. ``hash``:
        both sides must agree. ``rekey_interval``: records between rekeys (``None``:
        never). Timeouts in seconds (``None``: wait for ever): ``handshake_timeout``,
        ``idle_timeout``, ``record_timeout`` (see the module docstring). ``policy``: when
        record crypto leaves the event loop (``None`` keeps it on the loop thread); it
        changes nothing on the wire.

        On any failure the transport is closed. Raises :class:`InvalidParameterError` /
        :class:`InvalidKeySizeError` for bad options (before any I/O),
        :class:`PeerRejectedError` when ``accept_peer`` refuses,
        :class:`HandshakeError` (wrong key or PSK, the peer closed or refused, a
        server busy, a client that did not confirm its keys, the timeout passed),
        :class:`FormatError` for a peer that does not speak this
        protocol; transport errors stay anyio's.
        """
        settings = config_of(StreamConfig, locals())
        protocol = settings.protocol(server_side=server_side)
        return await cls._wrap(transport_stream, settings, protocol)

    @classmethod
    async def _wrap(
        cls,
        transport_stream: AnyByteStream,
        config: StreamConfig,
        protocol: ProtocolConfig,
    ) -> EncryptedStream:
        stream = cls(transport_stream, config, protocol.server_side)
        limit = config.handshake_timeout
        try:
            with anyio.fail_after(limit) as scope:
                await stream._handshake(protocol)
        except TimeoutError as exc:
            await aclose_forcefully(transport_stream)
            if scope.cancel_called:
                raise HandshakeError(
                    f"the Noise handshake did not complete within {limit} s: the peer "
                    "stalled or the network is too slow (raise handshake_timeout=)"
                ) from exc
            raise
        except BaseException:
            await aclose_forcefully(transport_stream)
            raise
        return stream

    # -- the handshake pump -----------------------------------------------------------------

    async def _handshake(self, protocol: ProtocolConfig) -> None:
        handshake = Handshake(protocol)
        while True:
            event = handshake.next_event()
            out = handshake.data_to_send()
            if out:
                await self.transport_stream.send(out)
            if isinstance(event, Complete):
                done = event
                break
            if isinstance(event, VetPeer):
                await self._vet(event.public_key)
                handshake.vetted()
                continue
            assert isinstance(event, NeedData)
            try:
                handshake.receive_data(await self.transport_stream.receive())
            except EndOfStream:
                raise HandshakeError(
                    "the peer closed the connection during the handshake: it refused our "
                    "handshake (check the keys, PSK, cipher and hash, and that both sides "
                    "run the same streamcrypt protocol version) or gave up"
                ) from None
        self._protocol_name = done.protocol_name
        self._peer_static = done.peer_static
        self._handshake_hash = done.handshake_hash
        self._records = done.records
        self._state = _OPEN

    async def _vet(self, public_key: bytes) -> None:
        callback = self._config.accept_peer
        assert callback is not None
        verdict = callback(public_key)
        if inspect.isawaitable(verdict):
            verdict = await verdict
        if not verdict:
            side = "client" if self._server_side else "server"
            raise PeerRejectedError(
                f"accept_peer refused the {side}'s static key: the connection was closed"
            )

    # -- records -----------------------------------------------------------------------------

    async def _transport_receive(self, records: RecordStream) -> bytes:
        """The transport's next chunk, under ``record_timeout`` inside a record and
        ``idle_timeout`` between records; its end raises :class:`TruncatedStreamError`."""
        config = self._config
        have = records.buffered
        if have:
            timeout, what = self._record_time_left(records), "the rest of a record"
        else:
            timeout, what = config.idle_timeout, "waiting for the next record"
        tcp = self._protocol_stream
        try:
            if tcp is not None:
                chunk = await tcp.read(self._read_size, timeout)
            else:
                if self._sized_reads:
                    call = self.transport_stream.receive(self._read_size)  # type: ignore[call-arg]
                else:
                    call = self.transport_stream.receive()
                chunk = await with_timeout(timeout, what, call, self._lazy_deadlines)
        except TimeoutError as exc:
            if isinstance(exc, PeerTimeoutError) or timeout is None:
                raise
            raise timed_out(timeout, what) from None
        except EndOfStream:
            if have:
                raise TruncatedStreamError(
                    f"the connection closed in the middle of a record ({have} bytes "
                    "of it came): the stream was cut, nothing of that record is returned"
                ) from None
            raise TruncatedStreamError(
                "the connection closed without the authenticated close record: the "
                "peer aborted (it failed, was interrupted or closed before finishing), "
                "crashed, or the stream was cut; the data may be incomplete"
            ) from None
        return chunk

    def _record_time_left(self, records: RecordStream) -> float | None:
        """Seconds left of ``record_timeout`` for the record partly buffered: the clock
        starts at the first read that leaves part of it (the read that brought its first
        byte) and covers the whole record, however many reads it takes, so a peer that
        trickles a record a byte at a time is cut as one that stalls is. Past the
        deadline raises :class:`PeerTimeoutError`."""
        limit = self._config.record_timeout
        if limit is None:
            return None
        now = time.monotonic()
        count = records.received
        if self._record_clock is None or self._record_clock[0] != count:
            self._record_clock = (count, now + limit)  # a new record began
        left = self._record_clock[1] - now
        if left <= 0:
            raise timed_out(limit, "the rest of a record")
        return left

    async def _transport_send(self, sealed: list[Buffer]) -> None:
        # anyio's byte streams take any bytes-like object; ``sealed`` is never touched again.
        for part in sealed:
            await self._transport_send_one(cast(bytes, part))

    async def _transport_send_one(self, sealed: bytes) -> None:
        timeout = self._config.idle_timeout
        tcp = self._protocol_stream
        try:
            if tcp is not None:
                await tcp.write(sealed, timeout)
            else:
                await with_timeout(
                    timeout, _NO_TAKER, self.transport_stream.send(sealed), self._lazy_deadlines
                )
        except TimeoutError as exc:
            if isinstance(exc, PeerTimeoutError) or timeout is None:
                raise
            raise timed_out(timeout, _NO_TAKER) from None

    def _fail(self, exc: BaseException) -> BaseException:
        """The stream is broken for good by ``exc`` (unless closed or broken already)."""
        if self._state is not _BROKEN and self._state is not _CLOSED:
            self._state = _BROKEN
            self._failure = exc
        return exc

    def _check_usable(self) -> None:
        if self._state is _CLOSED:
            raise ClosedResourceError
        if self._state is _BROKEN:
            raise BrokenResourceError(
                f"this EncryptedStream is broken by an earlier failure: {self._failure!r}"
            ) from self._failure

    def _control(self, rtype: int, data: bytes) -> None:
        """A record that is not data: the peer's close (the receive side ends), or
        :class:`FormatError` (a close carrying data, a type this version does not know)."""
        if rtype == CONFIRM:
            raise FormatError(
                "a key confirmation record after the handshake: the peer is not conformant"
            )
        if rtype != CLOSE:
            raise FormatError(
                f"authenticated record of unknown type {rtype}: the peer speaks a "
                "newer EncryptedStream version"
            )
        if data:
            raise FormatError("the close record carries data: the peer is not conformant")
        self._state = _GOT_CLOSE.get(self._state, self._state)

    async def _send_records(self, rtype: int, data: Buffer) -> None:
        # The cancellation point, before anything is sealed. Over a ProtocolStream it is
        # the loop turn the transport's own send() would take (its write() takes none).
        if self._protocol_stream is not None:
            await asyncio.sleep(0)
        else:
            await checkpoint_if_cancelled()
        records = self._records
        assert records is not None
        try:
            if (
                isinstance(data, (bytes, bytearray))
                and len(data) <= self._small_send
                and self._sending.idle
            ):
                # One record: sealed here and written at once, no job, no batch.
                await self._transport_send_one(records.seal(rtype, data))
                return
            with memoryview(data) as raw, raw.cast("B") as view:
                if len(view) <= self._small_send and self._sending.idle:
                    await self._transport_send_one(records.seal(rtype, view))
                    return
                jobs = records.seal_jobs(rtype, view)
                await self._sending.put(jobs, self._transport_send)
                await self._sending.flush(self._transport_send)
        except BaseException as exc:
            # Sealed records (and their nonces) may be lost: the counters cannot agree.
            self._fail(exc)
            raise

    async def send(self, item: Buffer) -> None:
        """Seal ``item`` as one or more records and send them now.

        Raises :class:`anyio.ClosedResourceError` after ``aclose()`` or ``send_eof()``,
        :class:`anyio.BrokenResourceError` after an earlier failure,
        :class:`anyio.BusyResourceError` if another task is sending,
        :class:`~streamcrypt.errors.PeerTimeoutError` if the transport takes nothing for
        ``idle_timeout``; transport errors (and a cancellation) mid-send break the stream.
        """
        state = self._state
        if state is not _OPEN and state is not _RECEIVE_CLOSED:
            self._check_usable()  # (no call on the hot path)
            raise ClosedResourceError("send() after send_eof(): this side already closed")
        with self._send_guard:
            if not item:
                await anyio.lowlevel.checkpoint()
                return
            await self._send_records(DATA, item)

    async def send_eof(self) -> None:
        """Send the authenticated close record, then half-close the transport if it can.

        The peer's ``receive()`` then raises :class:`anyio.EndOfStream`; this side can
        still receive. Idempotent. Raises as :meth:`send` does.
        """
        self._check_usable()
        if self._state not in _SENT_CLOSE:
            await anyio.lowlevel.checkpoint()
            return
        with self._send_guard:
            await self._send_records(CLOSE, b"")
            self._state = _SENT_CLOSE.get(self._state, self._state)
            try:
                await self.transport_stream.send_eof()
            except (NotImplementedError, ClosedResourceError, BrokenResourceError, OSError):
                pass  # the close record already told the peer; the transport may not half-close

    async def receive(self, max_bytes: int = 262144) -> bytes:
        """Up to ``max_bytes`` of verified plaintext.

        The default (256 KiB, above anyio's usual 64 KiB) lets ``async for`` gather several
        verified records per call: a record holds at most 65519 bytes, and each call costs
        two checkpoints (measured +27% throughput for an ``async for`` consumer).

        Raises :class:`anyio.EndOfStream` only after the peer's authenticated close;
        :class:`AuthenticationError` (tampered, replayed, reordered record),
        :class:`TruncatedStreamError` (the transport ended inside a record or without
        the close record), :class:`FormatError` (malformed framing) and
        :class:`PeerTimeoutError` (the peer stalled) break the stream; after that, and
        after transport errors, calls raise :class:`anyio.BrokenResourceError`.
        """
        if max_bytes < 1:
            raise ValueError("max_bytes must be a positive integer")
        state = self._state
        if state is _CLOSED or state is _BROKEN:  # (no call on the hot path)
            self._check_usable()
        with self._receive_guard:
            try:
                if self._pending:
                    await anyio.lowlevel.checkpoint()
                    return self._take_pending(max_bytes)
                if state is _RECEIVE_CLOSED or state is _ENDED:
                    await anyio.lowlevel.checkpoint()
                    raise EndOfStream
                return await self._receive_records(max_bytes)
            except (StreamCryptError, BrokenResourceError, OSError) as exc:
                raise self._fail(exc) from None

    def _take_pending(self, max_bytes: int) -> bytes:
        """Up to ``max_bytes`` of the verified plaintext waiting (whole pieces uncopied);
        the failure found after it, once it is all taken."""
        pending = self._pending
        out: list[bytes] = []
        size = 0
        while pending and size < max_bytes:
            piece = pending[0]
            if isinstance(piece, StreamCryptError):
                if out:
                    break  # what verified before the failure goes out first
                pending.popleft()
                raise piece
            start = self._pending_pos
            take = min(len(piece) - start, max_bytes - size)
            if size and size + take > _JOIN_LIMIT:
                break  # a large piece goes out alone, next call: no fresh copy to fault in
            out.append(piece if start == 0 and take == len(piece) else piece[start : start + take])
            size += take
            if start + take == len(piece):
                pending.popleft()
                self._pending_pos = 0
            else:
                self._pending_pos = start + take
        return out[0] if len(out) == 1 else b"".join(out)

    async def _receive_records(self, max_bytes: int) -> bytes:
        """The one receive path: open what is buffered (a few small records inline, runs
        of them on the scheduler), read on when that is nothing, hand out.

        A read that is exactly one small data record, with nothing buffered (a small
        message), is opened from the chunk read itself, with no scheduler. Cancellation
        may strike only before records are consumed: once records are handed to the
        scheduler (their counters advanced) they stay there until a call returns them,
        and a call that has them yields with a shielded checkpoint. With nothing
        buffered, the transport read is the cancellation point (and the checkpoint).
        """
        records = self._records
        assert records is not None
        checkpointed = False
        if records.buffered or self._receiving.in_flight:
            await checkpoint_if_cancelled()
        while True:
            sched = self._receiving
            if sched.in_flight:
                await sched.wait()  # changes nothing when cancelled
                plaintext, error = sched.pop()
                self._read_size = self._reads_for(sched)
                opened: list[bytes | StreamCryptError] = [
                    part if isinstance(part, bytes) else bytes(part) for part in plaintext if part
                ]
                if error is not None:
                    self._receiving = self._new_receiver()
                    opened.append(cast(StreamCryptError, error))
            else:
                buffered = records.buffered
                if buffered > self._small_receive:
                    jobs = records.open_jobs(sched.budget)
                    if jobs:
                        sched.queue(jobs)
                        while sched.queued:
                            sched.launch()
                        continue
                # A few small records buffered (or a control record next): opened here,
                # one by one, no jobs.
                opened = self._open_inline(records) if buffered else []
            if not opened:
                if self._receiving.in_flight:
                    continue
                if self._state is _RECEIVE_CLOSED or self._state is _ENDED:
                    if not checkpointed:
                        await cancel_shielded_checkpoint()
                    raise EndOfStream
                # Nothing, or part of a record, is buffered: read on.
                chunk = await self._transport_receive(records)
                checkpointed = True
                data = records.open_whole(chunk) if len(chunk) <= self._small_receive else None
                if data is None:
                    records.receive_data(chunk)
                    continue
                if not data:
                    continue  # an empty record, consumed: read on
                opened = [data]
            if not checkpointed:
                await cancel_shielded_checkpoint()
            first = opened[0]
            if len(opened) == 1 and isinstance(first, bytes) and len(first) <= max_bytes:
                return first
            self._pending.extend(opened)
            self._pending_pos = 0
            return self._take_pending(max_bytes)

    def _open_inline(self, records: RecordStream) -> list[bytes | StreamCryptError]:
        """Open the complete records buffered, on the loop thread: their plaintext, up to
        the peer's close; a failure after some plaintext comes last in the list (what
        verified before it is returned first), else it is raised."""
        out: list[bytes | StreamCryptError] = []
        try:
            while (record := records.next_control()) is not None:
                rtype, data = record
                if rtype == DATA:
                    if data:
                        out.append(data)
                    continue
                self._control(rtype, data)
                break  # the peer's close: nothing comes after it
        except StreamCryptError as exc:
            if not out:
                raise
            out.append(exc)
        return out

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        """Leaving ``async with`` normally ends the stream (the authenticated close is
        sent); leaving it by an exception (a cancellation included) aborts it."""
        await self._end(finished=exc_type is None)

    async def aclose(self) -> None:
        """Close the stream. After :meth:`send_eof` that is the end the peer already
        has; without it, an abort: no close record is sent, and the peer's ``receive()``
        raises :class:`~streamcrypt.errors.TruncatedStreamError`, never
        :class:`anyio.EndOfStream` (an authenticated close means the sender finished).

        Idempotent; the transport is always closed, forcefully when cancelled.
        """
        await self._end(finished=False)

    async def _end(self, *, finished: bool) -> None:
        """The one place that decides how this side ends. ``finished``: the sender
        finished normally (``async with`` left without an exception, a listener handler
        that returned), so the authenticated close is sent first if :meth:`send_eof` did
        not send it yet and the stream is sound. Anything else (an exception, a handler
        that raised, a broken stream after a failed or cancelled send, a bare
        :meth:`aclose`) is an abort: the transport closes without the close record."""
        state = self._state
        if state is _CLOSED:
            await anyio.lowlevel.checkpoint()
            return
        self._state = _CLOSED
        try:
            if finished and state in _SENT_CLOSE:  # sound, and the close not sent yet
                try:
                    with self._send_guard:
                        await self._send_records(CLOSE, b"")
                except (
                    BusyResourceError,
                    ClosedResourceError,
                    BrokenResourceError,
                    OSError,
                    PeerTimeoutError,
                ):
                    pass  # a concurrent sender, or the transport is gone: just close
        except BaseException:
            await aclose_forcefully(self.transport_stream)
            raise
        await self.transport_stream.aclose()

    @property
    def extra_attributes(self) -> Mapping[Any, Callable[[], Any]]:
        return {
            **self.transport_stream.extra_attributes,
            EncryptedStreamAttribute.peer_static_key: lambda: self._peer_static,
            EncryptedStreamAttribute.handshake_hash: lambda: self._handshake_hash,
            EncryptedStreamAttribute.protocol_name: lambda: self._protocol_name,
            EncryptedStreamAttribute.server_side: lambda: self._server_side,
        }

    def __repr__(self) -> str:
        state = self._state.value
        side = "server" if self._server_side else "client"
        return f"EncryptedStream({self._protocol_name or 'handshaking'}, {side}, {state})"
