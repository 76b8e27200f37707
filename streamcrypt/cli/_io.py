"""Inputs, outputs and the progress bar of the ``streamcrypt`` command.

Inputs are read on worker threads in pieces of at most :data:`READ_SIZE` bytes, so the
memory a command holds is bounded by the engine's window, never by the input length.
File outputs are atomic: bytes go to a temporary beside the destination, which a clean
finish fsyncs and renames into place and a failure removes (the mechanism of
:mod:`streamcrypt.transports`, reused). Standard output cannot be taken back:
what was written stays written.
"""

from __future__ import annotations

import os
import stat
import sys
import time
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any

import anyio
import anyio.to_thread

from ..transports import commit_temporary, create_temporary, discard_temporary
from ._errors import EXIT_IO, CliError

__all__ = [
    "READ_SIZE",
    "FileOutput",
    "Input",
    "Output",
    "Progress",
    "StdoutOutput",
    "check_output",
    "open_output",
]

#: Bytes asked of the operating system per read.
READ_SIZE = 1 << 20
#: Seconds of work before the progress bar appears (so short runs stay quiet).
PROGRESS_DELAY = float(os.environ.get("STREAMCRYPT_PROGRESS_DELAY", "0.5"))


class Progress:
    """A rich progress bar on stderr, shown only when stderr is a terminal, the command is
    not quiet, and the work lasts longer than :data:`PROGRESS_DELAY` seconds.

    rich is imported only when the bar is about to appear; without it there is no bar.
    """

    def __init__(self, description: str, total: int | None, *, enabled: bool) -> None:
        self._description = description
        self._total = total
        self._enabled = enabled and sys.stderr.isatty()
        self._start = time.monotonic()
        self._done = 0
        self._bar: Any = None
        self._task: Any = None

    def advance(self, n: int) -> None:
        self._done += n
        if self._bar is None:
            if not self._enabled or time.monotonic() - self._start < PROGRESS_DELAY:
                return
            self._enabled = False  # one attempt only
            self._open()
            if self._bar is None:
                return
        self._bar.update(self._task, completed=self._done)

    def _open(self) -> None:
        try:
            from rich.progress import (
                BarColumn,
                DownloadColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
                TransferSpeedColumn,
            )
        except ImportError:  # the 'cli' extra is not installed: no bar
            return
        from rich.console import Console

        bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
            console=Console(file=sys.stderr),
            transient=True,
        )
        bar.start()
        self._task = bar.add_task(self._description, total=self._total, completed=self._done)
        self._bar = bar

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _read_some(fd: int, size: int) -> bytes:
    """Up to ``size`` bytes: keeps reading a pipe until ``size`` or end of input."""
    parts: list[bytes] = []
    got = 0
    while got < size:
        chunk = os.read(fd, size - got)
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return parts[0] if len(parts) == 1 else b"".join(parts)


class Input:
    """A file or standard input, read as an async iterator of chunks.

    ``peek(n)`` reads ahead without consuming (for format detection and key-id checks).
    ``interactive=True`` returns whatever one read gives (for live pipes such as
    ``connect``), instead of filling each piece.
    """

    def __init__(self, path: str | None, *, interactive: bool = False) -> None:
        self.name = path if path not in (None, "-") else "-"
        self._own = self.name != "-"
        self._interactive = interactive
        if self._own:
            assert path is not None
            self._fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                st = os.fstat(self._fd)
            except BaseException:
                os.close(self._fd)
                raise
            if stat.S_ISDIR(st.st_mode):
                os.close(self._fd)
                raise IsADirectoryError(21, "Is a directory", path)
        else:
            self._fd = sys.stdin.fileno()
            st = os.fstat(self._fd)
        self.size: int | None = st.st_size if stat.S_ISREG(st.st_mode) else None
        self._ahead: list[bytes] = []
        self._eof = False
        self.progress: Progress | None = None

    async def _read(self) -> bytes:
        if self._eof:
            return b""
        if self._interactive:
            chunk = await anyio.to_thread.run_sync(os.read, self._fd, 65536, abandon_on_cancel=True)
        else:
            chunk = await anyio.to_thread.run_sync(_read_some, self._fd, READ_SIZE)
        if not chunk:
            self._eof = True
        elif self.progress is not None:
            self.progress.advance(len(chunk))
        return chunk

    async def peek(self, n: int) -> bytes:
        """At least ``n`` leading bytes (fewer only if the input is shorter), not consumed."""
        have = b"".join(self._ahead)
        while len(have) < n:
            chunk = await self._read()
            if not chunk:
                break
            have += chunk
        self._ahead = [have] if have else []
        return have

    async def chunks(self) -> AsyncIterator[bytes]:
        while self._ahead:
            yield self._ahead.pop(0)
        while True:
            chunk = await self._read()
            if not chunk:
                return
            yield chunk

    def close(self) -> None:
        if self._own and self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class Output:
    """Where a command's bytes go: :meth:`write`, then :meth:`commit` or :meth:`abort`."""

    name: str
    written: int = 0

    async def write(self, data: bytes) -> None:
        raise NotImplementedError

    async def commit(self) -> None:
        raise NotImplementedError

    async def abort(self) -> None:
        raise NotImplementedError


class StdoutOutput(Output):
    """Standard output; nothing can be taken back."""

    def __init__(self) -> None:
        self.name = "<stdout>"
        self._fd = sys.stdout.fileno()
        self.written = 0

    async def write(self, data: bytes) -> None:
        if data:
            await anyio.to_thread.run_sync(_write_all, self._fd, data)
            self.written += len(data)

    async def commit(self) -> None:
        pass

    async def abort(self) -> None:
        pass


class FileOutput(Output):
    """An atomic file: a temporary beside ``path``, renamed into place by :meth:`commit`."""

    def __init__(self, path: str, fd: int, tmp: str) -> None:
        self.name = path
        self._fd: int | None = fd
        self._tmp = tmp
        self.written = 0

    async def write(self, data: bytes) -> None:
        assert self._fd is not None
        if data:
            await anyio.to_thread.run_sync(_write_all, self._fd, data)
            self.written += len(data)

    async def commit(self) -> None:
        fd, self._fd = self._fd, None
        assert fd is not None
        try:
            await anyio.to_thread.run_sync(commit_temporary, fd, self._tmp, self.name)
        except BaseException as exc:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(discard_temporary, None, self._tmp)
            if isinstance(exc, OSError):  # name the file the user gave, not the temporary
                raise _cannot_write(self.name, exc) from None
            raise

    async def abort(self) -> None:
        fd, self._fd = self._fd, None
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(discard_temporary, fd, self._tmp)


def _cannot_write(path: str, exc: OSError) -> CliError:
    return CliError(f"cannot write {path}: {exc.strerror or exc}", EXIT_IO)


def check_output(path: str | None) -> None:
    """Fail at once (exit 4), before any work, when ``-o PATH`` can never be written:
    ``PATH`` is a directory, or the directory it names does not exist or is not one."""
    if path is None or path == "-":
        return
    if os.path.isdir(path):
        raise CliError(f"{path} is a directory; -o takes the name of a file", EXIT_IO)
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.exists(parent):
        raise CliError(f"cannot write {path}: the directory {parent} does not exist", EXIT_IO)
    if not os.path.isdir(parent):
        raise CliError(f"cannot write {path}: {parent} is not a directory", EXIT_IO)


async def open_output(path: str | None) -> Output:
    """The output for ``-o PATH`` (atomic) or standard output (``None`` or ``-``).

    Errors name ``PATH``, never the temporary beside it (:class:`CliError`, exit 4)."""
    if path is None or path == "-":
        return StdoutOutput()
    check_output(path)
    try:
        with anyio.CancelScope(shield=True):  # never leave a temporary behind
            fd, tmp = await anyio.to_thread.run_sync(create_temporary, path)
    except OSError as exc:
        raise _cannot_write(path, exc) from None
    return FileOutput(path, fd, tmp)
