"""Inputs, outputs and the progress bar of the ``streamcrypt`` command.

Inputs are read in pieces (of at most :data:`READ_SIZE` bytes unless asked for fewer),
so the memory a command holds is bounded by the pieces in flight, never by the input
length.
File outputs are atomic: bytes go to a temporary beside the destination, which a clean
finish renames into place (fsyncing it first with ``--fsync``) and a failure removes (the
mechanism of :mod:`streamcrypt.transports`, reused). Standard output cannot be taken back:
what was written stays written.
"""

from __future__ import annotations

import os
import stat
import sys
import time
from collections.abc import AsyncIterator
from types import TracebackType
from typing import TYPE_CHECKING, Any

from .. import transports as _transports  # its names load on first use (start-up)
from .._lazy import LazyModule
from ..abc import Buffer, as_bytes
from ..engine import run_io
from ..errors import UnsafePathError
from ..paths import name_parts
from ._errors import EXIT_IO, EXIT_USAGE, CliError

if TYPE_CHECKING:
    import anyio

    from ..engine import WriteBehind
else:  # imported on first use: encrypt and decrypt run without an event loop (start-up)
    anyio = LazyModule("anyio")

#: Bytes asked of the operating system per read.
READ_SIZE = 4 << 20
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

    def update(self, done: int, total: int) -> None:
        """``progress(done, total)``, the callback the library's long calls take."""
        self._total = total
        self.advance(done - self._done)

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
    """A file or standard input: :meth:`read` reads in the thread that calls it;
    :meth:`peek_now` reads ahead without consuming (for format detection and key-id
    checks); :meth:`chunks` is an async iterator of whatever each read gives (for live
    pipes such as ``connect``)."""

    def __init__(self, path: str | None) -> None:
        self.name = path if path not in (None, "-") else "-"
        self._own = self.name != "-"
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

    def _took(self, chunk: bytes) -> bytes:
        if not chunk:
            self._eof = True
        elif self.progress is not None:
            self.progress.advance(len(chunk))
        return chunk

    def read(self, size: int = READ_SIZE) -> bytes:
        """The next piece of at most ``size`` bytes (``b""`` at the end), for the
        synchronous commands (no event loop); bytes peeked come first, whatever their
        length. Not thread-safe: one call at a time."""
        if self._ahead:
            return self._ahead.pop(0)
        if self._eof:
            return b""
        return self._took(_read_some(self._fd, size))

    def peek_now(self, n: int) -> bytes:
        """At least ``n`` leading bytes (fewer only if the input is shorter), not consumed,
        for the synchronous commands."""
        have = b"".join(self._ahead)
        while len(have) < n and not self._eof:
            chunk = self._took(_read_some(self._fd, READ_SIZE))
            have += chunk
        self._ahead = [have] if have else []
        return have

    async def chunks(self) -> AsyncIterator[bytes]:
        while self._ahead:
            yield self._ahead.pop(0)
        while not self._eof:
            chunk = await run_io(os.read, self._fd, 65536, abandon=True)
            if self._took(chunk):
                yield chunk

    def close(self) -> None:
        if self._own and self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


#: Bytes queued for writing before :meth:`Output.write` waits for room.
WRITE_AHEAD = 16 << 20
#: Bytes :meth:`Output.put` (encrypt and decrypt, which work in whole pieces anyway) queues
#: before it wakes a sleeping writer thread: a wake-up is two context switches and a
#: hand-over of the GIL, per 1 MiB piece a third of a 1 GiB run's context switches. The
#: async :meth:`Output.write` (live streams) wakes it at once.
_WAKE_AT = 4 << 20
#: A durable file output (``--fsync``) asks the kernel to start writing back each this many
#: bytes as they come, so the fsync at the end waits for the last step only.
WRITEBACK_STEP = 8 << 20


def _writev_all(fd: int, items: list[Buffer]) -> None:
    """Write every item, in order, in as few system calls as the kernel allows."""
    while items:
        done = os.writev(fd, items)
        while items and done >= len(items[0]):
            done -= len(items.pop(0))
        if items and done:
            items[0] = items[0][done:]


_sync_range: Any = None


def _start_writeback(fd: int, offset: int, length: int) -> None:
    """Start writing ``length`` bytes at ``offset`` to disk without waiting (Linux's
    ``sync_file_range(SYNC_FILE_RANGE_WRITE)``); a no-op where there is none."""
    global _sync_range
    if _sync_range is None:
        _sync_range = False
        if sys.platform.startswith("linux"):
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            function = getattr(libc, "sync_file_range", None)
            if function is not None:
                function.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
                _sync_range = function
    if _sync_range:
        _sync_range(fd, offset, length, 2)  # SYNC_FILE_RANGE_WRITE; failure is harmless


def _writer(fd: int, *, writeback: bool) -> WriteBehind:
    """Writes to ``fd`` behind the producer, on the engine's writer thread
    (:class:`streamcrypt.engine.WriteBehind`), so that writing overlaps the work that
    produces the bytes; ``writeback``: start writing each :data:`WRITEBACK_STEP` to disk
    as it comes."""
    written = kicked = 0

    def write(items: list[Buffer]) -> None:
        nonlocal written, kicked
        _writev_all(fd, items)
        written += sum(map(len, items))
        if writeback and written - kicked >= WRITEBACK_STEP:
            _start_writeback(fd, kicked, written - kicked)
            kicked = written

    from ..engine import WriteBehind

    return WriteBehind(write, WRITE_AHEAD)


class Output:
    """Where a command's bytes go: :meth:`write`, then :meth:`commit` or :meth:`abort`.

    Bytes are written on the engine's writer thread, behind a queue of at most
    :data:`WRITE_AHEAD` bytes; a write error surfaces from a later :meth:`write` or from
    :meth:`commit`.
    """

    name: str
    _writer: WriteBehind

    @property
    def written(self) -> int:
        """Bytes written so far (not counting those still queued)."""
        return self._writer.written

    def _raise(self) -> None:
        error = self._writer.error
        if isinstance(error, BrokenPipeError):  # the reader went away: the command ends quietly
            raise error
        if error is not None:
            raise _cannot_write(self.name, error) from None

    def put(self, data: Buffer) -> None:
        """Queue ``data`` for the writer thread, which keeps it until written (never pass
        a buffer that is reused); waits in this thread while the queue is full. The
        writer is woken once :data:`_WAKE_AT` bytes wait (or at :meth:`commit_now`)."""
        self._raise()
        if data and self._writer.put(data, _WAKE_AT):
            self._writer.wait_room()
            self._raise()

    async def write(self, data: Buffer) -> None:
        self._raise()
        if data:
            if self._writer.put(as_bytes(data, "data")):
                await run_io(self._writer.wait_room)
                self._raise()

    def _finish(self) -> None:
        """Write everything queued; raises the writer's error."""
        self._writer.close()
        self._raise()

    def commit_now(self) -> None:
        """Finish the output in the calling thread (see :meth:`commit`)."""
        raise NotImplementedError

    def abort_now(self) -> None:
        """Give the output up in the calling thread (see :meth:`abort`)."""
        raise NotImplementedError

    async def commit(self) -> None:
        """Write what is queued and make the output final (a file: renamed into place).

        Not abandoned on cancellation: a commit either never starts (cancelled before)
        or runs to its end (shielded), so :meth:`abort` never runs beside it on the same
        output (both took the file's descriptor and temporary: a file could be renamed
        into place after the command reported failure). A cancellation that came during
        it is delivered after it, with the output final; :meth:`abort` then does nothing.
        """
        await anyio.lowlevel.checkpoint_if_cancelled()
        with anyio.CancelScope(shield=True):
            await run_io(self.commit_now)

    async def abort(self) -> None:
        """Give the output up (a file: its temporary is removed)."""
        with anyio.CancelScope(shield=True):
            await run_io(self.abort_now)


class StdoutOutput(Output):
    """Standard output, or ``-o`` naming what is not a regular file (``/dev/null``, a
    FIFO, a terminal): written in place, as it comes; nothing can be taken back."""

    def __init__(self, fd: int | None = None, name: str = "standard output") -> None:
        self.name = name
        self._own = fd is not None
        self._fd = sys.stdout.fileno() if fd is None else fd
        self._writer = _writer(self._fd, writeback=False)

    def _close(self) -> None:
        if self._own and self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def commit_now(self) -> None:
        try:
            self._finish()
        finally:
            self._close()

    def abort_now(self) -> None:
        """Write what is queued (plaintext released before a failure stays released, as
        it would have been without the queue)."""
        try:
            self._writer.close()
        finally:
            self._close()


class FileOutput(Output):
    """An atomic file: a temporary beside ``path``, renamed into place by :meth:`commit`;
    ``durable``: fsynced before the rename (and its directory after), as ``--fsync`` asks."""

    def __init__(self, path: str, fd: int, tmp: str, *, durable: bool = False) -> None:
        self.name = path
        self._fd: int | None = fd
        self._tmp = tmp
        self._durable = durable
        self._writer = _writer(fd, writeback=durable)
        self._committed = False

    def commit_now(self) -> None:
        try:
            self._finish()
            fd, self._fd = self._fd, None
            assert fd is not None
            _transports.commit_temporary(fd, self._tmp, self.name, durable=self._durable)
            self._committed = True
        except BaseException as exc:
            self.abort_now()
            if isinstance(exc, OSError):  # name the file the user gave, not the temporary
                raise _cannot_write(self.name, exc) from None
            raise

    def abort_now(self) -> None:
        """Remove the temporary; nothing once the output was committed (the file in
        place is the command's output)."""
        if self._committed:
            return
        fd, self._fd = self._fd, None
        try:
            self._writer.close(drop=True)
        finally:
            _transports.discard_temporary(fd, self._tmp)


def _cannot_write(path: str, exc: OSError) -> CliError:
    return CliError(f"cannot write {path}: {exc.strerror or exc}", EXIT_IO)


def _cannot_take_back(only_file: str, path: str | None) -> CliError:
    where = "standard output" if path in (None, "-") else f"{path} (not a regular file)"
    return CliError(
        f"{only_file} needs -o FILE: what is written is verified only at the end of the "
        f"stream, and {where} cannot be taken back",
        EXIT_USAGE,
    )


def _is_special(path: str) -> bool:
    """Whether ``path`` exists (a symbolic link followed) as something other than a
    regular file (a FIFO, a terminal, a device, ``/dev/stdout``): written in place, it
    cannot be taken back."""
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise _cannot_write(path, exc) from None


def takes_back(path: str | None) -> bool:
    """Whether ``-o PATH`` can be taken back: written through a temporary that a clean end
    renames into place and a failure removes (not standard output, not a special file
    written in place), so what goes into it before a late check never reaches anyone."""
    return path not in (None, "-") and not _is_special(path)


def _target(path: str) -> str:
    """The file ``-o PATH`` writes when it is a regular file or new: ``PATH``, or, when
    ``PATH`` is a symbolic link (dangling too), the file it leads to (every link
    followed), so that the temporary and the rename that replace it happen there and the
    link stays a link. A special file is opened through ``PATH`` itself
    (:func:`_is_special` follows links too)."""
    return os.path.realpath(path) if os.path.islink(path) else path


def check_output(path: str | None, *, only_file: str | None = None) -> None:
    """Fail at once (exit 4), before any work, when ``-o PATH`` can never be written:
    ``PATH`` is a directory, its last component is not a plain file name
    (:func:`streamcrypt.paths.name_parts`: empty, ``..``, a NUL), or the directory it
    names does not exist or is not one. A symbolic link is followed: what it leads to
    is checked (a link to a special file is that special file; a link to a regular or
    missing file names the directory of its target).

    ``only_file`` names the option that needs an output it can take back (an atomic
    file), such as ``--verify-with``, whose signature is checked only at the end: then
    standard output and an existing special file are a usage error (exit 2).
    """
    if path is None or path == "-":
        if only_file is not None:
            raise _cannot_take_back(only_file, path)
        return
    if os.path.isdir(path):
        raise CliError(f"{path} is a directory; -o takes the name of a file", EXIT_IO)
    try:
        name_parts(os.path.basename(path), what="the file name of -o", local=True)
    except UnsafePathError as exc:
        raise CliError(f"cannot write {path!r}: {exc}", EXIT_IO) from None
    if _is_special(path):  # written in place: it exists, its directory too
        if only_file is not None:
            raise _cannot_take_back(only_file, path)
        return
    parent = os.path.dirname(os.path.abspath(_target(path)))
    if not os.path.exists(parent):
        raise CliError(f"cannot write {path}: the directory {parent} does not exist", EXIT_IO)
    if not os.path.isdir(parent):
        raise CliError(f"cannot write {path}: {parent} is not a directory", EXIT_IO)


def open_output_now(
    path: str | None, *, durable: bool = False, only_file: str | None = None
) -> Output:
    """The output for ``-o PATH`` (atomic; fsynced first when ``durable``) or standard
    output (``None`` or ``-``).

    A ``PATH`` that exists and is not a regular file (``/dev/null``, a FIFO, a terminal)
    is written in place, never replaced, unless ``only_file`` names an option that needs
    an atomic file (:func:`check_output`, checked again here). Errors name ``PATH``, never
    the temporary beside it (:class:`CliError`, exit 4). A symbolic link is followed
    (:func:`_target`): what it leads to is written, the link stays a link."""
    check_output(path, only_file=only_file)
    if path is None or path == "-":
        return StdoutOutput()
    special = _is_special(path)
    if special and only_file is not None:  # became special since a check before
        raise _cannot_take_back(only_file, path)
    try:
        if special:
            return StdoutOutput(os.open(path, os.O_WRONLY | os.O_CLOEXEC), path)
        target = _target(path)
        fd, tmp = _transports.create_temporary(target)
    except OSError as exc:
        raise _cannot_write(path, exc) from None
    return FileOutput(target, fd, tmp, durable=durable)


async def open_output(path: str | None) -> Output:
    """:func:`open_output_now` on a worker thread (opening a FIFO waits for its reader)."""
    with anyio.CancelScope(shield=True):  # never leave a temporary behind
        out = await run_io(open_output_now, path, abandon=True)  # a FIFO may wait forever
    return out
