"""The backup store over fsspec: files, the lock, the index and the snapshots.

Layout (docs/BACKUP.md)::

    STORE/config                 plain JSON, signed: store id, signer, chunker and pack sizes
    STORE/data/<2 hex>/<pack id> packs of sealed blobs (codecs.backup)
    STORE/index/<random id>      encrypted index files: pack id -> blob entries
    STORE/snapshots/<name>       signed, encrypted manifests
    STORE/locks/<random id>      lock files (plain JSON: host, pid, time, exclusive, nonce)
    STORE/keys/<session id>      write-only stores: each backup session's key (age file)
    STORE/keys/writer            write-only stores: the writer's secret (age file)
    STORE/ids/<index file name>  write-only stores: the packs an index file names, their chunk ids

Every write goes to a temporary name beside its destination and is renamed into place
after an fsync on local storage (a PUT is already atomic on object stores), so a killed
process leaves whole files or ignorable temporaries (names starting with a dot). Order
makes the store consistent at every instant: packs before the index files that name
them, index files before the snapshots that use their chunks; prune writes the new index
before it deletes anything.

Blocking calls (fsspec's local file system is synchronous) run on the engine's worker
threads through the :class:`~streamcrypt.engine.OffloadPolicy` given.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar
from urllib.parse import SplitResult, urlsplit, urlunsplit

import anyio

from ..codecs import IdentityLike, Recipient, RecipientLike
from ..codecs.backup import (
    MAX_CONFIG_SIZE,
    PACK_HEADER_SIZE,
    SESSION_ID_SIZE,
    BackupKeys,
    BlobEntry,
    DataKeys,
    Manifest,
    PackOpener,
    StoreConfig,
    check_recipients,
    decode_ids,
    decode_index,
    encode_ids,
    encode_index,
    listed_recipient,
    open_key_file,
    open_snapshot,
    seal_key_file,
    seal_snapshot,
    vouched_recipients,
)
from ..engine import DEFAULT_POLICY, OffloadPolicy
from ..errors import (
    FormatError,
    InvalidParameterError,
    InvalidSignatureError,
    SnapshotNotFoundError,
    StoreLockedError,
    StoreNotFoundError,
    StreamCryptError,
    UnknownKeyError,
    UnsafePathError,
)
from ..keys import SecretKey, constant_time_equal, load_json, random_bytes
from ..paths import name_parts
from ..transports import write_atomic
from ._work import run_blocking

T = TypeVar("T")

#: The snapshot name that stands for the newest snapshot (the last in name order).
LATEST = "latest"
#: A lock not refreshed for this long is stale (a live holder refreshes it every 5 min).
LOCK_STALE_SECONDS = 30 * 60
#: A lock dated further ahead than this (clocks of two hosts disagree by less) is stale.
LOCK_CLOCK_SKEW_SECONDS = 5 * 60
_LOCK_REFRESH_SECONDS = 5 * 60


class _LocalFiles:
    """The few file-system calls a store makes, on a local directory, with the names
    and result shapes of fsspec's (importing fsspec costs ~0.1-0.2 s of start-up)."""

    def exists(self, path: str) -> bool:
        return os.path.lexists(path)

    def cat_file(self, path: str, start: int | None = None, end: int | None = None) -> bytes:
        with open(path, "rb", buffering=0) as f:
            if start:
                f.seek(start)
            if end is None:
                return f.read()
            return f.read(max(0, end - (start or 0)))

    def makedirs(self, path: str, exist_ok: bool = False) -> None:
        os.makedirs(path, exist_ok=exist_ok)

    def rm_file(self, path: str) -> None:
        os.unlink(path)

    def _info(self, path: str, st: os.stat_result) -> dict[str, Any]:
        kind = "directory" if os.path.isdir(path) else "file"
        return {"name": path, "type": kind, "size": st.st_size}

    def ls(self, path: str, detail: bool = True) -> list[Any]:
        with os.scandir(path) as it:
            entries = [(e.path, e.stat(follow_symlinks=False)) for e in it]
        if not detail:
            return [p for p, _ in entries]
        return [self._info(p, st) for p, st in entries]

    def find(
        self, path: str, maxdepth: int | None = None, detail: bool = False
    ) -> dict[str, Any] | list[str]:
        found: dict[str, Any] = {}
        base_depth = path.rstrip("/").count("/")
        for top, dirs, files in os.walk(path):
            if maxdepth is not None and top.rstrip("/").count("/") - base_depth >= maxdepth:
                dirs[:] = []
                continue  # deeper than asked (fsspec: maxdepth=1 is the folder itself)
            for name in files:
                full = os.path.join(top, name)
                found[full] = {"name": full, "type": "file", "size": os.lstat(full).st_size}
        return found if detail else sorted(found)


def split_url(url: str) -> SplitResult:
    """``url`` split by :func:`urllib.parse.urlsplit`, when where its credentials end is
    certain: the one place a store's URL is parsed. Raises
    :class:`InvalidParameterError`, quoting nothing of ``url``, when it does not parse,
    its port is not a number, or an ``@`` follows the authority: a user name or token
    holding ``/``, ``?`` or ``#`` not percent-encoded, which urlsplit would take for the
    start of the path, query or fragment (and the rest of the token with it)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        parts = None  # raised below, outside the handler: its message may quote the URL
    after = url.split("//", 1)[-1][len(parts.netloc) :] if parts is not None else ""
    if parts is None or "@" in after:
        raise InvalidParameterError(
            "the store's URL does not parse as scheme://[user:TOKEN@]host[:port]/path (not "
            "shown: it may hold a token); percent-encode '/', '?', '#' and '@' in a user "
            "name or token (%2F, %3F, %23, %40)"
        )
    return parts


def shown_location(location: str | os.PathLike[str]) -> str:
    """``location`` as a message may show it: a URL without its user name, password,
    query or fragment (where credentials go: ``rest:http://user:TOKEN@host/``); only its
    scheme when :func:`split_url` refuses it. Every message that names a store goes
    through this one function."""
    text = os.fspath(location)
    scheme = "rest:" if text.startswith("rest:") else ""
    url = text.removeprefix(scheme)
    if "://" not in url:
        return text
    try:
        parts = split_url(url)
    except InvalidParameterError:
        return scheme + url.split("://", 1)[0] + "://..."
    netloc = parts.netloc.rpartition("@")[2]
    return scheme + urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def open_location(
    location: str | os.PathLike[str], storage_options: dict[str, Any] | None = None
) -> tuple[Any, str, bool]:
    """``(file system, root, is_local)``: a plain path is a local directory,
    ``rest:http://...`` a REST server (:mod:`._rest`), anything else with a scheme
    (``s3://``, ``memory://``...) goes through fsspec."""
    text = os.fspath(location)
    if text.startswith("rest:"):
        from ._rest import RestFiles

        files = RestFiles(text.removeprefix("rest:"), **(storage_options or {}))
        return files, files.root, False
    if "://" not in text or text.startswith("file://"):
        return _LocalFiles(), os.path.abspath(text.removeprefix("file://")), True
    import fsspec

    fs, root = fsspec.core.url_to_fs(text, **(storage_options or {}))
    return fs, root, False


@dataclass(frozen=True, slots=True)
class Location:
    """Where a chunk is stored: its pack and its entry in that pack's table."""

    pack_id: bytes
    entry: BlobEntry


@dataclass(slots=True)
class Index:
    """What the store holds, as :meth:`Store.load_index` found it: ``stored``, the packs
    in storage (id -> size, one listing); ``packs``, pack id -> entries as the index
    files say (also of packs no longer stored: :func:`verify` reports them) and, for
    packs no index file names, as their own tables say (``recovered``); ``chunks``, chunk
    id -> location, of stored packs only; for a write-only store's writer, which reads
    no index file, the chunk ids its id lists place in stored packs (``ids``). ``in``
    asks ``chunks`` and ``ids``: a chunk counts as stored only while its pack is, so an
    old index file or id list put back after a prune cannot make a backup skip data.
    ``files``: the index files (id lists) read; ``skipped``: those that did not open
    (name -> why), left out."""

    chunks: dict[bytes, Location] = field(default_factory=dict)
    packs: dict[bytes, list[BlobEntry]] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    ids: set[bytes] = field(default_factory=set)
    stored: dict[bytes, int] = field(default_factory=dict)
    recovered: dict[bytes, list[BlobEntry]] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)

    def add_pack(self, pack_id: bytes, entries: Sequence[BlobEntry]) -> None:
        """Merge what one index file says ``pack_id`` holds: entries are added to those
        other files gave (never replaced: an index file appended later cannot make a
        pack look emptier than it is); a chunk's first location in a stored pack wins
        (``chunks``), the others stay in ``packs`` for :func:`prune` to weigh."""
        known = self.packs.get(pack_id)
        if known is None:
            self.packs[pack_id] = list(entries)
        else:
            seen = set(known)
            known += [e for e in entries if e not in seen]
        if pack_id in self.stored:
            for e in entries:
                self.chunks.setdefault(e.chunk_id, Location(pack_id, e))

    def problems(self) -> list[str]:
        """What :meth:`Store.load_index` left out, one line per file."""
        return [
            f"{rel} does not open ({why}): left out; damaged, or not the store's "
            "(anyone who can append to the store can add one)"
            for rel, why in self.skipped.items()
        ]

    def __contains__(self, chunk_id: object) -> bool:
        return chunk_id in self.chunks or chunk_id in self.ids


def open_or_skip(rel: str, skipped: dict[str, str], fn: Callable[..., T], *args: Any) -> T | None:
    """``fn(*args)``, the opening of the stored object ``rel``; ``None`` when that raises
    a :class:`StreamCryptError`, with ``rel`` and why in ``skipped``. The one rule for an
    object that does not open (anyone who can append to the store can add one): it
    blocks nothing but what needs it, and is reported (session key files follow it too:
    :class:`_SessionKeys`)."""
    try:
        return fn(*args)
    except StreamCryptError as exc:
        skipped[rel] = f"{type(exc).__name__}: {exc}"
        return None


def check_snapshot_name(name: str) -> str:
    """``name`` if it can name a file in ``snapshots/``: one component that
    :func:`streamcrypt.paths.name_parts` takes, not hidden (no leading dot: temporaries),
    no backslash (a store is read on every platform), nothing unprintable (names are
    shown), not :data:`LATEST`. Raises :class:`InvalidParameterError`."""
    try:
        one = len(name_parts(name, what="a snapshot name", local=True)) == 1
    except UnsafePathError:
        one = False
    if not one or name.startswith(".") or "\\" in name or not name.isprintable():
        raise InvalidParameterError(f"{name!r} is not a snapshot name")
    if name == LATEST:
        raise InvalidParameterError(f"{LATEST!r} names the newest snapshot; choose another name")
    return name


def snapshot_names(files: Iterable[str]) -> list[str]:
    """The names among ``files`` (of ``snapshots/``) that a snapshot can have, sorted."""
    names = []
    for name in files:
        try:
            names.append(check_snapshot_name(name))
        except InvalidParameterError:
            pass
    return sorted(names)


def signer_of(config: StoreConfig) -> str:
    """The store's signer as ``backup init`` prints it: its Ed25519 public key, hex."""
    return config.signer.hex()


def check_signer(config: StoreConfig, signer: str) -> None:
    """Raise :class:`InvalidSignatureError` unless the store's config names ``signer``.

    The anchor outside the store: a write-only store's config and ``keys/writer`` are
    checked against each other, so someone who can replace both (a local directory, a
    bucket: not through the append-only server) could make the identity read a store of
    theirs; the signer the owner kept from ``backup init`` tells the two apart.
    """
    if not constant_time_equal(signer_of(config).encode(), signer.strip().lower().encode()):
        raise InvalidSignatureError(
            "the store's config names another signer than the one given: the config and "
            "writer key were replaced, or this is another store"
        )


class _SessionKeys(Mapping[bytes, DataKeys]):
    """A write-only store's session keys as its identity sees them: ``keys/<session
    id>`` is read and unwrapped when an object first names that session, never before,
    so a key file that does not open (anyone can append one) blocks nothing but the
    objects that name it. Iterating gives the sessions unwrapped so far."""

    def __init__(self, store: Store, identities: Iterable[IdentityLike] | IdentityLike) -> None:
        self._store = store
        self._identities = identities
        self._opened: dict[bytes, DataKeys] = {}

    def __getitem__(self, session: bytes) -> DataKeys:
        found = self._opened.get(session)
        if found is None:
            if len(session) != SESSION_ID_SIZE:
                raise KeyError(session)
            name = session.hex()
            try:
                data = self._store.read_sync(f"keys/{name}")
            except FileNotFoundError:
                raise KeyError(session) from None
            secret = open_key_file(self._identities, name, data)
            found = self._opened[session] = DataKeys.derive(secret, session)
        return found

    def __iter__(self) -> Iterator[bytes]:
        return iter(list(self._opened))

    def __len__(self) -> int:
        return len(self._opened)


class Store:
    """An opened backup store: keys, config, and async access to its files.

    Open with :meth:`open`; take :meth:`lock` before reading or changing it. Raises
    :class:`UnknownKeyError` when the store belongs to another key,
    :class:`StoreNotFoundError` when there is no store (:func:`create_store` and
    :func:`~._writeonly.create_write_only` make one).
    """

    def __init__(
        self,
        fs: Any,
        root: str,
        keys: BackupKeys,
        config: StoreConfig,
        policy: OffloadPolicy | None,
        *,
        local: bool,
    ) -> None:
        self.fs = fs
        self.root = root.rstrip("/") or "/"
        self.keys = keys
        self.config = config
        self.policy = policy
        self._local = local
        self._vouched: frozenset[Any] = frozenset()
        self._lock_name: str | None = None
        self._lock_doc: dict[str, Any] = {}
        self._lock_data = b""
        self._lock_time = 0.0

    @property
    def is_local(self) -> bool:
        """True for a store on the local file system (fsync and rename; a lock's pid)."""
        return self._local

    # -- opening ------------------------------------------------------------------------------

    @classmethod
    async def open(
        cls,
        location: str | os.PathLike[str],
        key: SecretKey | None = None,
        *,
        identities: Iterable[IdentityLike] | IdentityLike | None = None,
        signer: str | None = None,
        recipients: Iterable[RecipientLike] | RecipientLike = (),
        removing: Sequence[str] = (),
        policy: OffloadPolicy | None = DEFAULT_POLICY,
        storage_options: dict[str, Any] | None = None,
    ) -> Store:
        """Open the store at ``location`` (a path or an fsspec URL).

        A symmetric store opens with its master ``key``; a write-only store with its
        writer key (``key``: back up only) or with ``identities`` (everything). Raises
        :class:`UnknownKeyError` (another store's key, an identity the store is not
        wrapped to), :class:`InvalidParameterError` (no key, or the wrong kind),
        :class:`StoreNotFoundError` (no store there: never made by opening), and
        with ``signer`` (the store's signer as ``backup init`` printed it, kept apart from
        the store), :class:`InvalidSignatureError` when the config names another signer.
        ``recipients``: with ``identities``, the store's recipients the caller vouches
        for besides the identities' own (:meth:`wrap_recipients`); ``removing``: the
        config's entries ``rekey`` removes by their exact text (``StoreConfig.decode``
        refuses any other that is not one canonical recipient:
        :class:`UntrustedRecipientError`).
        """
        fs, root, local = await run_blocking(None, open_location, location, storage_options)
        if (key is None) == (identities is None):
            raise InvalidParameterError("give the store's key= or its identities=, one of them")
        # keys and config come from the store itself: _open_sync sets both before return
        store = cls(fs, root, None, None, policy, local=local)  # type: ignore[arg-type]
        await store._run(store._open_sync, key, identities, recipients, removing)
        if signer is not None:
            check_signer(store.config, signer)
        return store

    def _open_sync(
        self,
        key: SecretKey | None,
        identities: Iterable[IdentityLike] | IdentityLike | None,
        recipients: Iterable[RecipientLike] | RecipientLike,
        removing: Sequence[str],
    ) -> None:
        path = self._path("config")
        if not self.fs.exists(path):
            raise StoreNotFoundError(
                f"{shown_location(self.root)!r} is not a backup store (no config): a "
                "store is made only by 'backup init' (create_store, create_write_only); "
                "check the path, or that its disk is mounted"
            )
        raw = self.fs.cat_file(path, 0, MAX_CONFIG_SIZE + 1)
        config = StoreConfig.decode(raw, removing=removing)
        if not config.write_only:
            if key is None:
                raise InvalidParameterError("a symmetric store opens with its key=, not identities")
            self.keys = BackupKeys.derive(key)
        elif identities is None:
            assert key is not None
            self.keys = BackupKeys.writer(key)
        else:
            writer = open_key_file(identities, "writer", self.read_sync("keys/writer"))
            keys = BackupKeys.writer(SecretKey(writer))
            self.keys = replace(keys, opens=_SessionKeys(self, identities), reader=True)
            self._vouched = vouched_recipients(identities, recipients)
        self.config = StoreConfig.decode(raw, self.keys, removing=removing)

    def _key_file_problems_sync(self) -> list[str]:
        """The files of ``keys/`` that do not open as this store's session keys (they
        block nothing: :class:`_SessionKeys`); the identity only."""
        if not (self.config.write_only and self.keys.reader):
            return []
        problems = []
        for name in self._list_sync("keys", False):
            if name == "writer":
                continue
            try:
                self.keys.opens[bytes.fromhex(name)]
            except (KeyError, ValueError, StreamCryptError) as exc:
                problems.append(
                    f"keys/{name} does not open as a session key of the store "
                    f"({type(exc).__name__}): not the store's; the owner may delete it"
                )
        return problems

    async def key_file_problems(self) -> list[str]:
        return await self._run(self._key_file_problems_sync)

    def wrap_recipients(self, listed: Sequence[str] | None = None) -> tuple[Recipient, ...]:
        """Whom a new key file of a write-only store is wrapped to: ``listed`` (default:
        the config's recipients), checked and parsed (:func:`seal_key_file` takes only
        these: what is checked is what is wrapped). The one place this is decided.

        The writer wraps to the config it checked under its own key (whoever takes the
        writer can change its future sessions' recipients: they are theirs anyway). The
        identity (prune's session, rekey: secrets that reach back before any compromise)
        takes nothing from the store on trust: every recipient listed must be the public
        key of an identity it opened with or one its caller named (``recipients=``), or
        :class:`UntrustedRecipientError` names the others before anything is wrapped.
        """
        listed = self.config.recipients if listed is None else listed
        if not self.keys.reader:
            return tuple(listed_recipient(text) for text in listed)
        return check_recipients(listed, self._vouched)

    async def begin_session(self) -> None:
        """Before a write-only store's backup or prune writes anything: a fresh session
        secret, stored first as an age file to :meth:`wrap_recipients`, seals what this
        run writes (no-op for a symmetric store). Raises
        :class:`UntrustedRecipientError` as that does."""
        if not self.config.write_only:
            return
        session, secret = random_bytes(SESSION_ID_SIZE), random_bytes(32)
        data = seal_key_file(self.wrap_recipients(), session.hex(), secret)
        await self.write(f"keys/{session.hex()}", data)
        self.keys = self.keys.sealing(DataKeys.derive(secret, session))

    def require_reader(self, action: str) -> None:
        """Raise :class:`UnknownKeyError` when these keys cannot open the store's data
        (a write-only store's writer key): ``action`` needs the identity."""
        if not self.keys.reader:
            raise UnknownKeyError(
                f"this store is write-only and its writer key cannot {action}: that needs "
                "the store's identity (identities=, or -i IDENTITY)"
            )

    # -- files ----------------------------------------------------------------------------------

    def _path(self, rel: str) -> str:
        return f"{self.root}/{rel}"

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        return await run_blocking(self.policy, fn, *args)

    def write_sync(self, rel: str, data: bytes) -> None:
        path = self._path(rel)
        parent = path.rsplit("/", 1)[0]
        if self._local:
            os.makedirs(parent, exist_ok=True)
            write_atomic(path, data, mode=0o600)
        else:
            self.fs.makedirs(parent, exist_ok=True)
            self.fs.pipe_file(path, data)

    async def write(self, rel: str, data: bytes) -> None:
        await self._run(self.write_sync, rel, data)

    def read_sync(self, rel: str, start: int | None = None, end: int | None = None) -> bytes:
        data: bytes = self.fs.cat_file(self._path(rel), start=start, end=end)
        return data

    async def read(self, rel: str) -> bytes:
        return await self._run(self.read_sync, rel)

    def _delete_sync(self, rels: Sequence[str]) -> None:
        for rel in rels:
            try:
                self.fs.rm_file(self._path(rel))
            except FileNotFoundError:
                pass

    async def delete(self, rels: Sequence[str]) -> None:
        if rels:
            await self._run(self._delete_sync, list(rels))

    def _list_sync(self, rel: str, recursive: bool) -> dict[str, int]:
        """Names (relative to ``rel``) and sizes of files, temporaries left out."""
        base = self._path(rel)
        if not self.fs.exists(base):
            return {}
        found: dict[str, int] = {}
        infos = self.fs.find(base, detail=True) if recursive else self.fs.ls(base, detail=True)
        items = infos.values() if isinstance(infos, dict) else infos
        for info in items:
            if info.get("type") != "file":
                continue
            name = info["name"].rstrip("/").rsplit("/", 1)[-1]
            if name.startswith("."):
                continue
            found[name] = int(info.get("size") or 0)
        return found

    async def list_files(self, rel: str, *, recursive: bool = False) -> dict[str, int]:
        return await self._run(self._list_sync, rel, recursive)

    def _temporaries_sync(self) -> list[str]:
        out = []
        for sub in ("data", "index", "ids", "keys", "snapshots", "locks", ""):
            base = self._path(sub) if sub else self.root
            if not self.fs.exists(base):
                continue
            for path in self.fs.find(base, maxdepth=None if sub else 1):
                name = path.rsplit("/", 1)[-1]
                if name.startswith(".") and name.endswith(".tmp"):
                    out.append(path[len(self.root) + 1 :])
        return out

    async def temporaries(self) -> list[str]:
        """Temporaries a killed writer left behind (removed by prune)."""
        return await self._run(self._temporaries_sync)

    # -- packs ----------------------------------------------------------------------------------

    async def list_packs(self) -> dict[bytes, int]:
        """Pack ids in storage and their sizes."""
        found = await self.list_files("data", recursive=True)
        out: dict[bytes, int] = {}
        for name, size in found.items():
            try:
                out[bytes.fromhex(name)] = size
            except ValueError:
                continue
        return out

    async def write_pack(self, pack_id: bytes, data: bytes) -> None:
        await self.write(self.pack_path(pack_id), data)

    def read_pack_sync(self, pack_id: bytes) -> bytes:
        return self.read_sync(self.pack_path(pack_id))

    def read_blob_sync(self, pack_id: bytes, entry: BlobEntry) -> bytes:
        return self.read_sync(self.pack_path(pack_id), entry.offset, entry.offset + entry.length)

    def read_pack_table_sync(self, pack_id: bytes, size: int) -> list[BlobEntry]:
        """The authenticated table of a pack, read from its two ends (no blob is read)."""
        header = self.read_sync(self.pack_path(pack_id), 0, PACK_HEADER_SIZE)
        opener = PackOpener(self.keys, pack_id, header)
        tail = self.read_sync(self.pack_path(pack_id), max(0, size - 65536), size)
        need = PackOpener.table_size(tail)
        if need > len(tail):
            tail = self.read_sync(self.pack_path(pack_id), max(0, size - need), size)
        return opener.table(tail, size)

    @staticmethod
    def pack_path(pack_id: bytes) -> str:
        name = pack_id.hex()
        return f"data/{name[:2]}/{name}"

    # -- index ----------------------------------------------------------------------------------

    async def load_index(self) -> Index:
        """What the store holds (:class:`Index`), from one listing of the packs and every
        index file (a write-only store's writer: every id list); a file that does not
        open is left out and named in ``Index.skipped`` (:func:`open_or_skip`). A reader
        also indexes the stored packs no index file names from their own tables
        (``Index.recovered``; a table that does not open leaves its pack unindexed), so
        a pack whose index file was lost, damaged or never written still counts."""
        index = Index(stored=await self.list_packs())
        if not self.keys.reader:
            for name in sorted(await self.list_files("ids")):
                rel = f"ids/{name}"
                found = await self._run(open_or_skip, rel, index.skipped, self._read_ids, name)
                if found is not None:
                    for pack_id, ids in found.items():
                        if pack_id in index.stored:
                            index.ids |= ids
                    index.files.append(name)
            return index
        for name in sorted(await self.list_files("index")):
            rel = f"index/{name}"
            packs = await self._run(open_or_skip, rel, index.skipped, self._read_index, rel)
            if packs is not None:
                for pack_id, entries in packs.items():
                    index.add_pack(pack_id, entries)
                index.files.append(name)
        for pack_id, size in index.stored.items():
            if pack_id not in index.packs:
                try:
                    entries = await self._run(self.read_pack_table_sync, pack_id, size)
                except (StreamCryptError, OSError):
                    continue  # not a pack these keys open: prune removes it
                index.recovered[pack_id] = entries
                index.add_pack(pack_id, entries)
        return index

    def _read_index(self, rel: str) -> dict[bytes, list[BlobEntry]]:
        return decode_index(self.keys, self.read_sync(rel))

    def _read_ids(self, name: str) -> dict[bytes, set[bytes]]:
        return decode_ids(self.keys, name, self.read_sync(f"ids/{name}"))

    async def write_index(self, packs: dict[bytes, list[BlobEntry]]) -> str:
        """Write an index file for ``packs`` (in a write-only store, then its id list of
        the same name); returns its name."""
        name = secrets.token_hex(16)
        await self.confirm_lock()
        await self.write(f"index/{name}", encode_index(self.keys, packs))
        if self.config.write_only:
            ids = {pack_id: [e.chunk_id for e in entries] for pack_id, entries in packs.items()}
            await self.write(f"ids/{name}", encode_ids(self.keys, name, ids))
        return name

    # -- snapshots -------------------------------------------------------------------------------

    async def snapshot_names(self) -> list[str]:
        """Snapshot names, in name order; a file no snapshot could be named (see
        :func:`check_snapshot_name`: planted by someone without the key) is left out."""
        return snapshot_names(await self.list_files("snapshots"))

    async def find_snapshot(self, name: str) -> str:
        """The snapshot ``name`` stands for: itself, or for :data:`LATEST` the one whose
        signed manifest was created last (names are the user's: they need not sort by
        time). Raises :class:`InvalidParameterError` (not a snapshot name),
        :class:`SnapshotNotFoundError` (``latest`` in a store without snapshots), and for
        ``latest`` as :meth:`load_snapshot` for any snapshot that does not verify (never
        an older one in its place)."""
        if name != LATEST:
            return check_snapshot_name(name)
        return (await self._newest()).snapshot

    async def load_snapshot(self, name: str) -> Manifest:
        """Verify, decrypt and parse snapshot ``name`` (or :data:`LATEST`). Raises
        :class:`InvalidSignatureError`, :class:`AuthenticationError`,
        :class:`FormatError`, :class:`SnapshotNotFoundError`."""
        if name == LATEST:
            return await self._newest()
        name = check_snapshot_name(name)
        try:
            data = await self.read(f"snapshots/{name}")
        except FileNotFoundError:
            raise SnapshotNotFoundError(f"no snapshot {name!r} in the store") from None
        return await self._run(open_snapshot, self.keys, name, data)

    async def try_snapshot(self, name: str, skipped: dict[str, str]) -> Manifest | None:
        """Snapshot ``name`` (as :meth:`snapshot_names` lists it), or ``None`` when it is
        gone or does not open (then named in ``skipped``: :func:`open_or_skip`)."""
        rel = f"snapshots/{name}"
        try:
            data = await self.read(rel)
        except FileNotFoundError:
            return None
        return await self._run(open_or_skip, rel, skipped, open_snapshot, self.keys, name, data)

    async def _newest(self) -> Manifest:
        """The snapshot whose signed manifest was created last, every snapshot verified on
        the way (the one place :data:`LATEST` is decided)."""
        newest: Manifest | None = None
        for candidate in await self.snapshot_names():
            manifest = await self.load_snapshot(candidate)
            if newest is None or (manifest.created, candidate) > (newest.created, newest.snapshot):
                newest = manifest
        if newest is None:
            raise SnapshotNotFoundError(f"no snapshot in the store, so no {LATEST!r}")
        return newest

    async def write_snapshot(self, manifest: Manifest) -> bytes:
        """Seal, sign and store ``manifest``; returns it packed (:meth:`Manifest.pack`),
        for a write-only store's writer to keep in its cache without encoding it again."""
        name = check_snapshot_name(manifest.snapshot)
        if await self._run(self.fs.exists, self._path(f"snapshots/{name}")):
            raise InvalidParameterError(f"snapshot {name!r} already exists in the store")

        def write() -> bytes:
            self._confirm_sync(self._lock_name)
            packed = manifest.pack()
            self.write_sync(f"snapshots/{name}", seal_snapshot(self.keys, name, packed))
            return packed

        return await self._run(write)

    # -- locking ----------------------------------------------------------------------------------

    @staticmethod
    def _stale(doc: object, now: float) -> bool:
        """Whether a lock no longer holds: not refreshed for :data:`LOCK_STALE_SECONDS`,
        its process gone (same host), or one no holder writes (anyone who can append to
        the store can plant one): a lock that does not parse, or dated more than
        :data:`LOCK_CLOCK_SKEW_SECONDS` ahead. The one place a lock's life is decided."""
        if not isinstance(doc, dict):
            return True
        when = doc.get("time")
        if isinstance(when, bool) or not isinstance(when, int | float):
            return True
        if not now - LOCK_STALE_SECONDS <= when <= now + LOCK_CLOCK_SKEW_SECONDS:
            return True  # also NaN and infinities
        if doc.get("host") != socket.gethostname():
            return False
        try:
            os.kill(int(doc["pid"]), 0)
        except ProcessLookupError:
            return True
        except (PermissionError, KeyError, ValueError, TypeError, OverflowError):
            return False
        return False

    def _conflicts_sync(self, own: str | None) -> list[str]:
        """Descriptions of the live locks beside ``own``; stale ones are removed."""
        now = time.time()
        conflicts = []
        for name in self._list_sync("locks", False):
            if name == own:
                continue
            doc: object
            try:
                text = self.read_sync(f"locks/{name}", 0, MAX_CONFIG_SIZE + 1)
                doc = load_json(text, "a lock file", max_size=MAX_CONFIG_SIZE)
            except FileNotFoundError:
                continue
            except FormatError:
                doc = None
            if self._stale(doc, now):
                self._delete_sync([f"locks/{name}"])
                continue
            assert isinstance(doc, dict)
            conflicts.append(
                f"{'exclusive' if doc.get('exclusive', True) else 'shared'} lock of "
                f"process {doc.get('pid', '?')!r} on {doc.get('host', '?')!r}, "
                f"refreshed {now - float(doc['time']):.0f} s ago"
            )
        return conflicts

    def _acquire_sync(self, exclusive: bool) -> None:
        """Write this process's lock; an exclusive one first checks, and after writing
        checks again, that no other live lock exists. A shared lock (restore, verify) is
        blocked by none: it only keeps prune and backup away, so nobody who can plant a
        lock can keep the owner from reading the store."""

        def refuse(conflicts: list[str]) -> StoreLockedError:
            return StoreLockedError(
                f"the store is locked ({'; '.join(conflicts)}): another backup, prune, "
                f"forget, restore or verify is running; a lock goes stale after "
                f"{LOCK_STALE_SECONDS // 60} minutes without refresh or when its process "
                "is gone"
            )

        if exclusive and (conflicts := self._conflicts_sync(None)):
            raise refuse(conflicts)
        self._lock_doc = {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "time": time.time(),
            "exclusive": exclusive,
            "nonce": secrets.token_hex(16),
        }
        name, self._lock_data = self._write_lock_sync(self._lock_doc)
        # Two processes may both have written a lock: each one that sees the other backs off.
        if exclusive and (conflicts := self._conflicts_sync(name)):
            self._delete_sync([f"locks/{name}"])
            raise refuse(conflicts)
        self._lock_name, self._lock_time = name, time.monotonic()

    def _write_lock_sync(self, doc: dict[str, Any]) -> tuple[str, bytes]:
        """Store ``doc`` as a new lock file; its name and bytes."""
        name, data = secrets.token_hex(16), json.dumps(doc).encode()
        self.write_sync(f"locks/{name}", data)
        return name, data

    def _confirm_sync(self, name: str | None) -> None:
        """Raise :class:`StoreLockedError` unless the exclusive lock ``name`` is still in
        the store as this process wrote it (its nonce) and not stale by this process's
        own clock: another process may have removed it (stale, or by hand) and be
        pruning beside this one. The one place a holder decides its lock still holds."""
        if name is None or not self._lock_doc.get("exclusive"):
            return
        try:
            ours = self.read_sync(f"locks/{name}", 0, MAX_CONFIG_SIZE + 1) == self._lock_data
        except FileNotFoundError:
            ours = False
        if not ours or time.time() - float(self._lock_doc["time"]) > LOCK_STALE_SECONDS:
            raise StoreLockedError(
                "this process's lock on the store is gone or stale (removed by another "
                f"process, or not refreshed for {LOCK_STALE_SECONDS // 60} minutes: the "
                "machine slept or stalled): a prune may be running beside it, so nothing "
                "more is written; run it again"
            )

    async def confirm_lock(self) -> None:
        """Before an index file, a snapshot or a deletion is written: raise
        :class:`StoreLockedError` unless this process's exclusive lock still holds
        (a shared lock, or none, is not checked)."""
        await self._run(self._confirm_sync, self._lock_name)

    def _refresh_sync(self) -> None:
        """A fresh lock under a new name, then the old one confirmed (exclusive) and
        removed: a lock another process removed is never written again."""
        old, doc = self._lock_name, dict(self._lock_doc, time=time.time())
        new, data = self._write_lock_sync(doc)
        try:
            self._confirm_sync(old)
        except StoreLockedError:
            self._delete_sync([f"locks/{new}"])
            raise
        self._lock_name, self._lock_doc, self._lock_data = new, doc, data
        self._lock_time = time.monotonic()
        self._delete_sync([f"locks/{old}"])

    async def refresh_lock(self) -> None:
        """Renew the lock when it is older than five minutes (long runs). Raises
        :class:`StoreLockedError` when an exclusive lock no longer holds
        (:meth:`confirm_lock`)."""
        if self._lock_name and time.monotonic() - self._lock_time > _LOCK_REFRESH_SECONDS:
            with anyio.CancelScope(shield=True):  # a lock written is a lock recorded
                await self._run(self._refresh_sync)

    @asynccontextmanager
    async def lock(self, *, exclusive: bool) -> AsyncIterator[None]:
        """Hold a lock: exclusive for backup, prune and forget (refused beside any live
        lock), shared for reading (never refused). Taking and removing it are shielded
        from cancellation: a cancelled holder never leaves its lock behind.

        Raises :class:`StoreLockedError` when an exclusive lock meets a live one.
        """
        try:
            with anyio.CancelScope(shield=True):
                await self._run(self._acquire_sync, exclusive)
            yield
        finally:
            name, self._lock_name = self._lock_name, None
            if name is not None:
                with anyio.CancelScope(shield=True):
                    await self._run(self._delete_sync, [f"locks/{name}"])


async def make_store(
    location: str | os.PathLike[str],
    keys: BackupKeys,
    config: StoreConfig,
    files: Mapping[str, bytes],
    policy: OffloadPolicy | None,
    storage_options: dict[str, Any] | None,
) -> None:
    """Write a new store's ``files`` and then its ``config`` (the store exists from
    then on) at ``location``: the one place a store is made. Raises
    ``FileExistsError`` when a store is there."""

    def make() -> None:
        fs, root, local = open_location(location, storage_options)
        store = Store(fs, root, keys, config, policy, local=local)
        if fs.exists(store._path("config")):
            raise FileExistsError(f"{shown_location(location)!r} already holds a backup store")
        fs.makedirs(store.root, exist_ok=True)
        for rel, data in files.items():
            store.write_sync(rel, data)
        store.write_sync("config", config.encode(keys))

    await run_blocking(policy, make)


async def create_store(
    location: str | os.PathLike[str],
    key: SecretKey,
    *,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
    storage_options: dict[str, Any] | None = None,
    **params: int,
) -> None:
    """Make a new symmetric store at ``location`` for the master ``key`` (``params``:
    :class:`~streamcrypt.codecs.backup.StoreConfig` sizes). Only this call and
    :func:`~._writeonly.create_write_only` make a store: a backup into a location
    without one raises :class:`StoreNotFoundError`. Raises ``FileExistsError`` when a
    store is there."""
    keys = BackupKeys.derive(key)
    await make_store(location, keys, StoreConfig.new(keys, **params), {}, policy, storage_options)


def require_chunks(index: Index, manifest: Manifest) -> None:
    """Raise :class:`FormatError` naming the first file with a chunk missing from the index."""
    for node in manifest.files():
        for cid in node.chunks:
            if cid not in index.chunks:
                raise FormatError(
                    f"{node.path!r}: chunk {cid.hex()[:16]}... is missing from the store "
                    f"(snapshot {manifest.snapshot!r})"
                )


async def open_reader(
    location: str | os.PathLike[str],
    key: SecretKey | None,
    identities: Iterable[IdentityLike] | IdentityLike | None,
    policy: OffloadPolicy | None,
    storage_options: dict[str, Any] | None,
    action: str,
    signer: str | None = None,
    recipients: Iterable[RecipientLike] | RecipientLike = (),
) -> Store:
    """The store opened with keys that read it (the master key, or a write-only store's
    identities); a write-only store's writer key is refused (:class:`UnknownKeyError`);
    with ``signer`` and ``recipients``, see :meth:`Store.open`."""
    opened = await Store.open(
        location,
        key,
        identities=identities,
        signer=signer,
        recipients=recipients,
        policy=policy,
        storage_options=storage_options,
    )
    opened.require_reader(action)
    return opened
