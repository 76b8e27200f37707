"""Encrypt (or decrypt) a large file with a progress display, in bounded memory.

Run it::

    python examples/encrypt_file.py keygen file.key
    python examples/encrypt_file.py encrypt big.iso big.iso.sc --key file.key
    python examples/encrypt_file.py decrypt big.iso.sc big.copy.iso --key file.key

The key file is streamcrypt's symmetric key file (docs/CLI.md, "Key files"), the one
``streamcrypt keygen`` writes (``SecretKey.from_file`` also reads the older 64 hex
digits). The encrypted file is a native streamcrypt container (AES-256-GCM in 64 KiB segments, docs/FORMAT.md), written by
``streamcrypt.open`` (an async encrypted file): the source is read in 1 MiB blocks,
sealed in batches on worker threads, and written to a temporary beside the destination
that is renamed into place only when the last segment is sealed, so an interrupted run
leaves the destination untouched. Memory stays at a few batches whatever the file size.

Decryption reads the container with random access and releases only segments whose tag
verified; the plaintext goes to a temporary too and is renamed into place only after
the whole file verified, so a tampered or truncated file leaves no partial plaintext.

The progress bar uses ``rich`` when it is installed and stderr is a terminal; otherwise a
plain status line (one final line when stderr is not a terminal). Exit status: 0 ok,
1 failed (the error's type and message on stderr).
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

import anyio

import streamcrypt
from streamcrypt.errors import StreamCryptError
from streamcrypt.keys import SecretKey

__all__ = ["decrypt_file", "encrypt_file", "main"]

#: Bytes read from the source per call.
BLOCK = 1 << 20


# -- progress ----------------------------------------------------------------------------------


class Progress(Protocol):
    def advance(self, n: int) -> None: ...

    def set_total(self, total: int) -> None: ...

    def __enter__(self) -> Progress: ...

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None: ...


class PlainProgress:
    """One status line on stderr: redrawn ~5 times a second on a terminal, else once."""

    def __init__(self, label: str, total: int) -> None:
        self.label, self.total, self.done = label, total, 0
        self.start = self.last = time.monotonic()
        self.live = sys.stderr.isatty()

    def _line(self) -> str:
        elapsed = max(time.monotonic() - self.start, 1e-9)
        pct = 100.0 * self.done / self.total if self.total else 100.0
        rate = self.done / elapsed / 2**20
        return f"{self.label}: {pct:5.1f}% {self.done / 2**20:,.1f} MiB, {rate:,.0f} MiB/s"

    def advance(self, n: int) -> None:
        self.done += n
        now = time.monotonic()
        if self.live and now - self.last >= 0.2:
            self.last = now
            print("\r" + self._line(), end="", file=sys.stderr, flush=True)

    def set_total(self, total: int) -> None:
        self.total = total

    def __enter__(self) -> PlainProgress:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        if e is None:
            print(("\r" if self.live else "") + self._line(), file=sys.stderr, flush=True)
        elif self.live:
            print(file=sys.stderr)


class RichProgress:
    """A rich progress bar with transfer speed and time remaining."""

    def __init__(self, label: str, total: int) -> None:
        from rich import progress as rp

        self._bar = rp.Progress(
            rp.TextColumn("{task.description}"),
            rp.BarColumn(),
            rp.DownloadColumn(binary_units=True),
            rp.TransferSpeedColumn(),
            rp.TimeRemainingColumn(),
            transient=False,
        )
        self._task = self._bar.add_task(label, total=total)

    def advance(self, n: int) -> None:
        self._bar.advance(self._task, n)

    def set_total(self, total: int) -> None:
        self._bar.update(self._task, total=total)

    def __enter__(self) -> RichProgress:
        self._bar.start()
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._bar.stop()


def progress(label: str, total: int, *, quiet: bool = False) -> Progress:
    """Rich when installed and on a terminal, else a plain line; nothing when quiet."""
    if quiet:
        return _Silent()
    if sys.stderr.isatty():
        try:
            return RichProgress(label, total)
        except ImportError:
            pass
    return PlainProgress(label, total)


class _Silent:
    def advance(self, n: int) -> None:
        pass

    def set_total(self, total: int) -> None:
        pass

    def __enter__(self) -> _Silent:
        return self

    def __exit__(self, *exc: Any) -> None:
        pass


# -- the work ----------------------------------------------------------------------------------


async def encrypt_file(
    src: str | os.PathLike[str], dest: str | os.PathLike[str], key: SecretKey, bar: Progress
) -> int:
    """Encrypt ``src`` into ``dest`` (atomically); returns the plaintext size."""
    total = 0
    async with (
        await anyio.open_file(src, "rb") as source,
        streamcrypt.open(dest, "wb", key=key) as sink,  # leaving by an exception discards dest
    ):
        while block := await source.read(BLOCK):
            await sink.write(block)
            total += len(block)
            bar.advance(len(block))
    return total


async def decrypt_file(
    src: str | os.PathLike[str], dest: str | os.PathLike[str], key: SecretKey, bar: Progress
) -> int:
    """Decrypt ``src`` into ``dest``; ``dest`` appears only when everything verified.

    Raises AuthenticationError (wrong key, tampering), TruncatedStreamError, FormatError.
    """
    target = anyio.Path(dest)
    partial = target.with_name(f".{target.name}.{secrets.token_hex(8)}.partial")
    total = 0
    try:
        async with streamcrypt.open(src, "rb", key=key) as source, await partial.open("wb") as out:
            bar.set_total(source.size or 0)  # the plaintext size, known from the layout
            async for chunk in source:  # each chunk is verified plaintext
                await out.write(chunk)
                total += len(chunk)
                bar.advance(len(chunk))
        await partial.rename(target)
    except BaseException:
        with anyio.CancelScope(shield=True):
            await partial.unlink(missing_ok=True)
        raise
    return total


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = argparse.ArgumentParser(prog="encrypt_file.py", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("keygen", help="write a new key file (as streamcrypt keygen does)")
    p.add_argument("keyfile")
    for name in ("encrypt", "decrypt"):
        p = sub.add_parser(name, help=f"{name} SRC into DEST")
        p.add_argument("src")
        p.add_argument("dest")
        p.add_argument(
            "--key", required=True, help="key file (streamcrypt keygen, or 64 hex digits)"
        )
        p.add_argument("-q", "--quiet", action="store_true", help="no progress display")
    args = parser.parse_args(argv)
    try:
        if args.command == "keygen":
            SecretKey.generate(32).to_file(args.keyfile)  # mode 0600, never overwrites
            return 0
        key = SecretKey.from_file(args.key)
        size = Path(args.src).stat().st_size
        work = encrypt_file if args.command == "encrypt" else decrypt_file
        with progress(f"{args.command}ing", size, quiet=args.quiet) as bar:
            anyio.run(work, args.src, args.dest, key, bar)
    except (StreamCryptError, OSError) as exc:
        print(f"encrypt_file.py: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
