"""Encrypted anyio byte streams over the Noise handshake: ``EncryptedStream`` and friends.

Theory of operation
-------------------
``EncryptedStream.wrap(transport)`` turns any anyio byte stream into an authenticated,
encrypted one, the way ``anyio.streams.tls.TLSStream.wrap`` does with TLS. It runs in two
phases over the same transport.

**Handshake.** The client opens with a 6-byte *preamble* naming what it is about to run::

    b"sc"  version (1)  pattern id  cipher id  hash id

    pattern id: 1 NNpsk0, 2 NK, 3 IK, 4 XX     cipher id: 1 ChaChaPoly, 2 AESGCM
    hash id:    1 SHA256, 2 SHA512, 3 BLAKE2s, 4 BLAKE2b

The pattern follows from the keys each side holds: only ``psk=`` -> NNpsk0; the client
knows ``server_public_key=`` -> IK if it also has ``static_key=``, NK if not; the client has
a static key but knows nothing of the server -> XX (both sides then vet the other's key
with ``accept_peer``). The server checks the preamble against its own configuration and
refuses anything else. The Noise prologue is ``b"streamcrypt EncryptedStream\\x00"`` followed
by the preamble, so a preamble changed on the wire makes the handshake fail. Then the
Noise handshake messages of :mod:`streamcrypt.codecs.noise` (``Noise_<pattern>_25519_
<cipher>_<hash>``, empty payloads) travel each behind a 2-byte big-endian length, as the
Noise specification suggests. The handshake itself is plain Noise and interoperates with
any Noise implementation that sends the same preamble and prologue.

**Records.** After ``split()`` every record is::

    length (2 bytes, big-endian)  type (1 byte)  Noise transport message (length bytes)

The Noise transport message is ``CipherState.encrypt(ad=header, plaintext)`` where
``header`` is the 3 bytes in front of it, so the length and the type are authenticated
too. Types: ``0x00`` data, ``0x01`` close (empty plaintext: the authenticated end of the
stream, sent by ``send_eof()`` and ``aclose()``). A record carries at most
``MAX_RECORD_DATA`` = 65519 bytes of data (the 65535-byte Noise limit minus the tag); a
larger ``send()`` becomes several records, all sealed and handed to the transport at
once, never held back (in writes of at most 17 records). ``receive()`` returns the
data of every complete record already buffered that fits in ``max_bytes``, never data
of a record whose tag has not been checked. Nonces are the Noise counters; every ``rekey_interval`` records
(default ``DEFAULT_REKEY_INTERVAL`` = 65536, i.e. at most 4 GiB under one key) both sides
call ``CipherState.rekey()`` on that direction, as the Noise specification describes.
Because of the type byte and the header AD the record layer is *not* wire-compatible with
a bare Noise transport (e.g. the ``noiseprotocol`` package); the handshake is.

**Offload.** Record crypto is a pure function of (key, nonce, header, data), so large
work runs in worker threads under ``policy=`` (an engine :class:`OffloadPolicy`; ``None``
keeps everything on the loop thread, the wire is the same either way). On the loop thread,
before anything is dispatched, each record gets its key and nonce in order
(:class:`~streamcrypt.codecs.noise.FixedKeyCipher` per run of records between rekeys, and
the CipherState moves past them), so a batch may span a rekey and a cancelled await
cannot desynchronise the counters. A ``send()`` of at least ``inline_limit`` bytes is
sealed in batches of ``batch_size``, ``max_in_flight`` at once, each sent as soon as it
and those before it are sealed; a cancellation or error then breaks the stream, as for any
send. On receive, when the complete data records already buffered hold at least
``inline_limit`` bytes they are opened as batches in workers; a batch stops at its first
bad record, and the records verified before it are returned before the error is raised.
An in-flight batch survives a cancelled ``receive()`` and is returned by the next one.
Buffered ciphertext, in workers or not, is at most one transport read (256 KiB plus the
policy's ``inline_limit``, at most 7.25 MiB) plus one record: the transport is read only
when no complete record is left.

Failure rules: a record that does not authenticate raises
:class:`~streamcrypt.errors.AuthenticationError` (replays, reordering and tampering land
here) and breaks the stream; the transport ending inside a record, or without the close
record, raises :class:`~streamcrypt.errors.TruncatedStreamError`; a length shorter than a
tag raises :class:`~streamcrypt.errors.FormatError`. Once a sealed record may have been
lost in sending (an error or cancellation during the transport send), the counters of
the two sides can no longer agree and the stream is broken for good. After any such
failure every call raises :class:`anyio.BrokenResourceError`.
"""

from __future__ import annotations

import inspect
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, cast

import anyio
from anyio import (
    TASK_STATUS_IGNORED,
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
    Listener,
    SocketAttribute,
    TaskGroup,
    TaskStatus,
)
from anyio.lowlevel import cancel_shielded_checkpoint, checkpoint_if_cancelled

from .._state import Buffer
from ..codecs.noise import TAGLEN, CipherState, NoiseHandshake
from ..codecs.records import (
    CLOSE,
    DATA,
    HEADER_LEN,
    MAX_RECORD_DATA,
    RECORDS_PER_JOB,
    OpenRecords,
    SealRecords,
    record_count,
    scan_data_records,
    take_nonces,
)
from ..engine import DEFAULT_POLICY, OffloadPolicy, OrderedBatches
from ..errors import (
    FormatError,
    HandshakeError,
    InvalidKeySizeError,
    InvalidParameterError,
    PeerRejectedError,
    StreamCryptError,
    TruncatedStreamError,
    UnsupportedFormatError,
)
from ..keys import SecretKey

__all__ = [
    "DEFAULT_HANDSHAKE_TIMEOUT",
    "DEFAULT_REKEY_INTERVAL",
    "MAX_RECORD_DATA",
    "AcceptPeer",
    "EncryptedListener",
    "EncryptedStream",
    "EncryptedStreamAttribute",
    "connect",
    "serve",
]

logger = logging.getLogger("streamcrypt.transports")

#: Records per direction between two ``CipherState.rekey()`` calls (<= 4 GiB per key).
DEFAULT_REKEY_INTERVAL: Final = 65536
#: Seconds allowed for the whole handshake before the connection is closed.
DEFAULT_HANDSHAKE_TIMEOUT: Final = 10.0

_MAGIC: Final = b"sc"
_VERSION: Final = 1
_PREAMBLE_LEN: Final = 6
_PROLOGUE: Final = b"streamcrypt EncryptedStream\x00"
_PATTERNS: Final = {"NNpsk0": 1, "NK": 2, "IK": 3, "XX": 4}
_CIPHERS: Final = {"ChaChaPoly": 1, "AESGCM": 2}
_HASHES: Final = {"SHA256": 1, "SHA512": 2, "BLAKE2s": 3, "BLAKE2b": 4}
#: Handshake messages here carry empty payloads (at most 96 bytes); anything far larger
#: is not a streamcrypt peer.
_MAX_HANDSHAKE_FRAME: Final = 1024

#: ``max_bytes`` asked of the transport per receive while records are opened inline. While
#: the receive scheduler offloads, a read may hold its whole window (a run worth a worker).
#: Ciphertext buffered by a stream (waiting to be opened, or in workers) is at most one
#: read plus one record: the transport is read only when no complete record is left.
#: 256 KiB measured best for the inline path (1 MiB reads cut ChaChaPoly over asyncio
#: streams from 0.72 to 0.57 GB/s: one large inline decrypt per read overlaps less with
#: the sender).
_RECV_SIZE: Final = 1 << 18


#: ``accept_peer(public_key) -> bool`` (or an awaitable of it).
AcceptPeer = Callable[[bytes], "bool | Awaitable[bool]"]
KeyInput = Buffer | SecretKey


class EncryptedStreamAttribute(TypedAttributeSet):
    """Typed extra attributes of an :class:`EncryptedStream` (merged over the transport's)."""

    #: the peer's static X25519 public key (32 bytes), or ``None`` (NNpsk0, NK server side)
    peer_static_key: bytes | None = typed_attribute()
    #: the Noise handshake hash: a channel binding both sides share
    handshake_hash: bytes = typed_attribute()
    #: the full Noise protocol name, e.g. ``"Noise_XX_25519_ChaChaPoly_BLAKE2s"``
    protocol_name: str = typed_attribute()
    #: ``True`` on the side that accepted the connection
    server_side: bool = typed_attribute()


def _raw_key(key: KeyInput, what: str) -> bytes:
    raw = key.secret_bytes() if isinstance(key, SecretKey) else bytes(key)
    if len(raw) != 32:
        raise InvalidKeySizeError(f"{what} must be 32 bytes, got {len(raw)}")
    return raw


@dataclass(frozen=True, slots=True, repr=False)
class _Config:
    """Validated options of one side (secrets inside: never repr'd)."""

    server_side: bool
    psk: bytes | None
    static_key: bytes | None
    server_public_key: bytes | None
    accept_peer: AcceptPeer | None
    cipher: str
    hash: str
    rekey_interval: int | None
    policy: OffloadPolicy | None

    @classmethod
    def make(
        cls,
        *,
        server_side: bool,
        psk: KeyInput | None,
        static_key: KeyInput | None,
        server_public_key: Buffer | None,
        accept_peer: AcceptPeer | None,
        cipher: str,
        hash: str,
        rekey_interval: int | None,
        policy: OffloadPolicy | None = DEFAULT_POLICY,
    ) -> _Config:
        if cipher not in _CIPHERS:
            raise InvalidParameterError(
                f"unsupported cipher {cipher!r}; use one of {', '.join(_CIPHERS)}"
            )
        if hash not in _HASHES:
            raise InvalidParameterError(
                f"unsupported hash {hash!r}; use one of {', '.join(_HASHES)}"
            )
        if rekey_interval is not None and (isinstance(rekey_interval, bool) or rekey_interval < 1):
            raise InvalidParameterError(
                f"rekey_interval must be a positive number of records or None, got {rekey_interval!r}"
            )
        if policy is not None and not isinstance(policy, OffloadPolicy):
            raise InvalidParameterError(
                f"policy must be an OffloadPolicy or None, not {type(policy).__name__}"
            )
        raw_psk = _raw_key(psk, "psk") if psk is not None else None
        raw_static = _raw_key(static_key, "static_key") if static_key is not None else None
        raw_server = None
        if server_public_key is not None:
            raw_server = bytes(server_public_key)
            if len(raw_server) != 32:
                raise InvalidKeySizeError(
                    f"server_public_key must be a 32-byte X25519 public key, got {len(raw_server)}"
                )
        if raw_psk is not None and (raw_static is not None or raw_server is not None):
            raise InvalidParameterError(
                "psk= cannot be combined with static keys: give psk= alone (NNpsk0) or "
                "static_key=/server_public_key= (NK, IK, XX)"
            )
        if server_side:
            if raw_server is not None:
                raise InvalidParameterError(
                    "server_public_key= is for the client; the server gives static_key="
                )
            if raw_psk is None and raw_static is None:
                raise InvalidParameterError("the server needs psk= or static_key=")
        elif raw_psk is None and raw_server is None:
            if raw_static is None:
                raise InvalidParameterError(
                    "the client needs psk=, server_public_key= or static_key= (with accept_peer=)"
                )
            if accept_peer is None:
                raise InvalidParameterError(
                    "XX (static_key= without server_public_key=) needs accept_peer= to vet "
                    "the server's key; without it any server would be accepted"
                )
        return cls(
            server_side,
            raw_psk,
            raw_static,
            raw_server,
            accept_peer,
            cipher,
            hash,
            rekey_interval,
            policy,
        )

    def client_pattern(self) -> str:
        if self.psk is not None:
            return "NNpsk0"
        if self.server_public_key is not None:
            return "IK" if self.static_key is not None else "NK"
        return "XX"

    def server_allows(self, pattern: str) -> str | None:
        """Why this server refuses ``pattern``, or ``None`` if it accepts it."""
        if self.psk is not None:
            return None if pattern == "NNpsk0" else "this server expects a pre-shared key (NNpsk0)"
        if pattern == "NNpsk0":
            return "this server has no pre-shared key; it uses static keys (NK, IK, XX)"
        if pattern == "NK" and self.accept_peer is not None:
            return "this server vets client keys (accept_peer=) and refuses anonymous NK clients"
        return None

    def __repr__(self) -> str:
        return f"_Config(server_side={self.server_side}, {self.cipher}, {self.hash}, <keys hidden>)"


def _peer_name(stream: AnyByteStream) -> str:
    try:
        address = stream.extra(SocketAttribute.remote_address)
    except Exception:
        return "peer"
    if isinstance(address, tuple) and len(address) >= 2:
        return f"{address[0]}:{address[1]}"
    return str(address)


@dataclass(eq=False, repr=False)
class EncryptedStream(ByteStream):
    """An anyio :class:`~anyio.abc.ByteStream` encrypted with Noise; create with :meth:`wrap`.

    ``send()`` seals at once; ``receive()`` returns verified plaintext only and raises
    :class:`~streamcrypt.errors.AuthenticationError`,
    :class:`~streamcrypt.errors.TruncatedStreamError` or
    :class:`~streamcrypt.errors.FormatError` (then the stream is broken and later calls
    raise :class:`anyio.BrokenResourceError`); :class:`anyio.EndOfStream` only after the
    peer's authenticated close. Two concurrent senders (or receivers) raise
    :class:`anyio.BusyResourceError`. Extra attributes: :class:`EncryptedStreamAttribute`.

    :var transport_stream: the wrapped stream
    """

    transport_stream: AnyByteStream
    _config: _Config
    _send_cs: CipherState | None = field(default=None, init=False)
    _recv_cs: CipherState | None = field(default=None, init=False)
    _protocol_name: str = field(default="", init=False)
    _peer_static: bytes | None = field(default=None, init=False)
    _handshake_hash: bytes = field(default=b"", init=False)
    _rbuf: bytearray = field(default_factory=bytearray, init=False)
    _rpos: int = field(default=0, init=False)
    _pending: deque[bytes] = field(default_factory=deque, init=False)
    _pending_pos: int = field(default=0, init=False)
    _sending: OrderedBatches = field(init=False)
    _receiving: OrderedBatches = field(init=False)
    _sent_records: int = field(default=0, init=False)
    _received_records: int = field(default=0, init=False)
    _eof_sent: bool = field(default=False, init=False)
    _eof_received: bool = field(default=False, init=False)
    _closed: bool = field(default=False, init=False)
    _failure: BaseException | None = field(default=None, init=False)
    _deferred: StreamCryptError | None = field(default=None, init=False)
    _broken: bool = field(default=False, init=False)
    _send_guard: ResourceGuard = field(
        default_factory=lambda: ResourceGuard("sending to"), init=False
    )
    _receive_guard: ResourceGuard = field(
        default_factory=lambda: ResourceGuard("reading from"), init=False
    )

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
        handshake_timeout: float | None = DEFAULT_HANDSHAKE_TIMEOUT,
        cipher: str = "ChaChaPoly",
        hash: str = "BLAKE2s",
        rekey_interval: int | None = DEFAULT_REKEY_INTERVAL,
        policy: OffloadPolicy | None = DEFAULT_POLICY,
    ) -> EncryptedStream:
        """Run the Noise handshake over ``transport_stream`` and return the encrypted stream.

        Keys: ``psk`` (32 bytes, both sides: NNpsk0); ``static_key`` (32-byte X25519
        private key) and, on the client, ``server_public_key`` (NK, or IK when the client
        has a static key too); a client with ``static_key`` alone runs XX and must give
        ``accept_peer``. ``accept_peer(public_key) -> bool`` (sync or async) vets the
        peer's static key whenever one arrives; a server with ``accept_peer`` refuses
        anonymous (NK) clients. ``cipher``: ``"ChaChaPoly"`` or ``"AESGCM"``; ``hash``:
        ``"BLAKE2s"``, ``"BLAKE2b"``, ``"SHA256"`` or ``"SHA512"`` (both sides must
        agree). ``rekey_interval``: records between rekeys (``None``: never). ``policy``:
        when record crypto leaves the event loop (the engine's ``DEFAULT_POLICY``; ``None``
        keeps it all on the loop thread); it changes nothing on the wire.

        On any failure the transport is closed. Raises :class:`InvalidParameterError` /
        :class:`InvalidKeySizeError` for bad options (before any I/O),
        :class:`PeerRejectedError` when ``accept_peer`` refuses,
        :class:`HandshakeError` (wrong key or PSK, the peer closed or refused, the
        timeout passed), :class:`FormatError` for a peer that does not speak this
        protocol; transport errors stay anyio's.
        """
        config = _Config.make(
            server_side=server_side,
            psk=psk,
            static_key=static_key,
            server_public_key=server_public_key,
            accept_peer=accept_peer,
            cipher=cipher,
            hash=hash,
            rekey_interval=rekey_interval,
            policy=policy,
        )
        return await cls._wrap(transport_stream, config, handshake_timeout)

    @classmethod
    async def _wrap(
        cls, transport_stream: AnyByteStream, config: _Config, time_limit: float | None
    ) -> EncryptedStream:
        stream = cls(transport_stream=transport_stream, _config=config)
        try:
            with anyio.fail_after(time_limit) as scope:
                await stream._handshake()
        except TimeoutError as exc:
            await aclose_forcefully(transport_stream)
            if scope.cancel_called:
                raise HandshakeError(
                    f"the Noise handshake did not complete within {time_limit} s: the peer "
                    "stalled or the network is too slow (raise handshake_timeout=)"
                ) from exc
            raise
        except BaseException:
            await aclose_forcefully(transport_stream)
            raise
        return stream

    # -- the handshake pump -----------------------------------------------------------------

    async def _read_exact(self, n: int, what: str) -> bytes:
        while len(self._rbuf) - self._rpos < n:
            try:
                chunk = await self._transport_receive()
            except EndOfStream:
                raise HandshakeError(
                    f"the peer closed the connection during the handshake (waiting for "
                    f"{what}): it refused our handshake; check the keys, PSK, cipher and hash"
                ) from None
            self._append(chunk)
        out = bytes(self._rbuf[self._rpos : self._rpos + n])
        self._rpos += n
        return out

    async def _read_handshake_message(self, index: int) -> bytes:
        what = f"handshake message {index}"
        header = await self._read_exact(2, what)
        length = int.from_bytes(header, "big")
        if length > _MAX_HANDSHAKE_FRAME:
            raise FormatError(
                f"handshake message {index} claims {length} bytes, over the "
                f"{_MAX_HANDSHAKE_FRAME} a streamcrypt peer sends: not an EncryptedStream peer"
            )
        return await self._read_exact(length, what)

    async def _read_preamble(self) -> tuple[str, str, str]:
        pre = await self._read_exact(_PREAMBLE_LEN, "the client's preamble")
        if pre[:2] != _MAGIC:
            raise FormatError(
                "the client did not open with the EncryptedStream preamble: it is not a "
                "streamcrypt client (or speaks another protocol on this port)"
            )
        if pre[2] != _VERSION:
            raise UnsupportedFormatError(
                f"the client speaks EncryptedStream version {pre[2]}; this side speaks "
                f"{_VERSION}: upgrade the older side"
            )
        names = []
        for byte, table, what in (
            (pre[3], _PATTERNS, "pattern"),
            (pre[4], _CIPHERS, "cipher"),
            (pre[5], _HASHES, "hash"),
        ):
            found = [k for k, v in table.items() if v == byte]
            if not found:
                raise UnsupportedFormatError(
                    f"the client asked for unknown {what} id {byte}: not a version "
                    f"{_VERSION} EncryptedStream client"
                )
            names.append(found[0])
        return names[0], names[1], names[2]

    async def _vet(self, public_key: bytes) -> None:
        callback = self._config.accept_peer
        if callback is None:
            return
        verdict = callback(public_key)
        if inspect.isawaitable(verdict):
            verdict = await verdict
        if not verdict:
            side = "client" if self._config.server_side else "server"
            raise PeerRejectedError(
                f"accept_peer refused the {side}'s static key: the connection was closed"
            )

    async def _handshake(self) -> None:
        config = self._config
        preamble = b""
        if config.server_side:
            pattern, cipher, hash_name = await self._read_preamble()
            if cipher != config.cipher or hash_name != config.hash:
                raise HandshakeError(
                    f"the client asked for {cipher}/{hash_name}, this server runs "
                    f"{config.cipher}/{config.hash}: configure both sides alike"
                )
            refusal = config.server_allows(pattern)
            if refusal is not None:
                raise HandshakeError(f"the client asked for Noise {pattern}, but {refusal}")
            prologue = (
                _PROLOGUE
                + _MAGIC
                + bytes((_VERSION, _PATTERNS[pattern], _CIPHERS[cipher], _HASHES[hash_name]))
            )
            static = config.static_key if pattern != "NNpsk0" else None
            remote = None
        else:
            pattern = config.client_pattern()
            preamble = _MAGIC + bytes(
                (_VERSION, _PATTERNS[pattern], _CIPHERS[config.cipher], _HASHES[config.hash])
            )
            prologue = _PROLOGUE + preamble
            static = config.static_key if pattern in ("IK", "XX") else None
            remote = config.server_public_key
        name = f"Noise_{pattern}_25519_{config.cipher}_{config.hash}"
        handshake = NoiseHandshake(
            name,
            not config.server_side,
            s=static,
            rs=remote,
            psks=[config.psk] if config.psk is not None else [],
            prologue=prologue,
        )
        vetted = handshake.remote_static is not None
        while not handshake.complete:
            if handshake.needs_write:
                message = handshake.write_message()
                frame = preamble + len(message).to_bytes(2, "big") + message
                preamble = b""
                await self.transport_stream.send(frame)
            else:
                index = handshake.message_index
                handshake.read_message(await self._read_handshake_message(index))
                if not vetted and handshake.remote_static is not None:
                    vetted = True
                    await self._vet(handshake.remote_static)
        self._protocol_name = name
        self._peer_static = handshake.remote_static
        self._handshake_hash = handshake.handshake_hash
        self._send_cs, self._recv_cs = handshake.split()

    # -- records -----------------------------------------------------------------------------

    def __post_init__(self) -> None:
        # A sealed batch goes to the transport in one write (a 1 MiB send() is one write).
        self._sending = OrderedBatches(self._config.policy, site="socket-send", piece=1 << 62)
        self._receiving = self._new_receiver()

    def _new_receiver(self) -> OrderedBatches:
        return OrderedBatches(self._config.policy, site="socket-receive")

    async def _transport_receive(self) -> bytes:
        transport = self.transport_stream
        if isinstance(transport, ByteReceiveStream):
            return await transport.receive(max(_RECV_SIZE, self._receiving.budget))
        return await transport.receive()

    def _append(self, chunk: bytes) -> None:
        if self._rpos:
            del self._rbuf[: self._rpos]
            self._rpos = 0
        self._rbuf += chunk

    def _fail(self, exc: BaseException) -> BaseException:
        if not self._broken:
            self._broken = True
            self._failure = exc
        return exc

    def _check_usable(self) -> None:
        if self._closed:
            raise ClosedResourceError
        if self._broken:
            raise BrokenResourceError(
                f"this EncryptedStream is broken by an earlier failure: {self._failure!r}"
            ) from self._failure

    def _seal_jobs(self, rtype: int, view: memoryview) -> list[SealRecords]:
        """Jobs sealing ``view`` as records, keys and nonces assigned here, in order."""
        cs = self._send_cs
        assert cs is not None
        interval = self._config.rekey_interval
        step = RECORDS_PER_JOB * MAX_RECORD_DATA
        jobs: list[SealRecords] = []
        offset = 0
        while True:
            piece = view[offset : offset + step]
            count = record_count(len(piece))
            runs = take_nonces(cs, self._sent_records, count, interval)
            self._sent_records += count
            jobs.append(SealRecords(runs, rtype, piece))
            offset += len(piece)
            if offset >= len(view):
                return jobs

    async def _transport_send(self, sealed: list[Buffer]) -> None:
        # anyio's byte streams take any bytes-like object; ``sealed`` is never touched again.
        for part in sealed:
            await self.transport_stream.send(cast(bytes, part))

    async def _send_records(self, rtype: int, data: Buffer) -> None:
        await checkpoint_if_cancelled()
        try:
            with memoryview(data) as raw, raw.cast("B") as view:
                jobs = self._seal_jobs(rtype, view)
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
        :class:`anyio.BusyResourceError` if another task is sending; transport errors
        (and a cancellation) mid-send break the stream.
        """
        self._check_usable()
        if self._eof_sent:
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
        if self._eof_sent:
            await anyio.lowlevel.checkpoint()
            return
        with self._send_guard:
            await self._send_records(CLOSE, b"")
            self._eof_sent = True
            try:
                await self.transport_stream.send_eof()
            except (NotImplementedError, ClosedResourceError, BrokenResourceError, OSError):
                pass  # the close record already told the peer; the transport may not half-close

    def _next_record(self) -> tuple[int, bytes] | None:
        """Open the next complete record in the buffer, or ``None`` if it has not all come."""
        buf = self._rbuf
        pos = self._rpos
        if len(buf) - pos < HEADER_LEN:
            return None
        length = (buf[pos] << 8) | buf[pos + 1]
        if length < TAGLEN:
            raise FormatError(
                f"record length {length} is shorter than the {TAGLEN}-byte tag: the peer "
                "is not an EncryptedStream or the stream is corrupt"
            )
        end = pos + HEADER_LEN + length
        if len(buf) < end:
            return None
        header = bytes(buf[pos : pos + HEADER_LEN])
        cs = self._recv_cs
        assert cs is not None
        with memoryview(buf) as view, view[pos + HEADER_LEN : end] as body:
            plaintext = cs.decrypt(header, body)
        self._rpos = end
        if end == len(buf):
            buf.clear()
            self._rpos = 0
        self._received_records += 1
        interval = self._config.rekey_interval
        if interval is not None and self._received_records % interval == 0:
            cs.rekey()
        return header[2], plaintext

    async def receive(self, max_bytes: int = 262144) -> bytes:
        """Up to ``max_bytes`` of verified plaintext.

        The default (256 KiB, above anyio's usual 64 KiB) lets ``async for`` gather several
        verified records per call: a record holds at most 65519 bytes, and each call costs
        two checkpoints (measured +27% throughput for an ``async for`` consumer).

        Raises :class:`anyio.EndOfStream` only after the peer's authenticated close;
        :class:`AuthenticationError` (tampered, replayed, reordered record),
        :class:`TruncatedStreamError` (the transport ended inside a record or without
        the close record) and :class:`FormatError` (malformed framing) break the stream;
        after that, and after transport errors, calls raise
        :class:`anyio.BrokenResourceError`.
        """
        if max_bytes < 1:
            raise ValueError("max_bytes must be a positive integer")
        self._check_usable()
        with self._receive_guard:
            if self._pending:
                await anyio.lowlevel.checkpoint()
                return self._take_pending(max_bytes)
            if self._eof_received:
                await anyio.lowlevel.checkpoint()
                raise EndOfStream
            try:
                if self._deferred is not None:
                    await anyio.lowlevel.checkpoint()
                    raise self._deferred
                return await self._receive_record(max_bytes)
            except (StreamCryptError, BrokenResourceError, OSError) as exc:
                raise self._fail(exc) from None

    def _take_pending(self, max_bytes: int) -> bytes:
        """Up to ``max_bytes`` of the verified plaintext waiting (whole pieces uncopied)."""
        pending = self._pending
        out: list[bytes] = []
        size = 0
        while pending and size < max_bytes:
            piece = pending[0]
            start = self._pending_pos
            take = min(len(piece) - start, max_bytes - size)
            out.append(piece if start == 0 and take == len(piece) else piece[start : start + take])
            size += take
            if start + take == len(piece):
                pending.popleft()
                self._pending_pos = 0
            else:
                self._pending_pos = start + take
        return out[0] if len(out) == 1 else b"".join(out)

    def _queue_open(self) -> bool:
        """Hand the complete data records at the head of the buffer to the receive
        scheduler, keys and nonces assigned here in record order; ``True`` if any went.

        As much as the scheduler wants ahead (a batch inline, its window when it
        offloads). The jobs keep a view of the current buffer, which is then replaced by a
        copy of its tail, never touched again here.
        """
        sched = self._receiving
        buf = self._rbuf
        runs = scan_data_records(buf, self._rpos, sched.budget)
        if not runs:
            return False
        cs = self._recv_cs
        assert cs is not None
        interval = self._config.rekey_interval
        jobs: list[OpenRecords] = []
        with memoryview(buf) as view:
            for start, end, count in runs:
                keys = take_nonces(cs, self._received_records, count, interval)
                self._received_records += count
                jobs.append(OpenRecords(keys, view[start:end], count))
        self._rbuf = buf[runs[-1][1] :]
        self._rpos = 0
        sched.queue(jobs)
        while sched.queued:
            sched.launch()
        return True

    async def _receive_record(self, max_bytes: int) -> bytes:
        # Cancellation may strike only before a record is consumed: once records are
        # handed to the scheduler (their counters advanced) they stay there until a call
        # returns them, and a call that has them yields with a shielded checkpoint.
        await checkpoint_if_cancelled()
        checkpointed = False
        while True:
            sched = self._receiving
            if sched.in_flight:
                await sched.wait()  # changes nothing when cancelled
                plaintext, error = sched.pop()
                if error is not None:
                    self._receiving = self._new_receiver()
                    if not any(plaintext):
                        raise error
                    self._deferred = cast(StreamCryptError, error)
                if not any(plaintext):
                    continue
                if not checkpointed:
                    await cancel_shielded_checkpoint()
                self._pending.extend(
                    part if isinstance(part, bytes) else bytes(part) for part in plaintext if part
                )
                self._pending_pos = 0
                return self._take_pending(max_bytes)
            if self._queue_open():
                continue
            record = self._next_record()
            if record is None:
                try:
                    chunk = await self._transport_receive()
                except EndOfStream:
                    have = len(self._rbuf) - self._rpos
                    if have:
                        raise TruncatedStreamError(
                            f"the connection closed in the middle of a record ({have} bytes "
                            "of it came): the stream was cut, nothing of that record is returned"
                        ) from None
                    raise TruncatedStreamError(
                        "the connection closed without the authenticated close record: "
                        "the peer crashed or the stream was cut, the data may be incomplete"
                    ) from None
                checkpointed = True
                self._append(chunk)
                continue
            rtype, data = record
            if rtype == CLOSE:
                if data:
                    raise FormatError("the close record carries data: the peer is not conformant")
                self._eof_received = True
                if not checkpointed:
                    await cancel_shielded_checkpoint()
                raise EndOfStream
            if rtype != DATA:
                raise FormatError(
                    f"authenticated record of unknown type {rtype}: the peer speaks a "
                    "newer EncryptedStream version"
                )
            if data:
                if not checkpointed:
                    await cancel_shielded_checkpoint()
                self._pending.append(data)
                self._pending_pos = 0
                return self._take_pending(max_bytes)

    async def aclose(self) -> None:
        """Send the close record (if not sent yet and the stream is sound), then close.

        Idempotent; the transport is always closed, forcefully when cancelled.
        """
        if self._closed:
            await anyio.lowlevel.checkpoint()
            return
        self._closed = True
        try:
            if not self._eof_sent and not self._broken and self._send_cs is not None:
                try:
                    with self._send_guard:
                        await self._send_records(CLOSE, b"")
                        self._eof_sent = True
                except (BusyResourceError, ClosedResourceError, BrokenResourceError, OSError):
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
            EncryptedStreamAttribute.server_side: lambda: self._config.server_side,
        }

    def __repr__(self) -> str:
        state = (
            "closed"
            if self._closed
            else "broken"
            if self._broken
            else "eof-sent"
            if self._eof_sent
            else "open"
        )
        side = "server" if self._config.server_side else "client"
        return f"EncryptedStream({self._protocol_name or 'handshaking'}, {side}, {state})"


@dataclass(eq=False, repr=False)
class EncryptedListener(Listener[EncryptedStream]):
    """Wraps any anyio listener: each accepted stream runs the handshake (server side).

    A connection whose handshake fails or times out, or whose handler ends with a
    streamcrypt or transport error, is logged in one line on the
    ``"streamcrypt.transports"`` logger (error type and message, never key bytes) and
    closed; other connections keep going. Options are those of
    :meth:`EncryptedStream.wrap` (``server_public_key`` excepted); bad options raise
    :class:`InvalidParameterError` at construction.
    """

    listener: Listener[Any]
    psk: KeyInput | None = None
    static_key: KeyInput | None = None
    accept_peer: AcceptPeer | None = None
    handshake_timeout: float | None = DEFAULT_HANDSHAKE_TIMEOUT
    cipher: str = "ChaChaPoly"
    hash: str = "BLAKE2s"
    rekey_interval: int | None = DEFAULT_REKEY_INTERVAL
    policy: OffloadPolicy | None = DEFAULT_POLICY
    _config: _Config = field(init=False)

    def __post_init__(self) -> None:
        self._config = _Config.make(
            server_side=True,
            psk=self.psk,
            static_key=self.static_key,
            server_public_key=None,
            accept_peer=self.accept_peer,
            cipher=self.cipher,
            hash=self.hash,
            rekey_interval=self.rekey_interval,
            policy=self.policy,
        )

    async def serve(
        self,
        handler: Callable[[EncryptedStream], Any],
        task_group: TaskGroup | None = None,
    ) -> None:
        """Serve forever, calling ``await handler(stream)`` for each handshaken connection."""

        async def wrapped(transport: AnyByteStream) -> None:
            peer = _peer_name(transport)
            try:
                stream = await EncryptedStream._wrap(
                    transport, self._config, self.handshake_timeout
                )
            except Exception as exc:
                logger.warning(
                    "encrypted handshake with %s failed, connection closed: %s: %s",
                    peer,
                    type(exc).__name__,
                    exc,
                )
                return
            try:
                await handler(stream)
            except (StreamCryptError, BrokenResourceError, ClosedResourceError, OSError) as exc:
                logger.warning(
                    "encrypted connection with %s failed, connection closed: %s: %s",
                    peer,
                    type(exc).__name__,
                    exc,
                )
            except EndOfStream:
                logger.warning(
                    "encrypted connection with %s: the handler read past the end, closed",
                    peer,
                )
            except Exception:
                logger.exception("the handler of the connection with %s failed", peer)
            finally:
                await stream.aclose()

        await self.listener.serve(wrapped, task_group)

    async def aclose(self) -> None:
        await self.listener.aclose()

    @property
    def extra_attributes(self) -> Mapping[Any, Callable[[], Any]]:
        return self.listener.extra_attributes

    def __repr__(self) -> str:
        return f"EncryptedListener({self.listener!r}, {self._config!r})"


async def connect(
    host: str,
    port: int,
    *,
    psk: KeyInput | None = None,
    static_key: KeyInput | None = None,
    server_public_key: Buffer | None = None,
    accept_peer: AcceptPeer | None = None,
    handshake_timeout: float | None = DEFAULT_HANDSHAKE_TIMEOUT,
    cipher: str = "ChaChaPoly",
    hash: str = "BLAKE2s",
    rekey_interval: int | None = DEFAULT_REKEY_INTERVAL,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> EncryptedStream:
    """Connect over TCP and run the client handshake: ``async with await connect(...) as s:``.

    Options as in :meth:`EncryptedStream.wrap`; raises what it raises, plus anyio's
    connection errors (``OSError``).
    """
    config = _Config.make(
        server_side=False,
        psk=psk,
        static_key=static_key,
        server_public_key=server_public_key,
        accept_peer=accept_peer,
        cipher=cipher,
        hash=hash,
        rekey_interval=rekey_interval,
        policy=policy,
    )
    transport = await anyio.connect_tcp(host, port)
    return await EncryptedStream._wrap(transport, config, handshake_timeout)


async def serve(
    handler: Callable[[EncryptedStream], Awaitable[Any]],
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    psk: KeyInput | None = None,
    static_key: KeyInput | None = None,
    accept_peer: AcceptPeer | None = None,
    handshake_timeout: float | None = DEFAULT_HANDSHAKE_TIMEOUT,
    cipher: str = "ChaChaPoly",
    hash: str = "BLAKE2s",
    rekey_interval: int | None = DEFAULT_REKEY_INTERVAL,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
    task_status: TaskStatus[int] = TASK_STATUS_IGNORED,
) -> None:
    """Listen on ``host:port`` and serve encrypted connections until cancelled.

    ``port=0`` picks a free port; to learn it, start the server in a task group (which
    passes no keyword arguments, hence the ``partial``)::

        async with anyio.create_task_group() as tg:
            port = await tg.start(functools.partial(serve, handler, static_key=key))
            ...  # clients connect to ("127.0.0.1", port)
            tg.cancel_scope.cancel()  # stops the server

    The bound port is the value ``tg.start`` returns. Each connection is handled as
    :class:`EncryptedListener` does (bad clients are logged and closed, others go on).
    Options as in :meth:`EncryptedStream.wrap`; bad options raise before binding.
    """
    _Config.make(  # validate before binding the port
        server_side=True,
        psk=psk,
        static_key=static_key,
        server_public_key=None,
        accept_peer=accept_peer,
        cipher=cipher,
        hash=hash,
        rekey_interval=rekey_interval,
        policy=policy,
    )
    listener = EncryptedListener(
        await anyio.create_tcp_listener(local_host=host, local_port=port),
        psk=psk,
        static_key=static_key,
        accept_peer=accept_peer,
        handshake_timeout=handshake_timeout,
        cipher=cipher,
        hash=hash,
        rekey_interval=rekey_interval,
        policy=policy,
    )
    async with listener:
        task_status.started(listener.extra(SocketAttribute.local_port))
        await listener.serve(handler)
