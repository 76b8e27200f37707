"""An encrypted TCP echo server: every byte a client sends comes back, over Noise.

Run it (two terminals), with a pre-shared key::

    python examples/encrypt_file.py keygen echo.key          # or: streamcrypt keygen -o echo.key
    python examples/echo_server.py --psk echo.key --port 9000
    python examples/echo_client.py --psk echo.key --port 9000 hello world

or with a static server key (Noise NK: the client pins the server's public key, which the
server prints when it starts)::

    python examples/echo_server.py --static-key server.key --port 9000
    python examples/echo_client.py --server-public-key <64 hex> --port 9000 hello

``--port 0`` picks a free port; the server prints ``listening on HOST:PORT`` (flushed) so
a script can read it. The server runs until SIGINT or SIGTERM and then exits with 0.
Each connection is an :class:`~streamcrypt.transports.EncryptedStream`: ``receive()``
returns verified plaintext only, and a connection that fails its handshake or a record
check is logged and closed while the others go on.
"""

from __future__ import annotations

import argparse
import functools
import logging
import signal
import sys
from collections.abc import Sequence

import anyio
from anyio.abc import TaskStatus

import streamcrypt
from streamcrypt.codecs.noise import public_key
from streamcrypt.errors import InvalidParameterError
from streamcrypt.keys import SecretKey
from streamcrypt.transports import EncryptedStreamAttribute

__all__ = ["echo", "main", "run_server"]


async def echo(stream: streamcrypt.EncryptedStream) -> None:
    """Send back everything received until the client's authenticated close."""
    protocol = stream.extra(EncryptedStreamAttribute.protocol_name)
    print(f"connection ({protocol})", flush=True)
    received = 0
    async for data in stream:  # ends at EndOfStream: the peer's close record verified
        await stream.send(data)
        received += len(data)
    print(f"connection closed after {received} bytes", flush=True)
    # The listener closes the stream after the handler returns: that sends our close record.


async def run_server(
    host: str,
    port: int,
    *,
    psk: SecretKey | None = None,
    static_key: SecretKey | None = None,
    task_status: TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve until SIGINT/SIGTERM (or cancellation), printing ``listening on HOST:PORT``.

    Started with ``port = await tg.start(run_server, ...)``, it reports the bound port.
    """
    async with anyio.create_task_group() as tg:
        start = functools.partial(
            streamcrypt.serve, echo, host, port, psk=psk, static_key=static_key
        )
        bound = await tg.start(start)
        print(f"listening on {host}:{bound}", flush=True)
        if static_key is not None:
            print(f"server public key: {public_key(static_key).hex()}", flush=True)
        task_status.started(bound)
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for signum in signals:
                print(f"{signal.Signals(signum).name}: shutting down", flush=True)
                tg.cancel_scope.cancel()
                break


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the options and serve; returns the exit status."""
    parser = argparse.ArgumentParser(prog="echo_server.py", description="Encrypted TCP echo.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9000, help="0 picks a free port")
    keys = parser.add_mutually_exclusive_group(required=True)
    keys.add_argument("--psk", help="pre-shared key file (streamcrypt keygen): Noise NNpsk0")
    keys.add_argument("--static-key", help="server X25519 private key file: Noise NK/IK")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        psk = SecretKey.from_file(args.psk) if args.psk else None
        static = SecretKey.from_file(args.static_key) if args.static_key else None
        anyio.run(functools.partial(run_server, args.host, args.port, psk=psk, static_key=static))
    except (InvalidParameterError, OSError) as exc:
        print(f"echo_server.py: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
