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
from collections.abc import Iterable, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from ..codecs import IdentityLike
from ..codecs.backup import PACK_HEADER_SIZE, BlobEntry, Manifest, Node, PackOpener
from ..engine import DEFAULT_POLICY, OffloadPolicy, ordered_calls
from ..errors import FormatError, StreamCryptError
from ..keys import SecretKey
from ..paths import local_paths
from ._backup import Progress
from ._store import Index, Store, open_reader, require_chunks
from ._work import run_blocking

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
#: Every restored file is created once, by :func:`_prepare`; pack jobs open what it made.
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW
_OPEN_FLAGS = os.O_WRONLY | _NOFOLLOW

#: (file path relative to the snapshot, its path in the staging directory, offset in it)
_Target = tuple[str, str, int]
_Wanted = dict[bytes, tuple[BlobEntry, list[_Target]]]
#: Sealed bytes of one pack restored per worker hop (several hops share a large pack).
_JOB_BYTES = 4 << 20


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


def _describe(targets: Sequence[_Target]) -> str:
    names = sorted({path for path, _, _ in targets})
    more = f" (and {len(names) - 1} other files)" if len(names) > 1 else ""
    return f"{names[0]!r}{more}"


def _is_zero(data: bytes) -> bool:
    return not data[0] and not data[-1] and data.count(0) == len(data)


def _set_metadata(fd: int, node: Node, holes: set[str]) -> None:
    if node.path in holes:
        os.ftruncate(fd, node.size)
    os.fchmod(fd, node.mode)
    os.utime(fd, ns=(node.mtime_ns, node.mtime_ns))


class _PackJob:
    """Restore some blobs of one pack (runs on a worker thread); files whose every chunk
    is among them are finished here (size, mode, times)."""

    def __init__(
        self,
        store: Store,
        pack_id: bytes,
        wanted: list[tuple[BlobEntry, list[_Target]]],
        complete: list[Node],
    ) -> None:
        self.store = store
        self.pack_id = pack_id
        self.wanted = wanted
        self.complete = complete

    def _sealed(self) -> tuple[PackOpener, list[memoryview]]:
        store, entries = self.store, [e for e, _ in self.wanted]
        path = store.pack_path(self.pack_id)
        start, end = entries[0].offset, entries[-1].offset + entries[-1].length
        opener = PackOpener(store.keys, self.pack_id, store.read_sync(path, 0, PACK_HEADER_SIZE))
        if 2 * sum(e.length for e in entries) >= end - start:  # mostly wanted: one read
            data = memoryview(store.read_sync(path, start, end))
            return opener, [data[e.offset - start : e.offset - start + e.length] for e in entries]
        return opener, [memoryview(store.read_blob_sync(self.pack_id, e)) for e in entries]

    def run(self) -> tuple[int, int, set[str], set[str]]:
        """Bytes written, chunks verified, files with holes, files finished."""
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
                zero = _is_zero(plain) if plain else False
                for rel, full, offset in targets:
                    fd = fds.get(rel)
                    if fd is None:
                        fd = fds[rel] = os.open(full, _OPEN_FLAGS)
                    if zero:
                        holes.add(rel)
                        continue
                    view, pos = memoryview(plain), offset
                    while view:
                        n = os.pwrite(fd, view, pos)
                        view, pos = view[n:], pos + n
                    written += len(plain)
            for node in self.complete:
                _set_metadata(fds[node.path], node, holes)
        finally:
            for fd in fds.values():
                os.close(fd)
        return written, len(self.wanted), holes, {n.path for n in self.complete}


def _plan(
    manifest: Manifest, index: Index, where: dict[str, str]
) -> list[tuple[bytes, list[Any], list[Node]]]:
    """Jobs: runs of wanted blobs of one pack (at most ``_JOB_BYTES``), where each goes,
    and the files wholly inside the run."""
    require_chunks(index, manifest)
    packs: dict[bytes, _Wanted] = {}
    chunks = index.chunks
    for node in manifest.files():
        offset = 0
        full = where[node.path]
        for cid in node.chunks:
            loc = chunks[cid]
            wanted = packs.get(loc.pack_id)
            if wanted is None:
                wanted = packs[loc.pack_id] = {}
            item = wanted.get(cid)
            if item is None:
                item = wanted[cid] = (loc.entry, [])
            item[1].append((node.path, full, offset))
            offset += loc.entry.raw_length
        if offset != node.size:
            raise FormatError(
                f"{node.path!r}: its chunks hold {offset} bytes but the manifest says "
                f"{node.size}: the index or the manifest is corrupt"
            )
    jobs: list[tuple[bytes, list[Any], list[Node]]] = []
    job_of: dict[bytes, int] = {}
    for pack_id, wanted in packs.items():
        run: list[tuple[BlobEntry, list[_Target]]] = []
        size = 0
        for item in sorted(wanted.values(), key=lambda it: it[0].offset):
            if run and size + item[0].length > _JOB_BYTES:
                jobs.append((pack_id, run, []))
                run, size = [], 0
            run.append(item)
            size += item[0].length
            job_of[item[0].chunk_id] = len(jobs)
        jobs.append((pack_id, run, []))
    for node in manifest.files():
        if node.chunks:
            first = job_of[node.chunks[0]]
            if all(job_of[c] == first for c in node.chunks):
                jobs[first][2].append(node)
    return jobs


def _new_destination(dest: str | os.PathLike[str]) -> str:
    path = os.path.abspath(os.fspath(dest))
    if os.path.lexists(path):
        raise FileExistsError(f"{os.fspath(dest)!r} exists; restore into a new directory")
    return path


def _prepare(staging: str, manifest: Manifest) -> dict[str, str]:
    """Create the staging directory, its directories and empty files; the local path of
    every node (:func:`streamcrypt.paths.local_paths`: no name leaves the staging
    directory). Files are created with ``O_EXCL | O_NOFOLLOW``: nothing in the way is
    followed or reused."""
    os.mkdir(staging, 0o700)
    names = [node.path for node in manifest.nodes]
    where = dict(zip(names, local_paths(staging, names, what="the snapshot path"), strict=True))
    made = {""}
    for node in manifest.nodes:
        path = where[node.path]
        parent = node.path.rpartition("/")[0]
        if parent not in made:
            os.makedirs(os.path.dirname(path), 0o700, exist_ok=True)
            made.add(parent)
        if node.kind == "dir":
            os.makedirs(path, 0o700, exist_ok=True)
            made.add(node.path)
        elif node.kind == "file":
            os.close(os.open(path, _CREATE_FLAGS, 0o600))
    return where


def _finish(where: dict[str, str], manifest: Manifest, holes: set[str], finished: set[str]) -> None:
    """Files not finished by a pack job, then links, then directories deepest first."""
    dirs: list[Node] = []
    for node in manifest.nodes:
        path = where[node.path]
        if node.kind == "file":
            if node.path in finished:
                continue
            fd = os.open(path, os.O_WRONLY | _NOFOLLOW)
            try:
                _set_metadata(fd, node, holes)
            finally:
                os.close(fd)
        elif node.kind == "symlink":
            os.symlink(node.target, path)
            if os.utime in os.supports_follow_symlinks:
                os.utime(path, ns=(node.mtime_ns, node.mtime_ns), follow_symlinks=False)
        else:
            dirs.append(node)
    for node in sorted(dirs, key=lambda n: n.path.count("/"), reverse=True):
        path = where[node.path]
        os.chmod(path, node.mode)
        os.utime(path, ns=(node.mtime_ns, node.mtime_ns))


async def restore(
    store: str | os.PathLike[str],
    name: str,
    dest: str | os.PathLike[str],
    key: SecretKey | None = None,
    *,
    identities: Iterable[IdentityLike] | IdentityLike | None = None,
    signer: str | None = None,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
    progress: Progress | None = None,
    storage_options: dict[str, Any] | None = None,
) -> RestoreReport:
    """Restore snapshot ``name`` (``latest``: the newest) into the new directory ``dest``,
    verifying every chunk; the store opens with its master ``key``, or a write-only
    store with its ``identities`` (its writer key cannot restore: :class:`UnknownKeyError`).

    ``dest`` appears only once everything verified; on failure nothing is left behind.
    Raises :class:`InvalidSignatureError` (snapshot altered or renamed, wrong key),
    :class:`AuthenticationError` (a damaged chunk or pack; the message names the file),
    :class:`FormatError` (a chunk missing from the store, a malformed manifest),
    :class:`SnapshotNotFoundError`, :class:`UnknownKeyError`, ``FileExistsError`` when
    ``dest`` exists, ``OSError`` (also a pack a prune running beside it deleted: run it
    again; a lock never stops a restore). ``signer``: the store's signer as ``backup
    init`` printed it, kept apart from the store (:class:`InvalidSignatureError` when
    the config names another).
    """
    started = time.perf_counter()
    dest_path = await run_blocking(None, _new_destination, dest)
    opened = await open_reader(store, key, identities, policy, storage_options, "restore", signer)
    async with opened.lock(exclusive=False):
        manifest = await opened.load_snapshot(name)
        index = await opened.load_index()
        parent, base = os.path.split(dest_path)
        staging = os.path.join(parent, f".{base}.restore-{secrets.token_hex(8)}")
        total = sum(n.size for n in manifest.files())
        try:
            where = await run_blocking(policy, _prepare, staging, manifest)
            plan = _plan(manifest, index, where)
            written = verified = 0
            holes: set[str] = set()
            finished: set[str] = set()
            jobs = deque(_PackJob(opened, *job) for job in plan)
            async with aclosing(ordered_calls(policy, jobs, _PackJob.run)) as results:
                async for _, (n, chunks, job_holes, job_done) in results:
                    written += n
                    verified += chunks
                    holes |= job_holes
                    finished |= job_done
                    if progress is not None:
                        progress(min(written, total), total)
                    await opened.refresh_lock()
            await run_blocking(policy, _finish, where, manifest, holes, finished)
            os.rename(staging, dest_path)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    nodes = manifest.nodes
    return RestoreReport(
        snapshot=manifest.snapshot,
        files=sum(n.kind == "file" for n in nodes),
        dirs=sum(n.kind == "dir" for n in nodes),
        links=sum(n.kind == "symlink" for n in nodes),
        bytes_written=total,
        chunks_verified=verified,
        seconds=time.perf_counter() - started,
    )
