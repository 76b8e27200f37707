"""Restoring a snapshot, verifying every chunk before the result appears.

Theory of operation
-------------------
The snapshot's signature is checked and its manifest decrypted; every chunk it names
must be in the index. Restore then works pack by pack, as restic does: each pack that
holds wanted chunks is read once (whole, or blob by blob when little of it is wanted),
each wanted blob authenticated, decompressed and hashed back to its id, and written at
its offsets in every file that uses it (``pwrite``; all-zero chunks are left as holes,
so sparse files stay sparse). Packs are handled on the engine's worker threads, several
at once. Files go into a hidden staging directory beside the destination; modes, times
and symbolic links are applied once every chunk verified (links last, so no write can
follow one), and the staging directory is renamed to the destination. On any failure it
is removed: the destination never holds unverified data. Errors name the file.
"""

from __future__ import annotations

import os
import secrets
import shutil
import time
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future, wait
from dataclasses import dataclass
from typing import Any

from ..codecs.backup import PACK_HEADER_SIZE, BlobEntry, Manifest, Node, PackOpener
from ..engine import DEFAULT_POLICY, OffloadPolicy, wait_future
from ..errors import FormatError, StreamCryptError
from ..keys import SecretKey
from ._backup import Progress
from ._store import Index, Store, require_chunks, run_blocking

__all__ = ["RestoreReport", "restore"]

_OPEN_FLAGS = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)

#: (file path relative to the snapshot, offset in the file)
_Target = tuple[str, int]


@dataclass(frozen=True, slots=True)
class RestoreReport:
    """What a restore wrote (after every check passed)."""

    snapshot: str
    files: int
    dirs: int
    links: int
    bytes_written: int
    chunks_verified: int
    seconds: float

    def summary(self) -> str:
        return (
            f"snapshot {self.snapshot}: restored {self.files} files, {self.dirs} dirs, "
            f"{self.links} links, {self.bytes_written:,} bytes; {self.chunks_verified} "
            f"chunks verified in {self.seconds:.2f} s"
        )


def _local(root: str, rel: str) -> str:
    return os.path.join(root, *rel.split("/"))


def _describe(targets: Sequence[_Target]) -> str:
    names = sorted({path for path, _ in targets})
    more = f" (and {len(names) - 1} other files)" if len(names) > 1 else ""
    return f"{names[0]!r}{more}"


class _PackJob:
    """Restore the wanted blobs of one pack (runs on a worker thread)."""

    def __init__(
        self,
        store: Store,
        pack_id: bytes,
        wanted: dict[bytes, tuple[BlobEntry, list[_Target]]],
        staging: str,
    ) -> None:
        self.store = store
        self.pack_id = pack_id
        self.wanted = sorted(wanted.values(), key=lambda item: item[0].offset)
        self.staging = staging

    def _sealed(self) -> tuple[PackOpener, list[memoryview]]:
        store, entries = self.store, [e for e, _ in self.wanted]
        end = entries[-1].offset + entries[-1].length
        needed = sum(e.length for e in entries)
        if 2 * needed >= end:  # most of the pack: one read
            data = memoryview(store.read_sync(store.pack_path(self.pack_id), 0, end))
            opener = PackOpener(store.keys, self.pack_id, data[:PACK_HEADER_SIZE])
            return opener, [data[e.offset : e.offset + e.length] for e in entries]
        header = store.read_sync(store.pack_path(self.pack_id), 0, PACK_HEADER_SIZE)
        opener = PackOpener(store.keys, self.pack_id, header)
        return opener, [memoryview(store.read_blob_sync(self.pack_id, e)) for e in entries]

    def run(self) -> tuple[int, int, set[str]]:
        """Returns bytes written, chunks verified, and files with holes."""
        written = 0
        holes: set[str] = set()
        fds: dict[str, int] = {}
        try:
            try:
                opener, sealed = self._sealed()
            except (StreamCryptError, OSError) as exc:
                targets = [t for _, ts in self.wanted for t in ts]
                raise type(exc)(f"{_describe(targets)}: {exc}") from None
            for (entry, targets), blob in zip(self.wanted, sealed, strict=True):
                try:
                    plain = opener.blob(entry, blob)
                except StreamCryptError as exc:
                    raise type(exc)(f"{_describe(targets)}: {exc}") from None
                zero = plain.count(0) == len(plain)
                for path, offset in targets:
                    fd = fds.get(path)
                    if fd is None:
                        fd = fds[path] = os.open(_local(self.staging, path), _OPEN_FLAGS, 0o600)
                    if zero:
                        holes.add(path)
                        continue
                    view = memoryview(plain)
                    while view:
                        n = os.pwrite(fd, view, offset)
                        view, offset = view[n:], offset + n
                    written += len(plain)
        finally:
            for fd in fds.values():
                os.close(fd)
        return written, len(self.wanted), holes


def _plan(
    manifest: Manifest, index: Index
) -> dict[bytes, dict[bytes, tuple[BlobEntry, list[_Target]]]]:
    require_chunks(index, manifest)
    packs: dict[bytes, dict[bytes, tuple[BlobEntry, list[_Target]]]] = {}
    for node in manifest.files():
        offset = 0
        for cid in node.chunks:
            loc = index.chunks[cid]
            wanted = packs.setdefault(loc.pack_id, {})
            item = wanted.get(cid)
            if item is None:
                item = wanted[cid] = (loc.entry, [])
            item[1].append((node.path, offset))
            offset += loc.entry.raw_length
        if offset != node.size:
            raise FormatError(
                f"{node.path!r}: its chunks hold {offset} bytes but the manifest says "
                f"{node.size}: the index or the manifest is corrupt"
            )
    return packs


def _new_destination(dest: str | os.PathLike[str]) -> str:
    path = os.path.abspath(os.fspath(dest))
    if os.path.lexists(path):
        raise FileExistsError(f"{os.fspath(dest)!r} exists; restore into a new directory")
    return path


def _prepare(staging: str, manifest: Manifest) -> None:
    os.mkdir(staging, 0o700)
    for node in manifest.nodes:
        if node.kind == "dir":
            os.makedirs(_local(staging, node.path), 0o700, exist_ok=True)
        elif node.kind == "file":
            os.makedirs(os.path.dirname(_local(staging, node.path)), 0o700, exist_ok=True)
            if not node.chunks:
                os.close(os.open(_local(staging, node.path), _OPEN_FLAGS, 0o600))


def _finish(staging: str, manifest: Manifest, holes: set[str]) -> None:
    """Sizes of sparse files, modes and times, then links, then directories deepest first."""
    dirs: list[Node] = []
    for node in manifest.nodes:
        path = _local(staging, node.path)
        if node.kind == "file":
            if node.path in holes:
                os.truncate(path, node.size)
            os.chmod(path, node.mode)
            os.utime(path, ns=(node.mtime_ns, node.mtime_ns))
        elif node.kind == "symlink":
            os.makedirs(os.path.dirname(path), 0o700, exist_ok=True)
            os.symlink(node.target, path)
            if os.utime in os.supports_follow_symlinks:
                os.utime(path, ns=(node.mtime_ns, node.mtime_ns), follow_symlinks=False)
        else:
            dirs.append(node)
    for node in sorted(dirs, key=lambda n: n.path.count("/"), reverse=True):
        path = _local(staging, node.path)
        os.chmod(path, node.mode)
        os.utime(path, ns=(node.mtime_ns, node.mtime_ns))


async def restore(
    store: str | os.PathLike[str],
    name: str,
    dest: str | os.PathLike[str],
    master: SecretKey,
    *,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
    progress: Progress | None = None,
    storage_options: dict[str, Any] | None = None,
) -> RestoreReport:
    """Restore snapshot ``name`` into the new directory ``dest``, verifying every chunk.

    ``dest`` appears only once everything verified; on failure nothing is left behind.
    Raises :class:`InvalidSignatureError` (snapshot altered or renamed, wrong key),
    :class:`AuthenticationError` (a damaged chunk or pack; the message names the file),
    :class:`FormatError` (a chunk missing from the store, a malformed manifest),
    :class:`UnknownKeyError`, :class:`StoreLockedError`, ``FileExistsError`` when
    ``dest`` exists, ``OSError``.
    """
    started = time.perf_counter()
    dest_path = await run_blocking(None, _new_destination, dest)
    opened = await Store.open(store, master, policy=policy, storage_options=storage_options)
    async with opened.lock(exclusive=False):
        manifest = await opened.load_snapshot(name)
        index = await opened.load_index()
        plan = _plan(manifest, index)
        parent, base = os.path.split(dest_path)
        staging = os.path.join(parent, f".{base}.restore-{secrets.token_hex(8)}")
        total = sum(n.size for n in manifest.files())
        try:
            await run_blocking(policy, _prepare, staging, manifest)
            written = verified = 0
            holes: set[str] = set()
            jobs = deque(_PackJob(opened, pid, wanted, staging) for pid, wanted in plan.items())
            limit = 1 if policy is None else max(2, policy.workers) + 1
            inflight: deque[Future[tuple[int, int, set[str]]]] = deque()
            while jobs or inflight:
                while jobs and len(inflight) < limit:
                    job = jobs.popleft()
                    if policy is None:
                        future: Future[tuple[int, int, set[str]]] = Future()
                        future.set_result(job.run())
                    else:
                        future = policy.submit(job.run)
                    inflight.append(future)
                try:
                    n, chunks, job_holes = await wait_future(inflight.popleft())
                except BaseException:
                    wait(list(inflight))  # the other packs finish before staging goes
                    raise
                written += n
                verified += chunks
                holes |= job_holes
                if progress is not None:
                    progress(min(written, total), total)
            await run_blocking(policy, _finish, staging, manifest, holes)
            os.rename(staging, dest_path)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    nodes = manifest.nodes
    return RestoreReport(
        snapshot=name,
        files=sum(n.kind == "file" for n in nodes),
        dirs=sum(n.kind == "dir" for n in nodes),
        links=sum(n.kind == "symlink" for n in nodes),
        bytes_written=total,
        chunks_verified=verified,
        seconds=time.perf_counter() - started,
    )
