"""Encrypted listeners and the TCP entry points: :class:`EncryptedListener`,
:func:`connect` and :func:`serve` (how connections end and fail: ``_stream.py``)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

import anyio
from anyio import (
    TASK_STATUS_IGNORED,
    BrokenResourceError,
    ClosedResourceError,
    EndOfStream,
    aclose_forcefully,
)
from anyio.abc import AnyByteStream, Listener, SocketAttribute, TaskGroup, TaskStatus

from ..abc import Buffer
from ..codecs.records import DEFAULT_REKEY_INTERVAL, REFUSED_BUSY
from ..engine import DEFAULT_POLICY, OffloadPolicy
from ..errors import InvalidParameterError, StreamCryptError
from ..keys import HoldsSecrets
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
from ._ratelog import FailureLog
from ._socket import ProtocolListener, on_asyncio, open_tcp
from ._stream import EncryptedStream

logger = logging.getLogger("streamcrypt.transports")

#: Connections a listener serves at once before it refuses more: a connection holds at
#: most about 2.1 MiB (one 1 MiB read, a record, a 1 MiB receive buffer) while its peer
#: sends at full speed and about 4 KiB idle, so 1024 bound a flood to ~2 GiB; 1024 is
#: also the usual soft limit on open file descriptors.
DEFAULT_MAX_CONNECTIONS: Final = 1024


#: Seconds a refusal's three bytes may take to reach the kernel (an empty socket buffer
#: takes them at once; a peer that keeps its window shut is not waited for).
_REFUSAL_SEND: Final = 0.1


def _check_cap(max_connections: int | None) -> None:
    if max_connections is not None and (isinstance(max_connections, bool) or max_connections < 1):
        raise InvalidParameterError(
            f"max_connections must be a positive number or None, got {max_connections!r}"
        )


def _peer_name(stream: AnyByteStream) -> str:
    try:
        address = stream.extra(SocketAttribute.remote_address)
    except Exception:
        return "peer"
    if isinstance(address, tuple) and len(address) >= 2:
        return f"{address[0]}:{address[1]}"
    return str(address)


async def _refuse(transport: AnyByteStream) -> None:
    """Tell a client over the cap that the server is busy (:data:`REFUSED_BUSY`, which its
    handshake raises as :class:`HandshakeError`), then close: one small write (given at
    most ``_REFUSAL_SEND``), no read. Closing with the client's first flight unread
    resets the connection, but the reset follows the refusal on the wire and the client
    reads what came before it first."""
    try:
        with anyio.move_on_after(_REFUSAL_SEND):
            await transport.send(REFUSED_BUSY)
    except (BrokenResourceError, ClosedResourceError, OSError):
        pass  # the client is gone already
    finally:
        await aclose_forcefully(transport)


class EncryptedListener(Listener[EncryptedStream], HoldsSecrets):
    """Wraps any anyio listener: each accepted stream runs the handshake (server side).

    Options as in :meth:`EncryptedStream.wrap` (``server_public_key`` excepted); bad
    options raise :class:`InvalidParameterError` here. A connection whose handshake fails or times out, or whose handler raises, is
    closed and logged on the ``"streamcrypt.transports"`` logger: one warning line saying
    what failed with which peer, then the error type and message (never key bytes; an
    unexpected handler error with its traceback), at a bounded rate: ten lines per ten
    seconds, then one summary line; other connections keep going.

    ``max_connections`` (default :data:`DEFAULT_MAX_CONNECTIONS`; ``None``: no cap)
    bounds the connections served at once, handshakes included: one accepted beyond it is
    refused before its handshake: told the server is busy and closed at once (logged at
    the same bounded rate), so that a flood of connections costs an accept and a 3-byte
    write each, not a connection's buffers; the client's handshake fails with
    :class:`HandshakeError` ("the server refused the connection: it serves as many
    connections as it takes").
    """

    def __init__(
        self,
        listener: Listener[AnyByteStream],
        *,
        psk: KeyInput | None = None,
        static_key: KeyInput | None = None,
        accept_peer: AcceptPeer | None = None,
        cipher: Cipher = "auto",
        hash: NoiseHash = "BLAKE2s",
        rekey_interval: int | None = DEFAULT_REKEY_INTERVAL,
        handshake_timeout: float | None = DEFAULT_HANDSHAKE_TIMEOUT,
        idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
        record_timeout: float | None = DEFAULT_RECORD_TIMEOUT,
        policy: OffloadPolicy | None = DEFAULT_POLICY,
        max_connections: int | None = DEFAULT_MAX_CONNECTIONS,
    ) -> None:
        config = config_of(StreamConfig, locals())
        self._setup(listener, config, max_connections)

    @classmethod
    def _of(
        cls,
        listener: Listener[AnyByteStream],
        config: StreamConfig,
        max_connections: int | None,
    ) -> EncryptedListener:
        """A listener from options already checked (:func:`serve`)."""
        self = cls.__new__(cls)
        self._setup(listener, config, max_connections)
        return self

    def _setup(
        self,
        listener: Listener[AnyByteStream],
        config: StreamConfig,
        max_connections: int | None,
    ) -> None:
        _check_cap(max_connections)
        self.listener = listener
        self._config = config
        self.max_connections = max_connections
        self._protocol = config.protocol(server_side=True)
        self.failures = FailureLog(logger)
        self._open = 0

    async def serve(
        self,
        handler: Callable[[EncryptedStream], Awaitable[object]],
        task_group: TaskGroup | None = None,
    ) -> None:
        """Serve forever, calling ``await handler(stream)`` for each handshaken connection."""

        async def wrapped(transport: AnyByteStream) -> None:
            peer = _peer_name(transport)
            cap = self.max_connections
            if cap is not None and self._open >= cap:
                await _refuse(transport)
                self.failures.failure(
                    f"refused the connection from {peer}: {self._open} encrypted "
                    f"connections are open, the most this listener serves at once "
                    f"(max_connections={cap})"
                )
                return
            self._open += 1
            try:
                await serve_one(transport, peer)
            finally:
                self._open -= 1

        async def serve_one(transport: AnyByteStream, peer: str) -> None:
            try:
                stream = await EncryptedStream._wrap(transport, self._config, self._protocol)
            except Exception as exc:
                self.failures.failure(
                    f"encrypted handshake with {peer} failed, connection closed", exc
                )
                return
            finished = False  # the handler returned: only then is the close authenticated
            try:
                await handler(stream)
                finished = True
            except (StreamCryptError, BrokenResourceError, ClosedResourceError, OSError) as exc:
                self.failures.failure(
                    f"encrypted connection with {peer} failed, connection closed", exc
                )
            except EndOfStream as exc:
                self.failures.failure(
                    f"encrypted connection with {peer}: the handler read past the end, "
                    "connection closed",
                    exc,
                )
            except Exception as exc:
                self.failures.failure(
                    f"the handler of the encrypted connection with {peer} failed, "
                    "connection aborted",
                    exc,
                    trace=True,
                )
            finally:
                await stream._end(finished=finished)

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
    cipher: Cipher = "auto",
    hash: NoiseHash = "BLAKE2s",
    rekey_interval: int | None = DEFAULT_REKEY_INTERVAL,
    handshake_timeout: float | None = DEFAULT_HANDSHAKE_TIMEOUT,
    idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
    record_timeout: float | None = DEFAULT_RECORD_TIMEOUT,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> EncryptedStream:
    """Connect over TCP and run the client handshake: ``async with await connect(...) as s:``.

    Options as in :meth:`EncryptedStream.wrap`; raises what it raises, plus connection
    errors (``OSError``). On asyncio the TCP stream (``transport_stream``) is a
    ``ProtocolStream``, on trio anyio's; on asyncio the
    addresses of ``host`` are tried one after another, not raced as anyio's happy
    eyeballs do.
    """
    settings = config_of(StreamConfig, locals())
    protocol = settings.protocol(server_side=False)
    transport = await (open_tcp(host, port) if on_asyncio() else anyio.connect_tcp(host, port))
    return await EncryptedStream._wrap(transport, settings, protocol)


async def serve(
    handler: Callable[[EncryptedStream], Awaitable[object]],
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    psk: KeyInput | None = None,
    static_key: KeyInput | None = None,
    accept_peer: AcceptPeer | None = None,
    cipher: Cipher = "auto",
    hash: NoiseHash = "BLAKE2s",
    rekey_interval: int | None = DEFAULT_REKEY_INTERVAL,
    handshake_timeout: float | None = DEFAULT_HANDSHAKE_TIMEOUT,
    idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
    record_timeout: float | None = DEFAULT_RECORD_TIMEOUT,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
    max_connections: int | None = DEFAULT_MAX_CONNECTIONS,
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
    :class:`EncryptedListener` does (bad clients are logged and closed, others go on;
    beyond ``max_connections`` at once, default :data:`DEFAULT_MAX_CONNECTIONS`, new
    connections are refused: closed before their handshake).
    On asyncio the listener is a ``ProtocolListener`` (private), on
    trio anyio's TCP listener.
    Options as in :meth:`EncryptedStream.wrap`; bad options raise before binding.
    """
    settings = config_of(StreamConfig, locals())
    settings.protocol(server_side=True)  # validate before binding the port
    _check_cap(max_connections)
    if on_asyncio():
        tcp: Listener[AnyByteStream] = await ProtocolListener.create(host, port)
    else:
        tcp = await anyio.create_tcp_listener(local_host=host, local_port=port)
    listener = EncryptedListener._of(tcp, settings, max_connections)
    async with listener:
        task_status.started(listener.extra(SocketAttribute.local_port))
        await listener.serve(handler)
