"""``make demo``: the end-to-end story on built-in defaults.

1. Generate keys: a KeyRing for the file, a Noise static key pair for the server.
2. Stream a few hundred MiB of generated data from a client through an encrypted socket
   (Noise NK: the client knows the server key) to a server that writes it into an encrypted file.
3. Read the file back: random-access reads at scattered offsets, then the whole file.
4. Check BLAKE3 hashes of what was sent, what was stored and what was read back, and
   print a short report with throughput.

``python examples/demo.py [--mib N]`` (what ``make demo`` runs); exit status 1 if anything does not match.
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import anyio

from streamcrypt.codecs.noise import generate_keypair
from streamcrypt.keys import KeyRing
from streamcrypt.primitives import Blake3Tap
from streamcrypt.primitives.hazmat import AesCtrEncryptor
from streamcrypt.transports import (
    EncryptedStream,
    EncryptedStreamAttribute,
    connect,
    open_file,
    serve,
)

CHUNK = 1 << 20
_SEED_KEY = bytes(range(32))


def _generated(offset: int, length: int) -> bytes:
    """Deterministic data: the AES-CTR keystream of a fixed key, from byte ``offset``."""
    block, skip = divmod(offset, 16)
    ctr = AesCtrEncryptor(_SEED_KEY, block.to_bytes(16, "big"))
    return ctr.update(bytes(skip + length))[skip:]


def _chunks(total: int) -> Iterator[bytes]:
    ctr = AesCtrEncryptor(_SEED_KEY, bytes(16))
    zeros = bytes(CHUNK)
    for off in range(0, total, CHUNK):
        yield ctr.update(zeros[: min(CHUNK, total - off)])


async def run_demo(mib: int = 256, directory: str | None = None) -> bool:
    """Run the story on ``mib`` MiB; return True when every check passed."""
    total = mib << 20
    ring = KeyRing()
    file_key = ring.rotate()
    server_private, server_public = generate_keypair()
    tmp = tempfile.TemporaryDirectory(dir=directory)
    path = Path(tmp.name) / "received.sc"
    sent_hash, stored_hash = Blake3Tap(), Blake3Tap()
    received = anyio.Event()
    print(f"streamcrypt demo: {mib} MiB, file key id {file_key.key_id}, Noise over 127.0.0.1")

    async def handler(stream: EncryptedStream) -> None:
        async with open_file(path, "wb", key=ring) as f:
            async for chunk in stream:
                stored_hash.update(chunk)
                await f.write(chunk)
        stored_hash.finalize()
        received.set()

    t0 = time.perf_counter()
    async with anyio.create_task_group() as tg:
        port = await tg.start(partial(serve, handler, "127.0.0.1", 0, static_key=server_private))
        async with await connect("127.0.0.1", port, server_public_key=server_public) as stream:
            suite = stream.extra(EncryptedStreamAttribute.protocol_name)
            for chunk in _chunks(total):
                sent_hash.update(chunk)
                await stream.send(chunk)
            await stream.send_eof()
        sent_hash.finalize()
        await received.wait()
        tg.cancel_scope.cancel()
    t_send = time.perf_counter() - t0
    size_on_disk = path.stat().st_size

    rng = random.Random(2026)
    checks = 0
    t0 = time.perf_counter()
    async with open_file(path, "rb", key=ring) as f:
        for _ in range(64):
            offset = rng.randrange(total)
            n = rng.randrange(1, 200_000)
            await f.seek(offset)
            if await f.read(n) != _generated(offset, min(n, total - offset)):
                print(f"  random access read at {offset} does not match")
                return False
            checks += 1
    t_random = time.perf_counter() - t0

    read_hash = Blake3Tap()
    t0 = time.perf_counter()
    async with open_file(path, "rb", key=ring) as f:
        async for chunk in f:
            read_hash.update(chunk)
    read_hash.finalize()
    t_read = time.perf_counter() - t0

    ok = sent_hash.digest() == stored_hash.digest() == read_hash.digest()
    mbps = total / 1e6
    print(
        f"  sent through the encrypted socket into an encrypted file (fsync included): {mbps / t_send:.0f} MB/s ({suite})"
    )
    print(
        f"  file on disk: {size_on_disk:,} bytes for {total:,} bytes of plaintext "
        f"({(size_on_disk - total) / total * 100:.3f}% overhead)"
    )
    print(f"  {checks} random-access reads verified in {t_random * 1e3:.0f} ms")
    print(f"  read back and verified: {mbps / t_read:.0f} MB/s")
    print(f"  BLAKE3 sent   {sent_hash.hexdigest()}")
    print(f"  BLAKE3 stored {stored_hash.hexdigest()}")
    print(f"  BLAKE3 read   {read_hash.hexdigest()}")
    print("  all checks passed" if ok else "  HASHES DIFFER")
    tmp.cleanup()
    return ok


def main() -> None:
    """``python examples/demo.py [--mib N]`` (what ``make demo`` runs): run the demo end to end (``make demo``)."""
    parser = argparse.ArgumentParser(
        prog="python -m streamcrypt._demo", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--mib", type=int, default=256, help="MiB to stream (default 256)")
    args = parser.parse_args()
    if not anyio.run(run_demo, args.mib, os.environ.get("TMPDIR")):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
