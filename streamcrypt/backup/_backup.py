"""Backing a tree up into a store.

Theory of operation
-------------------
The source is scanned first (paths, ``lstat``). A file whose size, mtime, ctime and
inode equal its entry in the *parent* snapshot (the newest one of the same source), and
whose chunks are all indexed, keeps the parent's chunk list without being read: that is
the metadata cache. Every other file is read, cut by the content-defined chunker, each
chunk hashed to its id, and each chunk the store lacks compressed: on the engine's worker
threads (the native kernels release the GIL, so this uses every core), small files in
batches (a hop costs tens of microseconds), large files in steps of a few MiB, one step
of a file in flight at a time (the chunker's state carries over).

On the event loop, results are taken in submission order: new blobs are sealed into the
current pack (AES-GCM, microseconds per blob), and a full pack is written on a worker
while the next one fills. Every few packs an index file names the packs written so far,
so a killed backup leaves packs that the next run finds in the index (or recovers from
their tables: ``salvage``) instead of storing them again. The snapshot is written last,
after the index that covers its chunks: until then the store holds no reference to
anything missing.
"""

from __future__ import annotations

import errno
import os
import socket
import stat
import time
from collections import deque
from collections.abc import Callable
from contextlib import aclosing
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ..codecs.backup import (
    BackupKeys,
    BlobEntry,
    Manifest,
    Node,
    PackWriter,
    StoreConfig,
    compress_blob,
)
from ..engine import DEFAULT_POLICY, OffloadPolicy, Pending, ordered_calls, wait_future
from ..errors import InvalidParameterError
from ..keys import SecretKey
from ._store import Index, Store, check_snapshot_name
from ._tree import ScanEntry, scan_tree
from ._work import run_blocking, submit
from ._writeonly import load_cache, save_cache

#: Called as ``progress(bytes_done, bytes_total)`` as work completes.
Progress = Callable[[int, int], None]

#: Bytes read from a file per call; files up to this size are read whole.
_READ_BLOCK = 8 << 20
#: Small files handed to a worker per hop: up to this many bytes or files.
_BATCH_BYTES = 4 << 20
_BATCH_FILES = 128
#: An index file is written after this many packs (the most a killed backup may redo).
_CHECKPOINT_PACKS = 4


@dataclass(frozen=True, slots=True)
class BackupReport:
    """What a backup did."""

    snapshot: str
    files: int
    dirs: int
    links: int
    bytes_total: int
    files_read: int
    bytes_read: int
    chunks: int
    chunks_new: int
    bytes_new: int
    bytes_stored: int
    packs_written: int
    skipped: tuple[str, ...]
    parent: str | None
    seconds: float
    #: Objects of the store that did not open and were left out (index files, id lists,
    #: snapshots: :meth:`Index.problems`); the backup stored their chunks again.
    store_problems: tuple[str, ...] = ()

    def summary(self) -> str:
        return (
            f"snapshot {self.snapshot}: {self.files} files ({self.files_read} read, "
            f"{self.files - self.files_read} unchanged), {self.dirs} dirs, {self.links} links, "
            f"{self.bytes_total:,} bytes; {self.chunks} chunks, {self.chunks_new} new "
            f"({self.bytes_new:,} bytes, {self.bytes_stored:,} stored in "
            f"{self.packs_written} packs) in {self.seconds:.2f} s"
            + (f"; skipped {len(self.skipped)}" if self.skipped else "")
            + (
                f"; {len(self.store_problems)} store files did not open (left out)"
                if self.store_problems
                else ""
            )
        )


def default_snapshot_name() -> str:
    """The UTC time, to the microsecond: names sort by time."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H%M%S.%fZ")


# -- worker side ------------------------------------------------------------------------------


@dataclass(slots=True)
class _NewBlob:
    chunk_id: bytes
    flags: int
    payload: bytes
    raw_length: int


@dataclass(slots=True)
class _Done:
    """One file's chunk ids (complete or, for a step of a large file, so far)."""

    entry: ScanEntry
    chunks: list[bytes] = field(default_factory=list)
    size: int = 0
    error: str | None = None


@dataclass(slots=True)
class _Result:
    files: list[_Done]
    new: list[_NewBlob]
    bytes_read: int


class _Work:
    """What the workers share: keys, store parameters, and the test for known chunks."""

    def __init__(
        self, keys: BackupKeys, config: StoreConfig, known: Callable[[bytes], bool]
    ) -> None:
        self.keys = keys
        self.config = config
        self.known = known

    def pieces(
        self, views: list[memoryview], done: _Done, new: list[_NewBlob], seen: set[bytes]
    ) -> None:
        chunk_id_of, known, level = self.keys.chunk_id_of, self.known, self.config.zstd_level
        for piece in views:
            cid = chunk_id_of(piece)
            done.chunks.append(cid)
            if cid not in seen and not known(cid):
                seen.add(cid)
                flags, payload = compress_blob(piece, level)
                new.append(_NewBlob(cid, flags, payload, len(piece)))


#: How a scanned file is opened: never through a symbolic link, never waiting (a FIFO or
#: a device swapped in after the scan opens at once and is then refused by its fstat).
_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


class _Changed(OSError):
    """The entry is no longer the regular file the scan saw (the file is skipped)."""


def _open_scanned(entry: ScanEntry) -> int:
    """A descriptor of the very file the scan saw: opened without following a link or
    blocking, then checked with ``fstat`` (a regular file, same device and inode); raises
    :class:`_Changed` (or another ``OSError``) otherwise, so the file is skipped."""
    try:
        fd = os.open(entry.full, _OPEN_FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # O_NOFOLLOW met a symbolic link
            raise _Changed(exc.errno, "replaced by a symbolic link since the scan") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != (
            entry.st.st_dev,
            entry.st.st_ino,
        ):
            raise _Changed(errno.ESTALE, "replaced since the scan (not the file scanned)")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _read_all(entry: ScanEntry) -> bytes:
    """A small file whole, as scanned: at most its scanned size (bytes appended since are
    left for the next backup; a file that shrank gives what it holds)."""
    fd = _open_scanned(entry)
    try:
        parts, left = [], entry.st.st_size
        while left and (block := os.read(fd, left)):
            parts.append(block)
            left -= len(block)
        return b"".join(parts)  # one part: that very object, no copy
    finally:
        os.close(fd)


class _SmallFiles:
    """A batch of files read whole."""

    def __init__(self, work: _Work, entries: list[ScanEntry]) -> None:
        self.work = work
        self.entries = entries
        self.finished = True

    def run(self) -> _Result:
        work = self.work
        chunker = work.keys.chunker(work.config)
        new: list[_NewBlob] = []
        seen: set[bytes] = set()
        files: list[_Done] = []
        total = 0
        for entry in self.entries:
            done = _Done(entry)
            files.append(done)
            try:
                data = _read_all(entry)
            except OSError as exc:
                done.error = f"{entry.path} ({exc.strerror or exc})"
                continue
            done.size = len(data)
            total += len(data)
            view = memoryview(data)
            views, pos = [], 0
            for length in chunker.cut(view):
                views.append(view[pos : pos + length])
                pos += length
            work.pieces(views, done, new, seen)
        return _Result(files, new, total)


class _LargeFile:
    """A large file, read and chunked in steps; its chunker carries between steps."""

    _STEP = _READ_BLOCK  # bytes read per step

    def __init__(self, work: _Work, entry: ScanEntry) -> None:
        self.work = work
        self.done = _Done(entry)
        self.chunker = work.keys.chunker(work.config)
        self.fd: int | None = None
        self.left = entry.st.st_size  # read no more than the scan saw
        self.finished = False

    def run(self) -> _Result:
        new: list[_NewBlob] = []
        seen: set[bytes] = set()
        read = 0
        done = self.done
        try:
            if self.fd is None:
                self.fd = _open_scanned(done.entry)
            while read < self._STEP:
                block = os.read(self.fd, min(_READ_BLOCK, self.left)) if self.left else b""
                self.left -= len(block)
                if not block:
                    self.work.pieces(self.chunker.finalize(), done, new, seen)
                    self._close()
                    break
                read += len(block)
                self.work.pieces(self.chunker.update(block), done, new, seen)
        except OSError as exc:
            done.error = f"{done.entry.path} ({exc.strerror or exc})"
            self._close()
        done.size += read
        return _Result([done] if self.finished else [], new, read)

    def _close(self) -> None:
        self.finished = True
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


# -- the loop side ------------------------------------------------------------------------------


class _PackSink:
    """Fills packs with new blobs and writes them; indexes them in checkpoints."""

    def __init__(self, store: Store, index: Index) -> None:
        self.store = store
        self.index = index
        self.pending: set[bytes] = set()
        self.writer = PackWriter(store.keys)
        self.upload: Pending[None] | None = None
        self.uploading: tuple[bytes, list[BlobEntry], int] | None = None
        self.unindexed: dict[bytes, list[BlobEntry]] = {}
        self.chunks_new = self.bytes_new = self.bytes_stored = self.packs = 0

    def known(self, chunk_id: bytes) -> bool:
        return chunk_id in self.index or chunk_id in self.pending

    async def add(self, blob: _NewBlob) -> None:
        if self.known(blob.chunk_id):
            return
        entry = self.writer.add(blob.chunk_id, blob.flags, blob.payload, blob.raw_length)
        self.pending.add(blob.chunk_id)
        self.chunks_new += 1
        self.bytes_new += blob.raw_length
        self.bytes_stored += entry.length
        if self.writer.size >= self.store.config.pack_size:
            await self.flush()

    async def _finish_upload(self) -> None:
        if self.upload is None or self.uploading is None:
            return
        await wait_future(self.upload)
        pack_id, entries, size = self.uploading
        self.upload = self.uploading = None
        self.index.stored[pack_id] = size
        self.index.add_pack(pack_id, entries)
        self.unindexed[pack_id] = entries
        self.packs += 1
        if len(self.unindexed) >= _CHECKPOINT_PACKS:
            await self.checkpoint()
        await self.store.refresh_lock()

    async def flush(self) -> None:
        """Seal the current pack and start writing it (one write in flight)."""
        await self._finish_upload()
        writer, self.writer = self.writer, PackWriter(self.store.keys)
        if not len(writer):
            return
        data = writer.finish()
        self.uploading = (writer.pack_id, writer.entries, len(data))
        rel = self.store.pack_path(writer.pack_id)
        policy = self.store.policy
        self.upload = submit(policy, self.store.write_sync, rel, data)

    async def checkpoint(self) -> None:
        if self.unindexed:
            await self.store.write_index(self.unindexed)
            self.unindexed = {}

    async def close(self) -> None:
        await self.flush()
        await self._finish_upload()
        await self.checkpoint()


async def salvage(store: Store, index: Index) -> int:
    """Write an index file for the packs :meth:`Store.load_index` indexed from their own
    tables (a killed backup wrote them but never indexed them); returns how many.

    Call under the exclusive lock, with keys that read the store.
    """
    recovered, index.recovered = index.recovered, {}
    if recovered:
        await store.write_index(recovered)
    return len(recovered)


async def _find_parent(
    store: Store, source: str, parent: str | None, skipped: dict[str, str]
) -> Manifest | None:
    """The snapshot named ``parent``, or the newest of the last 16 of ``source``; one
    that does not open is passed over and named in ``skipped``
    (:func:`~._store.open_or_skip`)."""
    if parent is not None:
        return await store.load_snapshot(parent)
    for name in reversed((await store.snapshot_names())[-16:]):
        manifest = await store.try_snapshot(name, skipped)
        if manifest is not None and manifest.source == source:
            return manifest
    return None


def _source_dir(source: str | os.PathLike[str]) -> str:
    src = os.path.abspath(os.fspath(source))
    if not os.path.isdir(src):
        raise NotADirectoryError(f"{os.fspath(source)!r} is not a directory")
    return src


def _node_of(entry: ScanEntry, chunks: tuple[bytes, ...] = (), size: int = 0) -> Node:
    st = entry.st
    mode = st.st_mode & 0o7777
    if entry.kind == "file":
        return Node(
            "file",
            entry.path,
            mode,
            st.st_mtime_ns,
            size,
            chunks,
            ctime_ns=st.st_ctime_ns,
            inode=st.st_ino,
        )
    if entry.kind == "dir":
        return Node("dir", entry.path, mode, st.st_mtime_ns)
    return Node("symlink", entry.path, mode, st.st_mtime_ns, target=entry.target)


def _unchanged(entry: ScanEntry, old: Node | None, index: Index) -> bool:
    st = entry.st
    return (
        old is not None
        and old.kind == "file"
        and old.size == st.st_size
        and old.mtime_ns == st.st_mtime_ns
        and old.ctime_ns == st.st_ctime_ns
        and old.inode == st.st_ino
        and all(c in index for c in old.chunks)
    )


def _run_task(task: _SmallFiles | _LargeFile) -> _Result:
    return task.run()


def _plan(work: _Work, todo: list[ScanEntry]) -> deque[_SmallFiles | _LargeFile]:
    tasks: deque[_SmallFiles | _LargeFile] = deque()
    batch: list[ScanEntry] = []
    size = 0
    for entry in todo:
        if entry.st.st_size > _READ_BLOCK:
            tasks.append(_LargeFile(work, entry))
            continue
        batch.append(entry)
        size += entry.st.st_size
        if size >= _BATCH_BYTES or len(batch) >= _BATCH_FILES:
            tasks.append(_SmallFiles(work, batch))
            batch, size = [], 0
    if batch:
        tasks.append(_SmallFiles(work, batch))
    return tasks


async def backup(
    source: str | os.PathLike[str],
    store: str | os.PathLike[str],
    key: SecretKey,
    *,
    name: str | None = None,
    parent: str | None = None,
    use_cache: bool = True,
    cache_dir: str | os.PathLike[str] | None = None,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
    progress: Progress | None = None,
    storage_options: dict[str, Any] | None = None,
) -> BackupReport:
    """Back up the tree ``source`` into ``store`` (a path or fsspec URL) as a new snapshot.

    ``key`` is the store's master key or a write-only store's writer key; the store
    must exist (:func:`~._store.create_store`, :func:`~._writeonly.create_write_only`:
    a backup never makes one, so a mistyped path or an unmounted disk is refused). ``parent`` names the snapshot whose metadata
    serves as the cache (default: the newest of the same source); a write-only store's
    writer reads no snapshot and keeps its cache in ``cache_dir`` (default
    ``$XDG_CACHE_HOME/streamcrypt/backup``); ``use_cache=False`` reads every file.
    ``policy`` decides where the work runs (``None``: all inline). An index file, id
    list or snapshot of the store that does not open is left out (its chunks are stored
    again) and named in ``BackupReport.store_problems``. Raises
    :class:`StoreNotFoundError` (no store there), :class:`UnknownKeyError` (the store
    belongs to another key), :class:`StoreLockedError` (also when this backup's lock
    was removed or went stale while it ran: nothing more is written),
    :class:`InvalidParameterError` (bad or existing snapshot name), typed errors of a
    damaged store, ``OSError``.
    """
    started = time.perf_counter()
    src = await run_blocking(None, _source_dir, source)
    name = check_snapshot_name(name or default_snapshot_name())
    opened = await Store.open(store, key, policy=policy, storage_options=storage_options)
    write_only = opened.config.write_only
    if write_only and parent is not None:
        raise InvalidParameterError(
            "a write-only store's writer reads no snapshot, so parent= does not apply: "
            "its metadata cache is in cache_dir"
        )
    async with opened.lock(exclusive=True):
        if name in await opened.snapshot_names():
            raise InvalidParameterError(f"snapshot {name!r} already exists in the store")
        index = await opened.load_index()
        if opened.keys.reader:
            await salvage(opened, index)
        await opened.begin_session()
        if not use_cache:
            base = None
        elif write_only:
            base = await run_blocking(policy, load_cache, opened, cache_dir, src)
        else:
            base = await _find_parent(opened, src, parent, index.skipped)
        exclude = opened.root if opened.is_local else None
        scan = await run_blocking(policy, scan_tree, src, exclude)
        total = scan.total_bytes

        old = {n.path: n for n in base.nodes} if base is not None else {}
        sink = _PackSink(opened, index)
        work = _Work(opened.keys, opened.config, sink.known)
        chunks_of: dict[str, tuple[tuple[bytes, ...], int]] = {}
        todo: list[ScanEntry] = []
        done_bytes = 0
        for entry in scan.entries:
            if entry.kind != "file":
                continue
            prior = old.get(entry.path)
            if use_cache and _unchanged(entry, prior, index):
                assert prior is not None
                chunks_of[entry.path] = (prior.chunks, prior.size)
                done_bytes += prior.size
            else:
                todo.append(entry)
        if progress is not None:
            progress(done_bytes, total)

        skipped = list(scan.skipped)
        bytes_read = files_read = 0
        tasks = _plan(work, todo)
        async with aclosing(ordered_calls(policy, tasks, _run_task)) as results:
            async for task, result in results:
                for blob in result.new:
                    await sink.add(blob)
                for done in result.files:
                    if done.error is not None:
                        skipped.append(done.error)
                        continue
                    chunks_of[done.entry.path] = (tuple(done.chunks), done.size)
                    files_read += 1
                bytes_read += result.bytes_read
                done_bytes += result.bytes_read
                if progress is not None:
                    progress(min(done_bytes, total), total)
                await opened.refresh_lock()
                if not task.finished:
                    tasks.appendleft(task)  # the next step of a large file
        await sink.close()

        nodes = []
        for entry in scan.entries:
            if entry.kind == "file":
                if entry.path not in chunks_of:
                    continue  # unreadable: reported in skipped
                chunks, size = chunks_of[entry.path]
                nodes.append(_node_of(entry, chunks, size))
            else:
                nodes.append(_node_of(entry))
        manifest = Manifest(
            name, datetime.now(UTC).isoformat(), src, socket.gethostname(), tuple(nodes)
        )
        packed = await opened.write_snapshot(manifest)
        if write_only:
            await run_blocking(policy, save_cache, opened, cache_dir, manifest, packed)

    files = [n for n in nodes if n.kind == "file"]
    return BackupReport(
        snapshot=name,
        files=len(files),
        dirs=sum(n.kind == "dir" for n in nodes),
        links=sum(n.kind == "symlink" for n in nodes),
        bytes_total=sum(n.size for n in files),
        files_read=files_read,
        bytes_read=bytes_read,
        chunks=sum(len(n.chunks) for n in files),
        chunks_new=sink.chunks_new,
        bytes_new=sink.bytes_new,
        bytes_stored=sink.bytes_stored,
        packs_written=sink.packs,
        skipped=tuple(skipped),
        parent=base.snapshot if base is not None else None,
        seconds=time.perf_counter() - started,
        store_problems=tuple(index.problems()),
    )
