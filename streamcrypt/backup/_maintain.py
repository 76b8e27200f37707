"""Keeping a store: list, verify (every chunk, without restoring), forget and prune.

``verify`` reads every pack and opens every blob the index names (authenticate,
decompress, hash back to the id), checks each pack's table against the index, every
snapshot's signature, and that every chunk a snapshot uses is indexed; each problem names
the files (``snapshot:path``) it affects. ``prune`` drops what no snapshot references:
packs with nothing referenced are deleted, packs with more than ``max_unused`` of their
bytes unreferenced are rewritten (blobs move still sealed and compressed; only the pack
key changes), the new index is written before any old index file or pack is deleted, so
a prune killed at any point leaves every snapshot restorable.

What an index file says is not taken on trust (anyone who can append to the store can
add one): a chunk a snapshot uses that index files place in several packs keeps every
one of them unless prune read one copy and it authenticated and hashed back to its id
(:func:`_choose_copies`); then only that copy is kept, and a pack that lists the chunk
elsewhere is rewritten without it. A pack is deleted only when it holds no chunk a
snapshot uses except copies verified elsewhere.
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Iterable, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from ..codecs import IdentityLike, RecipientLike
from ..codecs.backup import (
    MAX_CONFIG_SIZE,
    PACK_HEADER_SIZE,
    BlobEntry,
    PackOpener,
    PackWriter,
    StoreConfig,
)
from ..engine import DEFAULT_POLICY, OffloadPolicy, ordered_calls
from ..errors import (
    FormatError,
    InvalidParameterError,
    SnapshotNotFoundError,
    StoreNotFoundError,
    StreamCryptError,
)
from ..keys import SecretKey
from ._backup import Progress
from ._store import Store, open_location, open_reader, shown_location, snapshot_names
from ._work import run_blocking


async def list_snapshots(
    location: str | os.PathLike[str],
    *,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
    storage_options: dict[str, Any] | None = None,
) -> list[str]:
    """Snapshot names in a store, in name order (default names: oldest first; no key
    needed). Raises :class:`StoreNotFoundError` when ``location`` holds no store,
    :class:`FormatError` for a damaged config."""
    return await run_blocking(policy, _snapshot_files, location, storage_options)


def _snapshot_files(
    location: str | os.PathLike[str], storage_options: dict[str, Any] | None
) -> list[str]:
    fs, root, _ = open_location(location, storage_options)
    root = root.rstrip("/")
    if not fs.exists(f"{root}/config"):
        raise StoreNotFoundError(f"{shown_location(root)!r} is not a backup store (no config)")
    StoreConfig.decode(fs.cat_file(f"{root}/config", 0, MAX_CONFIG_SIZE + 1))
    if not fs.exists(f"{root}/snapshots"):
        return []
    return snapshot_names(
        p.rstrip("/").rsplit("/", 1)[-1] for p in fs.ls(f"{root}/snapshots", detail=False)
    )


# -- verify -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with a store, and the files (``snapshot:path``) it affects."""

    kind: str  # "snapshot", "index", "key", "missing", "pack", "chunk"
    message: str
    files: tuple[str, ...] = ()

    def describe(self, limit: int = 5) -> str:
        if not self.files:
            return self.message
        shown = ", ".join(self.files[:limit])
        more = f" and {len(self.files) - limit} more" if len(self.files) > limit else ""
        return f"{self.message}; affects {shown}{more}"


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """What :func:`verify` checked and found; ``ok`` when nothing is wrong."""

    snapshots: int
    packs: int
    chunks_verified: int
    bytes_verified: int
    orphan_packs: int
    problems: tuple[Problem, ...]
    seconds: float

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        head = (
            f"{self.snapshots} snapshots, {self.packs} packs, {self.chunks_verified} chunks "
            f"({self.bytes_verified:,} bytes) checked in {self.seconds:.2f} s"
        )
        if self.orphan_packs:
            head += f"; {self.orphan_packs} unindexed packs (prune removes them)"
        if self.ok:
            return head + ": no problems"
        lines = [head + f": {len(self.problems)} problems"]
        lines += [f"  {p.kind}: {p.describe()}" for p in self.problems]
        return "\n".join(lines)


def _check_pack(
    store: Store, pack_id: bytes, entries: list[BlobEntry], size: int, read_data: bool
) -> tuple[list[tuple[bytes, str]], str | None, int]:
    """Damaged chunks (id, why), a table problem, and bytes read (worker thread)."""
    try:
        if read_data:
            data = memoryview(store.read_pack_sync(pack_id))
            opener = PackOpener(store.keys, pack_id, data)
        else:
            data = memoryview(b"")
            header = store.read_sync(store.pack_path(pack_id), 0, PACK_HEADER_SIZE)
            opener = PackOpener(store.keys, pack_id, header)
    except (StreamCryptError, OSError) as exc:
        why = f"{type(exc).__name__}: {exc}"
        return [(e.chunk_id, why) for e in entries], why, 0
    problem = None
    try:
        if read_data:
            table = opener.table(data, len(data))
        else:
            table = store.read_pack_table_sync(pack_id, size)
        if {(e.chunk_id, e.offset) for e in table} != {(e.chunk_id, e.offset) for e in entries}:
            problem = "the pack's table does not match the index"
    except (StreamCryptError, OSError) as exc:
        problem = f"{type(exc).__name__}: {exc}"
    bad: list[tuple[bytes, str]] = []
    if read_data:
        for entry in entries:
            try:
                opener.blob(entry, data[entry.offset : entry.offset + entry.length])
            except StreamCryptError as exc:
                bad.append((entry.chunk_id, f"{type(exc).__name__}: {exc}"))
    return bad, problem, len(data)


async def verify(
    store: str | os.PathLike[str],
    key: SecretKey | None = None,
    *,
    identities: Iterable[IdentityLike] | IdentityLike | None = None,
    signer: str | None = None,
    read_data: bool = True,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
    progress: Progress | None = None,
    storage_options: dict[str, Any] | None = None,
) -> VerifyReport:
    """Check that every snapshot and every chunk of the store authenticates, without
    restoring (``read_data=False``: pack tables and the index only).

    ``key``: the master key; a write-only store's ``identities``; ``signer``: the
    store's signer as ``backup init`` printed it, kept apart from the store
    (:class:`InvalidSignatureError` when the config names another). Problems are
    reported, not raised (a lock never stops a verify; one beside a prune may report packs the
    prune just removed). Raises :class:`UnknownKeyError` (also for a write-only store's
    writer key), ``OSError``.
    """
    started = time.perf_counter()
    opened = await open_reader(store, key, identities, policy, storage_options, "verify", signer)
    problems: list[Problem] = []
    async with opened.lock(exclusive=False):
        index = await opened.load_index()
        problems += [Problem("index", msg) for msg in index.problems()]
        problems += [Problem("key", msg) for msg in await opened.key_file_problems()]
        users: dict[bytes, list[str]] = {}
        names = await opened.snapshot_names()
        for name in names:
            try:
                manifest = await opened.load_snapshot(name)
            except StreamCryptError as exc:
                problems.append(Problem("snapshot", f"{name}: {type(exc).__name__}: {exc}"))
                continue
            for node in manifest.files():
                for cid in node.chunks:
                    users.setdefault(cid, []).append(f"{name}:{node.path}")
        stored = index.stored
        missing_packs = [pid for pid in index.packs if pid not in stored]
        in_missing_packs = {e.chunk_id for pid in missing_packs for e in index.packs[pid]}
        missing = [c for c in users if c not in index.chunks and c not in in_missing_packs]
        if missing:
            files = sorted({f for cid in missing for f in users[cid]})
            problems.append(
                Problem("missing", f"{len(missing)} chunks are not in the index", tuple(files))
            )
        total = sum(stored.get(pid, 0) for pid in index.packs)
        done = chunks = 0
        for pack_id in missing_packs:
            lost = {e.chunk_id for e in index.packs[pack_id]} - index.chunks.keys()
            files = sorted({f for cid in lost for f in users.get(cid, ())})
            problems.append(
                Problem("pack", f"pack {pack_id.hex()[:16]}... is missing", tuple(files))
            )
        jobs = deque(pid for pid in index.packs if pid in stored)

        def check(pack_id: bytes) -> tuple[list[tuple[bytes, str]], str | None, int]:
            return _check_pack(opened, pack_id, index.packs[pack_id], stored[pack_id], read_data)

        async with aclosing(ordered_calls(policy, jobs, check)) as results:
            async for pack_id, (bad, table_problem, nbytes) in results:
                short = pack_id.hex()[:16]
                mine = [cid for cid, _ in bad if index.chunks[cid].pack_id == pack_id]
                if len(bad) == len(index.packs[pack_id]) > 1:  # nothing in it opens: one problem
                    files = sorted({f for cid in mine for f in users.get(cid, ())})
                    why = table_problem or bad[0][1]
                    problems.append(
                        Problem("pack", f"pack {short}... is unreadable: {why}", tuple(files))
                    )
                else:
                    if table_problem is not None:
                        problems.append(Problem("pack", f"pack {short}...: {table_problem}"))
                    for cid, why in bad:
                        if index.chunks[cid].pack_id != pack_id:
                            continue  # a duplicate; the indexed copy is checked in its own pack
                        problems.append(
                            Problem(
                                "chunk",
                                f"chunk {cid.hex()[:16]}... in pack {short}...: {why}",
                                tuple(sorted(users.get(cid, ()))),
                            )
                        )
                chunks += len(index.packs[pack_id]) if read_data else 0
                done += nbytes
                if progress is not None:
                    progress(min(done, total), total)
                await opened.refresh_lock()
        orphans = len(index.recovered) + sum(1 for pid in stored if pid not in index.packs)
    return VerifyReport(
        snapshots=len(names),
        packs=len(index.packs),
        chunks_verified=chunks,
        bytes_verified=done,
        orphan_packs=orphans,
        problems=tuple(problems),
        seconds=time.perf_counter() - started,
    )


# -- forget and prune ----------------------------------------------------------------------------


async def forget(
    store: str | os.PathLike[str],
    key: SecretKey | None,
    names: Sequence[str],
    *,
    identities: Iterable[IdentityLike] | IdentityLike | None = None,
    signer: str | None = None,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
    storage_options: dict[str, Any] | None = None,
) -> list[str]:
    """Delete snapshots (``latest``: the newest) and return their names; their chunks
    stay until :func:`prune`. Raises :class:`SnapshotNotFoundError` for a name the store
    lacks (then nothing is deleted), :class:`InvalidParameterError`,
    :class:`StoreLockedError`, :class:`UnknownKeyError`; ``signer``: as for
    :func:`verify`."""
    opened = await open_reader(store, key, identities, policy, storage_options, "forget", signer)
    async with opened.lock(exclusive=True):
        present: set[str] = set(await opened.snapshot_names())
        chosen = [await opened.find_snapshot(name) for name in names]
        for name in chosen:
            if name not in present:
                raise SnapshotNotFoundError(f"no snapshot {name!r} in the store")
        await opened.confirm_lock()
        await opened.delete([f"snapshots/{name}" for name in chosen])
    return chosen


@dataclass(frozen=True, slots=True)
class PruneReport:
    """What :func:`prune` removed and rewrote."""

    packs_deleted: int
    packs_rewritten: int
    packs_written: int
    chunks_removed: int
    bytes_before: int
    bytes_after: int
    temporaries_removed: int
    seconds: float

    def summary(self) -> str:
        return (
            f"deleted {self.packs_deleted} packs, rewrote {self.packs_rewritten} into "
            f"{self.packs_written}, removed {self.chunks_removed} chunks; packs hold "
            f"{self.bytes_after:,} bytes (were {self.bytes_before:,}); "
            f"{self.temporaries_removed} temporaries removed; {self.seconds:.2f} s"
        )


def _repack(store: Store, pack_id: bytes, used: list[BlobEntry]) -> list[tuple[BlobEntry, bytes]]:
    """The authenticated, still-compressed payloads of ``used`` (worker thread)."""
    data = memoryview(store.read_pack_sync(pack_id))
    opener = PackOpener(store.keys, pack_id, data)
    return [(e, opener.payload(e, data[e.offset : e.offset + e.length])) for e in used]


def _verified_copies(store: Store, pack_id: bytes, entries: list[BlobEntry]) -> set[BlobEntry]:
    """The ``entries`` of ``pack_id`` whose blobs authenticate and hash back to their
    ids; none when the pack does not open (worker thread)."""
    try:
        data = memoryview(store.read_pack_sync(pack_id))
        opener = PackOpener(store.keys, pack_id, data)
    except (StreamCryptError, OSError):
        return set()
    good = set()
    for e in entries:
        try:
            opener.blob(e, data[e.offset : e.offset + e.length])
        except StreamCryptError:
            continue
        good.add(e)
    return good


Copy = tuple[bytes, BlobEntry]


async def _choose_copies(
    store: Store, packs: dict[bytes, list[BlobEntry]], referenced: set[bytes]
) -> dict[bytes, Copy | None]:
    """For each referenced chunk in ``packs``: the one copy prune keeps (its only one, or
    the first listed that was read and verified), or ``None`` when it has several and
    none verified (then prune keeps them all). The one place prune decides which copy of
    a chunk may go."""
    holders: dict[bytes, list[Copy]] = {}
    for pack_id, entries in packs.items():
        for e in entries:
            if e.chunk_id in referenced:
                holders.setdefault(e.chunk_id, []).append((pack_id, e))
    doubtful: dict[bytes, list[BlobEntry]] = {}
    for copies in holders.values():
        if len(copies) > 1:
            for pack_id, e in copies:
                doubtful.setdefault(pack_id, []).append(e)
    good: set[Copy] = set()
    for pack_id, entries in doubtful.items():
        verified = await run_blocking(store.policy, _verified_copies, store, pack_id, entries)
        good |= {(pack_id, e) for e in verified}
        await store.refresh_lock()
    return {
        cid: copies[0] if len(copies) == 1 else next((c for c in copies if c in good), None)
        for cid, copies in holders.items()
    }


async def prune(
    store: str | os.PathLike[str],
    key: SecretKey | None = None,
    *,
    identities: Iterable[IdentityLike] | IdentityLike | None = None,
    signer: str | None = None,
    recipients: Iterable[RecipientLike] | RecipientLike = (),
    max_unused: float = 0.1,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
    storage_options: dict[str, Any] | None = None,
) -> PruneReport:
    """Drop chunks no snapshot references (see the module docstring).

    Refuses (raises the snapshot's typed error, naming it) when a snapshot cannot be
    read, since its chunks could not be told apart from garbage, and
    (:class:`FormatError`) when a chunk a snapshot uses is in no stored pack. Packs no
    readable index file names are indexed from their own tables first
    (:meth:`Store.load_index`). Raises :class:`StoreLockedError` (also when its lock was
    removed while it ran),
    :class:`AuthenticationError` for a damaged pack that must be rewritten, ``OSError``;
    ``signer``: as for :func:`verify`; ``recipients``: a write-only store's recipients
    the caller vouches for besides the identities' own (its session is wrapped to the
    config's recipients only when each is vouched for, else
    :class:`UntrustedRecipientError` before anything is read: ``Store.wrap_recipients``).
    """
    if not 0 <= max_unused < 1:
        raise InvalidParameterError("max_unused is a fraction in [0, 1)")
    started = time.perf_counter()
    opened = await open_reader(
        store, key, identities, policy, storage_options, "prune", signer, recipients
    )
    if opened.config.write_only:
        opened.wrap_recipients()  # refused here, not after reading the whole store
    async with opened.lock(exclusive=True):
        index = await opened.load_index()  # packs no index file names: from their tables
        old_index = [f"index/{name}" for name in index.files] + list(index.skipped)
        old_ids = await opened.list_files("ids")
        referenced: set[bytes] = set()
        for name in await opened.snapshot_names():
            try:
                manifest = await opened.load_snapshot(name)
            except StreamCryptError as exc:
                raise type(exc)(
                    f"{exc} -- prune cannot tell which chunks snapshot {name!r} uses, so "
                    f"it refuses to run; if that file is not yours, forget {name!r}"
                ) from None
            for node in manifest.files():
                referenced.update(node.chunks)
        missing = referenced - index.chunks.keys()
        if missing:
            raise FormatError(
                f"{len(missing)} referenced chunks are in no stored pack: run verify; "
                "prune refuses to run on a store that lost data"
            )
        stored = index.stored
        kept: dict[bytes, list[BlobEntry]] = {}
        # a stored pack still unindexed is one these keys do not open: nothing to keep
        drop: list[bytes] = [pid for pid in stored if pid not in index.packs]
        rewrite: list[tuple[bytes, list[BlobEntry]]] = []
        removed = 0
        present = {pid: entries for pid, entries in index.packs.items() if pid in stored}
        chosen = await _choose_copies(opened, present, referenced)  # lost packs: verify's
        for pack_id, entries in present.items():
            used, elsewhere = [], False
            for e in entries:
                if e.chunk_id in referenced:
                    if chosen[e.chunk_id] in (None, (pack_id, e)):
                        used.append(e)
                    else:
                        elsewhere = True  # a verified copy is kept in another place
            size = stored[pack_id]
            unused = sum(e.length for e in entries) - sum(e.length for e in used)
            if not used:
                drop.append(pack_id)
                removed += len(entries)
            elif elsewhere or unused > max_unused * size:
                rewrite.append((pack_id, used))
                removed += len(entries) - len(used)
            else:
                kept[pack_id] = entries

        written: dict[bytes, list[BlobEntry]] = {}
        await opened.begin_session()
        writer = PackWriter(opened.keys)

        async def flush(w: PackWriter) -> None:
            if len(w):
                await opened.write_pack(w.pack_id, w.finish())
                written[w.pack_id] = w.entries

        for pack_id, used in rewrite:
            moved = await run_blocking(policy, _repack, opened, pack_id, used)
            for entry, payload in moved:
                writer.add_sealed(entry, payload)
                if writer.size >= opened.config.pack_size:
                    await flush(writer)
                    writer = PackWriter(opened.keys)
            await opened.refresh_lock()
        await flush(writer)

        await opened.write_index({**kept, **written})
        await opened.delete(old_index)  # the new index covers every pack that opened
        await opened.delete([f"ids/{name}" for name in old_ids])
        await opened.delete([opened.pack_path(pid) for pid in drop + [p for p, _ in rewrite]])
        temporaries = await opened.temporaries()
        await opened.delete(temporaries)
        after = await opened.list_packs()
    return PruneReport(
        packs_deleted=len(drop),
        packs_rewritten=len(rewrite),
        packs_written=len(written),
        chunks_removed=removed,
        bytes_before=sum(stored.values()),
        bytes_after=sum(after.values()),
        temporaries_removed=len(temporaries),
        seconds=time.perf_counter() - started,
    )
