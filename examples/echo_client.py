"""The client of examples/echo_server.py: send messages over Noise and print the echoes.

Run it (after starting the server, see echo_server.py)::

    python examples/echo_client.py --psk echo.key --port 9000 hello world
    python examples/echo_client.py --server-public-key <64 hex> --port 9000 hello

Each message is sent as one record and its echo read back in full before the next;
then the client sends its authenticated close and waits for the server's, so a cut
connection shows up as :class:`~streamcrypt.errors.TruncatedStreamError` rather than
as a quiet end. Exit status: 0 when every echo matched, 1 otherwise.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Sequence

import anyio

import streamcrypt
from streamcrypt.errors import InvalidParameterError, StreamCryptError
from streamcrypt.keys import SecretKey
from streamcrypt.transports import EncryptedStreamAttribute

__all__ = ["main", "run_client"]


async def run_client(
    host: str,
    port: int,
    messages: Sequence[str],
    *,
    psk: SecretKey | None = None,
    server_public_key: bytes | None = None,
) -> list[str]:
    """Send each message, read its echo; returns the echoes in order."""
    echoes = []
    async with await streamcrypt.connect(
        host, port, psk=psk, server_public_key=server_public_key
    ) as stream:
        name = stream.extra(EncryptedStreamAttribute.protocol_name)
        print(f"connected to {host}:{port} ({name})", file=sys.stderr)
        for message in messages:
            data = message.encode()
            await stream.send(data)
            reply = bytearray()
            while len(reply) < len(data):
                reply += await stream.receive()
            echoes.append(reply.decode())
        await stream.send_eof()  # our authenticated close; the server then closes too
        try:
            extra = await stream.receive()
        except anyio.EndOfStream:  # the server's close record verified: a clean end
            pass
        else:
            raise InvalidParameterError(f"the server sent {len(extra)} unexpected bytes")
    return echoes


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the options, talk to the server, print the echoes; returns the exit status."""
    parser = argparse.ArgumentParser(prog="echo_client.py", description=__doc__.split("\n")[0])
    parser.add_argument("messages", nargs="+")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9000)
    keys = parser.add_mutually_exclusive_group(required=True)
    keys.add_argument("--psk", help="pre-shared key file (streamcrypt keygen)")
    keys.add_argument("--server-public-key", help="the server's X25519 public key (64 hex)")
    args = parser.parse_args(argv)
    try:
        psk = SecretKey.from_file(args.psk) if args.psk else None
        server = bytes.fromhex(args.server_public_key) if args.server_public_key else None
        run = functools.partial(
            run_client, args.host, args.port, args.messages, psk=psk, server_public_key=server
        )
        echoes = anyio.run(run)
    except (StreamCryptError, OSError, ValueError) as exc:
        print(f"echo_client.py: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    for echo in echoes:
        print(echo)
    return 0 if echoes == list(args.messages) else 1


if __name__ == "__main__":
    sys.exit(main())
