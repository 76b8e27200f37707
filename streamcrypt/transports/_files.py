"""Async encrypted files: ``async with streamcrypt.open(path, "rb" | "wb", ...) as f``.

Theory of operation
-------------------
A file is a segmented stream (the native container, age, rclone crypt, an AWS
Encryption SDK message) on disk. Every byte of file
I/O and every header check runs on worker threads (the offload policy's pool; with
``policy=None`` the crypto stays on the loop thread, the I/O still does not).

Writing: ``write()`` feeds the sans-I/O encryptor, which cuts the data into segment jobs
on the loop thread (indices and finality are decided there). Jobs are collected into
batches of ``policy.batch_size`` bytes; each batch is sealed on a worker thread, at most
``policy.max_in_flight`` batches at once, and the sealed batches are written in order,
one ``write`` call per batch, so memory is bounded by a few batches whatever the file
length. Plain stages after the segmented one (the AWS signer, which hashes every byte
and appends the signature at close) see the sealed batches in order, on a worker thread
beside the sealing. A path is written *atomically*: the data goes to a temporary file beside the
destination (``.<name>.streamcrypt-<16 hex>.tmp``); a clean close seals the final
segment, fsyncs the temporary, renames it over the destination (``os.replace``) and
fsyncs the directory. An exception inside the ``async with`` block (or a failed close)
removes the temporary and leaves the destination as it was. A crash (SIGKILL, power
loss) cannot run any cleanup: the destination is still untouched, and the stale
temporary stays behind; :func:`remove_stale_temporaries` deletes such leftovers.

Reading: opening reads the header and authenticates it (a wrong key fails in the
``async with``), then maps the file with a :class:`SegmentLayout` (the AWS layout also reads the
file's end to find the final frame, and a signed message whole, to verify its signature). ``read``/``seek``
are random access: a read fetches only the ciphertext of the segments covering the
requested range, opens them (split across workers when large), and keeps the plaintext
of the span last opened, so sequential small reads open each segment once. Reads that go
forward read ahead: the spans after the one a read waits for are already being read and
opened on other workers (a bounded window, see :class:`._file_read._RandomReader`). A
segment that fails to authenticate fails the read that touches it; the rest of the file
stays readable. A wrapped object that cannot seek (a socket, a pipe, any async
byte stream) is read sequentially through the engine's pipeline instead.

Formats come from the codecs' one registry (:data:`streamcrypt.codecs.FORMATS`): each
descriptor says how to build the encryptor, the decryptor and the layout, and how long
the header is; :data:`FORMATS` holds those ``streamcrypt.open`` speaks.

Rooms: this module opens files and holds the public file object; :mod:`._file_write`
the writer and its sinks, :mod:`._file_read` the sources and readers. Blocking calls run
through the engine's :class:`~streamcrypt.engine.WorkerCalls`.
"""

from __future__ import annotations

import io
import os
import re
import time
from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Generator,
    Iterable,
    Mapping,
)
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream

from ..abc import Buffer, Chain, Transform
from ..codecs import (
    DETECT_BYTES,
    FormatOptions,
    IdentityLike,
    KeyLike,
    ReadAt,
    RecipientLike,
    SegmentedFormat,
    SegmentedTransform,
    SegmentLayout,
    check_detectable,
    detect_format,
    one_or_many,
)
from ..codecs import FORMATS as CODEC_FORMATS
from ..engine import DEFAULT_POLICY, OffloadPolicy, WorkerCalls, pipeline
from ..errors import (
    BrokenTransformError,
    FormatError,
    InvalidParameterError,
    TruncatedStreamError,
    UnsupportedFormatError,
)
from ..keys import Argon2Params, PasswordParams
from ._atomic import create_temporary
from ._file_read import (
    _INLINE_PIECE,
    _FdSource,
    _open_for_reading,
    _RandomAccess,
    _RandomReader,
    _SeekableSource,
    _SequentialReader,
    _StreamChunks,
)
from ._file_write import _AtomicFileSink, _StreamSink, _Writer

_MODES = ("rb", "wb")
_TEMP_RE = re.compile(r"^\..+\.streamcrypt-[0-9a-f]{16}\.tmp$")


# ---------------------------------------------------------------------------------------
# Formats
# ---------------------------------------------------------------------------------------


#: The formats :func:`open_file` speaks, by ``format=`` name: those of
#: :data:`streamcrypt.codecs.FORMATS` with ``opens_files``. Binary age only: armored
#: age cannot be read by random access.
FORMATS: dict[str, SegmentedFormat] = {
    name: f for name, f in CODEC_FORMATS.items() if f.opens_files
}


def _segmented_first(transform: Transform) -> tuple[SegmentedTransform, tuple[Transform, ...]]:
    """A format's transform as its segmented first stage and the plain stages after it
    (the AWS format's signer, which hashes the sealed bytes and appends the footer)."""
    stages = transform.stages if isinstance(transform, Chain) else (transform,)
    first = stages[0]
    assert isinstance(first, SegmentedTransform), "files need a segmented first stage"
    return first, stages[1:]


def _encryptor(
    fmt: SegmentedFormat, opts: FormatOptions
) -> tuple[SegmentedTransform, tuple[Transform, ...]]:
    return _segmented_first(fmt.encryptor(opts))


def _decryptor(fmt: SegmentedFormat, opts: FormatOptions) -> tuple[Transform, SegmentedTransform]:
    """The whole decryptor and its segmented first stage (which reads the header)."""
    dec = fmt.decryptor(opts)
    return dec, _segmented_first(dec)[0]


def _detect(head: bytes, opts: FormatOptions) -> SegmentedFormat:
    """The format of a file starting with ``head`` (``codecs.detect_format``), refused
    with :class:`UnsupportedFormatError` when :func:`open_file` cannot read it (the
    envelope, armored age: no random access)."""
    return _readable(detect_format(head, opts), head)


def _readable(fmt: SegmentedFormat, head: bytes) -> SegmentedFormat:
    """``fmt`` if :func:`open_file` can read a file of it starting with ``head``, else
    :class:`UnsupportedFormatError` naming the way to read it."""
    armored = fmt.armor is not None and head.lstrip().startswith(fmt.armor.begin)
    if fmt.name not in FORMATS or armored:
        readable = ", ".join(FORMATS)
        raise UnsupportedFormatError(
            f"this is {'an' if fmt.name[0] in 'aeiou' else 'a'} {'armored ' * armored}"
            f"{fmt.name} file: streamcrypt.open reads {readable}"
            f"{' (binary)' * armored}; read it with streamcrypt.decrypt"
        )
    return fmt


def _header_size(fmt: SegmentedFormat, head: bytes) -> int | None:
    assert fmt.header_size is not None, f"{fmt.name} files need header_size"
    return fmt.header_size(head)


def _layout(
    fmt: SegmentedFormat, opts: FormatOptions, head: bytes, size: int, read_at: ReadAt
) -> SegmentLayout:
    """The layout on a worker thread. A read starting in the header gets the header
    bytes already read (and no more: most layouts read nothing else); one past it goes to
    ``read_at`` (the AWS format's layout reads the message's end, and for signed suites
    all of it)."""
    assert fmt.layout is not None, f"{fmt.name} files need a layout"

    def cached(offset: int, length: int) -> bytes:
        if offset < len(head):
            return head[offset : offset + length]
        return read_at(offset, length)

    return fmt.layout(opts, cached, size)


# ---------------------------------------------------------------------------------------
# Stale temporaries
# ---------------------------------------------------------------------------------------


def remove_stale_temporaries(
    directory: str | os.PathLike[str], *, older_than: float = 3600.0
) -> list[Path]:
    """Delete temporaries left in ``directory`` by writers that crashed; return their paths.

    Only names of the form ``.<name>.streamcrypt-<16 hex>.tmp`` last modified more than
    ``older_than`` seconds ago are removed (a writer still running keeps touching its
    temporary, so keep the default unless no writer can be running). Synchronous: call it
    at start-up, or through ``anyio.to_thread.run_sync`` from async code.
    """
    removed: list[Path] = []
    now = time.time()
    with os.scandir(directory) as entries:
        for entry in entries:
            if not _TEMP_RE.match(entry.name) or not entry.is_file(follow_symlinks=False):
                continue
            if now - entry.stat(follow_symlinks=False).st_mtime < older_than:
                continue
            try:
                os.unlink(entry.path)
            except FileNotFoundError:
                continue
            removed.append(Path(entry.path))
    return removed


# ---------------------------------------------------------------------------------------
# The public file object
# ---------------------------------------------------------------------------------------


class EncryptedFile:
    """An open encrypted file (mode ``"rb"`` or ``"wb"``). Use :func:`open_file` or :meth:`wrap`.

    Writing: :meth:`write`, :meth:`tell`, :meth:`aclose` (commits). Reading: :meth:`read`,
    :meth:`readinto`, ``async for chunk in f``, :meth:`seek`, :meth:`tell`, :attr:`size`.
    Leaving ``async with`` by an exception discards a write (the destination is untouched).
    Reads raise :class:`AuthenticationError` for a segment that does not verify,
    :class:`TruncatedStreamError` / :class:`FormatError` for a cut file; methods of the
    other mode raise :class:`InvalidParameterError`; after close, anyio's
    ``ClosedResourceError``; two tasks at once, anyio's ``BusyResourceError``.
    """

    mode: Literal["rb", "wb"]
    _impl: _Writer | _RandomReader | _SequentialReader
    _closed: bool
    _failure: BaseException | None  # what abandoned a write
    _guard: anyio.ResourceGuard

    def __init__(self) -> None:
        raise TypeError("EncryptedFile has no public constructor: use streamcrypt.open or wrap")

    @classmethod
    def _start(
        cls, mode: Literal["rb", "wb"], impl: _Writer | _RandomReader | _SequentialReader
    ) -> EncryptedFile:
        file = cls.__new__(cls)
        file.mode, file._impl, file._closed, file._failure = mode, impl, False, None
        file._guard = anyio.ResourceGuard("using")
        return file

    # -- construction ---------------------------------------------------------------------

    @classmethod
    def wrap(
        cls,
        stream: object,
        mode: Literal["rb", "wb"],
        *,
        key: KeyLike | None = None,
        suite: str | None = None,
        segment_size: int | None = None,
        aad: Buffer = b"",
        policy: OffloadPolicy | None = DEFAULT_POLICY,
        format: str | None = None,
        recipients: Iterable[RecipientLike] | RecipientLike = (),
        identities: Iterable[IdentityLike] | IdentityLike = (),
        passphrase: str | Buffer | None = None,
        work_factor: int | PasswordParams | None = None,
        max_work_factor: int | Argon2Params | None = None,
        armor: bool = False,
        password: str | None = None,
        password2: str = "",
        expected_size: int | None = None,
        encryption_context: Mapping[str, str] | None = None,
        allow_legacy: bool = False,
        allow_unverified: bool = False,
        max_encrypted_data_keys: int | None = None,
        close_wrapped: bool = True,
    ) -> FileOpener:
        """Encrypt into / decrypt from an already open async object.

        ``"rb"``: an object with async ``seek``/``tell``/``read`` that can seek (an
        ``anyio.open_file`` result) gets random access, its container starting at its
        current position; anything else (an anyio ``ByteReceiveStream``, an object with an
        async ``read``, an async iterable of bytes) is read sequentially (``size`` is then
        ``None`` and :meth:`seek` raises). ``"wb"``: an object with async ``write`` or an
        anyio ``ByteSendStream``; no atomicity (the caller owns the object), and a write
        abandoned by an exception leaves an unterminated stream that readers reject.
        The wrapped object is closed with the file unless ``close_wrapped=False``.
        ``format=None`` writes the native format and reads the one the first bytes name,
        as :func:`open_file`.
        """
        mode, fmt, opts = _prepared(locals())
        threads = WorkerCalls(policy)

        async def opening() -> EncryptedFile:
            if mode == "wb":
                if not isinstance(stream, ByteSendStream) and not hasattr(stream, "write"):
                    raise InvalidParameterError(
                        "wrap(..., 'wb') needs an object with async write() or an anyio "
                        "ByteSendStream"
                    )
                assert fmt is not None  # writes name their format
                enc, tail = await threads.run(_encryptor, fmt, opts)
                sink = _StreamSink(stream, close_wrapped)
                return EncryptedFile._start("wb", _Writer(enc, tail, sink, policy, threads))
            if hasattr(stream, "seek") and hasattr(stream, "tell") and hasattr(stream, "read"):
                try:
                    base = await stream.tell()
                    end = await stream.seek(0, io.SEEK_END)
                    if end is None:
                        end = await stream.tell()
                except (OSError, ValueError):  # io.UnsupportedOperation is both
                    pass
                else:
                    source = _SeekableSource(stream, base, end - base, close_wrapped)
                    return await _open_reader_on(source, fmt, opts, policy, threads)
            if not (
                isinstance(stream, ByteReceiveStream)
                or hasattr(stream, "read")
                or isinstance(stream, AsyncIterable)
            ):
                raise InvalidParameterError(
                    "wrap(..., 'rb') needs an async file, an anyio ByteReceiveStream, "
                    "an object with async read() or an async iterable of bytes"
                )
            return await _open_sequential(stream, fmt, opts, policy, threads, close_wrapped)

        return FileOpener(opening)

    # -- helpers --------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._failure is not None:
            raise BrokenTransformError(
                f"the encrypted file is unusable after an earlier failure: {self._failure!r}"
            ) from self._failure
        if self._closed:
            raise anyio.ClosedResourceError("the encrypted file is closed")

    def _writer(self) -> _Writer:
        self._check_open()
        if not isinstance(self._impl, _Writer):
            raise InvalidParameterError("the file was opened for reading ('rb'); write needs 'wb'")
        return self._impl

    def _reader(self) -> _RandomReader | _SequentialReader:
        self._check_open()
        if isinstance(self._impl, _Writer):
            raise InvalidParameterError("the file was opened for writing ('wb'); read needs 'rb'")
        return self._impl

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def seekable(self) -> bool:
        """True for random access (a path, or a wrapped object that can seek)."""
        return isinstance(self._impl, _RandomReader)

    @property
    def size(self) -> int | None:
        """Plaintext size of a file being read by random access; ``None`` otherwise."""
        return self._impl.size if isinstance(self._impl, _RandomReader) else None

    # -- writing --------------------------------------------------------------------------

    async def write(self, data: Buffer) -> int:
        """Encrypt and write ``data``; returns ``len(data)``. A failure breaks the file."""
        writer = self._writer()
        view = memoryview(data).cast("B")  # a TypeError here does not break the file
        with self._guard:
            try:
                return await writer.write(view)
            except BaseException as exc:  # a cancelled write too: the file is broken
                self._failure = exc
                await self._fail()
                raise

    # -- reading --------------------------------------------------------------------------

    async def read(self, n: int = -1) -> bytes:
        """Up to ``n`` bytes of verified plaintext (all the rest when ``n < 0``); ``b""`` at EOF."""
        reader = self._reader()
        with self._guard:
            return await reader.read(n)

    async def readinto(self, buffer: bytearray | memoryview) -> int:
        """Read up to ``len(buffer)`` bytes into ``buffer``; returns the count."""
        view = memoryview(buffer).cast("B")
        data = await self.read(len(view))
        view[: len(data)] = data
        return len(data)

    async def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        """Move the read position (random access only); returns the new position."""
        reader = self._reader()
        if not isinstance(reader, _RandomReader):
            raise InvalidParameterError("the wrapped stream cannot seek; it reads front to back")
        with self._guard:
            return await reader.seek(offset, whence)

    async def tell(self) -> int:
        """The plaintext position (bytes written so far when writing)."""
        self._check_open()
        return self._impl.position

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[bytes]:
        reader = self._reader()
        while True:
            chunk = await self.read(reader.piece)
            if not chunk:
                return
            yield chunk

    # -- closing --------------------------------------------------------------------------

    async def _fail(self) -> None:
        """Abandon a write: remove the temporary (shielded from cancellation)."""
        if self._closed:
            return
        self._closed = True
        with anyio.CancelScope(shield=True):
            impl = self._impl
            if isinstance(impl, _Writer):
                await impl.abort()
            else:
                await impl.aclose()

    async def aclose(self) -> None:
        """Finish: a writer seals the final segment and commits (atomic rename for a path);
        a reader releases the file. Closing twice does nothing; closing a file whose
        write failed or was cancelled raises :class:`BrokenTransformError` (nothing was
        committed)."""
        if self._failure is not None:
            self._check_open()  # raises
        if self._closed:
            return
        impl = self._impl
        if not isinstance(impl, _Writer):
            self._closed = True
            with anyio.CancelScope(shield=True):
                await impl.aclose()
            return
        with self._guard:
            try:
                with anyio.CancelScope(shield=True):
                    await impl.close()
            except BaseException:
                await self._fail()
                raise
            self._closed = True

    async def __aenter__(self) -> EncryptedFile:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is not None:
            await self._fail()
        else:
            await self.aclose()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<EncryptedFile mode={self.mode!r} {state}>"


class FileOpener:
    """What :func:`open_file` returns: ``async with`` it, or ``await`` it for the file."""

    def __init__(self, opening: Callable[[], Awaitable[EncryptedFile]]) -> None:
        self._opening = opening
        self._file: EncryptedFile | None = None

    def __await__(self) -> Generator[Any, None, EncryptedFile]:
        return self._opening().__await__()

    async def __aenter__(self) -> EncryptedFile:
        self._file = await self._opening()
        return self._file

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._file is not None
        await self._file.__aexit__(exc_type, exc, tb)


def _prepared(
    given: Mapping[str, Any],
) -> tuple[Literal["rb", "wb"], SegmentedFormat | None, FormatOptions]:
    """What ``open_file`` and ``EncryptedFile.wrap`` do at the call, from their keywords
    (``locals()``): the checked mode, the format, and its options (each keyword named
    as a :class:`FormatOptions` field) checked against the format for that mode.
    ``format=None``: native when writing; when reading ``None``, the format the first
    bytes tell (its options checked then). Armor is refused (:class:`InvalidParameterError`): an armored file has no
    random access."""
    mode, format = given["mode"], given["format"]
    if mode not in _MODES:
        raise InvalidParameterError(
            f"mode {mode!r} is not supported: encrypted files are binary and read or "
            "written whole; text modes (and append/update modes) are out of scope. Use "
            "'rb' or 'wb'"
        )
    fmt = FORMATS.get(format or "native")
    if fmt is None:
        raise UnsupportedFormatError(
            f"unknown file format {format!r}; streamcrypt.open speaks {', '.join(sorted(FORMATS))}"
        )
    fields = {name: given[name] for name in FormatOptions._fields if name in given}
    fields["recipients"] = one_or_many(fields["recipients"])
    fields["identities"] = one_or_many(fields["identities"])
    if fields["encryption_context"] is not None:
        fields["encryption_context"] = dict(fields["encryption_context"])
    opts = FormatOptions(**fields)
    if format is None and mode == "rb":
        check_detectable(opts)
    else:
        fmt.check_options(opts, mode)
    if opts.armor:
        raise InvalidParameterError(
            "files are binary: armored text has no random access (armor a stream with "
            "streamcrypt.encrypt(..., armor=True))"
        )
    return mode, None if format is None and mode == "rb" else fmt, opts


#: Bytes of a file's start read at open: its format's marker and most headers.
_FIRST_READ = 4096


async def _load_layout(
    source: _RandomAccess,
    fmt: SegmentedFormat,
    opts: FormatOptions,
    threads: WorkerCalls,
    head: bytes,
) -> SegmentLayout:
    """The layout of ``source``, whose first ``min(size, _FIRST_READ)`` bytes are ``head``
    (read more while the header is longer)."""
    size = source.size
    want = min(size, _FIRST_READ)
    while True:
        need = _header_size(fmt, head)
        if need is not None and need <= len(head):
            break
        if len(head) >= size:
            raise TruncatedStreamError("the file ends inside its header: it is truncated")
        if want >= fmt.max_header_size:
            raise FormatError("the file's header is longer than any valid header")
        want = min(size, max(need or 0, 2 * want))
        head = await source.read_at(0, want)
    reader = source.blocking_reader()
    layout = await threads.run(_layout, fmt, opts, head[:need], size, reader)
    _ = layout.plaintext_size  # raises FormatError / TruncatedStreamError for a cut file
    # The length arithmetic alone cannot tell a file cut at a segment boundary (plus a
    # forged 16-byte tail) from a whole one: open the final segment once, up front.
    job, offset, length = layout.final_segment()
    job.data = await source.read_at(offset, length)
    if len(job.data) != length:
        raise TruncatedStreamError("the file is shorter than its header and length say")
    await threads.run(job.run)
    return layout


async def _open_reader_on(
    source: _RandomAccess,
    fmt: SegmentedFormat | None,
    opts: FormatOptions,
    policy: OffloadPolicy | None,
    threads: WorkerCalls,
) -> EncryptedFile:
    """The random-access reader over ``source``, its format told by its first bytes when
    ``fmt`` is ``None``; ``source`` is closed if that fails."""
    try:
        head = await source.read_at(0, min(source.size, _FIRST_READ))  # read once
        start = head[:DETECT_BYTES]
        fmt = _detect(start, opts) if fmt is None else _readable(fmt, start)
        layout = await _load_layout(source, fmt, opts, threads, head)
    except BaseException:
        with anyio.CancelScope(shield=True):
            await source.aclose()
        raise
    return EncryptedFile._start("rb", _RandomReader(source, layout, policy, threads))


def open_file(
    path: str | os.PathLike[str],
    mode: Literal["rb", "wb"],
    *,
    key: KeyLike | None = None,
    suite: str | None = None,
    segment_size: int | None = None,
    aad: Buffer = b"",
    policy: OffloadPolicy | None = DEFAULT_POLICY,
    format: str | None = None,
    recipients: Iterable[RecipientLike] | RecipientLike = (),
    identities: Iterable[IdentityLike] | IdentityLike = (),
    passphrase: str | Buffer | None = None,
    work_factor: int | PasswordParams | None = None,
    max_work_factor: int | Argon2Params | None = None,
    armor: bool = False,
    password: str | None = None,
    password2: str = "",
    expected_size: int | None = None,
    encryption_context: Mapping[str, str] | None = None,
    allow_legacy: bool = False,
    allow_unverified: bool = False,
    max_encrypted_data_keys: int | None = None,
) -> FileOpener:
    """Open an encrypted file: ``async with open_file(path, "wb", key=k) as f: ...``.

    ``mode`` is ``"rb"`` or ``"wb"`` (text modes are out of scope). ``format=None``
    (the default) writes the native format and reads the format the file's first bytes
    name (native, age, rclone crypt or AWS). ``format="native"``
    (the streamcrypt container: ``key=``, and for writing ``suite=`` (default
    ``"aes-256-gcm"``), ``segment_size=`` (default 65536), ``aad=``), ``"age"``
    (binary age v1: ``recipients=`` or ``passphrase=`` to write, ``identities=`` or
    ``passphrase=`` to read), ``"rclone"`` (rclone crypt file contents: ``password=``
    and the optional ``password2=``, rclone's salt, both in clear; reveal obscured
    rclone.conf values with :func:`streamcrypt.codecs.rclone.reveal`) or ``"aws"`` (the
    AWS Encryption SDK message format, framed: ``key=`` a keyring or a list of them,
    ``encryption_context=``, and for writing ``suite=`` (``"0x0578"``, signed, the
    default; or ``"0x0478"``) and ``segment_size=`` (the frame length, default 4096)).
    Every keyword is the top-level calls' (:func:`streamcrypt.encrypt` /
    :func:`streamcrypt.decrypt`), taken where the format's ``writes`` / ``reads`` name it:
    also ``work_factor=`` / ``max_work_factor=`` (age), ``expected_size=`` (rclone),
    ``allow_legacy=``, ``allow_unverified=`` and ``max_encrypted_data_keys=`` (AWS);
    ``armor=True`` is refused (armored text has no random access).
    rclone files carry no end marker: a file cut at a 64 KiB block boundary reads as a
    shorter file (see :mod:`streamcrypt.codecs.rclone`). A signed AWS file is read whole
    once when opened, to verify its signature before any byte is released (see
    docs/FORMATS.md). Writes are atomic (see the module docstring; a symlink at the
    destination is replaced, not followed). ``policy`` governs the crypto offload;
    ``None`` keeps the crypto on the event loop (file I/O always runs on worker threads).

    Raises at the call: :class:`InvalidParameterError` (mode, arguments),
    :class:`UnsupportedFormatError` (format). When entered: ``OSError`` from the file
    system, :class:`AuthenticationError` (wrong key, tampered header),
    :class:`UnknownKeyError`, :class:`FormatError`, :class:`TruncatedStreamError`,
    :class:`InvalidSignatureError` (a signed AWS file altered).
    """
    checked, fmt, opts = _prepared(locals())
    dest = os.fspath(path)
    threads = WorkerCalls(policy)

    async def opening() -> EncryptedFile:
        if fmt is None or checked == "rb":
            with anyio.CancelScope(shield=True):  # never leak the descriptor
                fd, size = await threads.run(_open_for_reading, dest)
            return await _open_reader_on(_FdSource(fd, size, threads), fmt, opts, policy, threads)
        enc, tail = await threads.run(_encryptor, fmt, opts)
        with anyio.CancelScope(shield=True):  # never leave a temporary behind
            fd, tmp = await threads.run(create_temporary, dest)
        sink = _AtomicFileSink(dest, fd, tmp, threads)
        return EncryptedFile._start("wb", _Writer(enc, tail, sink, policy, threads))

    return FileOpener(opening)


async def _open_sequential(
    stream: Any,
    fmt: SegmentedFormat | None,
    opts: FormatOptions,
    policy: OffloadPolicy | None,
    threads: WorkerCalls,
    close: bool,
) -> EncryptedFile:
    async def close_stream() -> None:
        if close:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()

    chunks = _StreamChunks(stream, b"")
    try:
        head = bytearray()
        while fmt is None:  # the first bytes tell the format
            chunk = await chunks.receive() if len(head) < DETECT_BYTES else b""
            head += chunk
            if not chunk:
                fmt = _detect(bytes(head[:DETECT_BYTES]), opts)
        while True:
            need = _header_size(fmt, bytes(head))
            if need is not None and need <= len(head):
                break
            if need is None and len(head) > fmt.max_header_size:
                raise FormatError("the stream's header is longer than any valid header")
            chunk = await chunks.receive()
            if not chunk:
                raise TruncatedStreamError("the stream ends inside its header: it is truncated")
            head += chunk
        dec, first = await threads.run(_decryptor, fmt, opts)
        # Authenticate the header now (it may run scrypt): exactly the header bytes, so
        # that no segment job is created outside the pipeline.
        await threads.run(first.feed, bytes(head[:need]))
    except BaseException:
        with anyio.CancelScope(shield=True):
            await close_stream()
        raise
    chunks.push_back(bytes(head[need:]))
    out = pipeline(dec, policy=policy).stream(chunks)
    piece = policy.batch_size if policy is not None else _INLINE_PIECE
    return EncryptedFile._start("rb", _SequentialReader(out, close_stream, piece))
