"""A chunked, deduplicating, encrypted backup tool built on streamcrypt.

Run it::

    python examples/backup.py keygen backup.key
    python examples/backup.py backup  ~/Documents /mnt/store --key backup.key
    python examples/backup.py list    /mnt/store
    python examples/backup.py restore /mnt/store 2025-01-31T120000.123456Z ./restored --key backup.key

How it works
------------
**Keys.** The key file holds one 32-byte master key (64 hex digits, or 32 raw bytes).
Every key the tool uses is derived from it with HKDF-SHA256 under its own ``info`` label
(see :class:`BackupKeys`), so one key never serves two purposes: a chunk-id key (keyed
BLAKE3), a chunk-encryption key, a manifest-encryption key, a whole-file hash key, the
Ed25519 signing seed for manifests, and the gear table of the chunker. The signing key
is *derived*, not stored: whoever holds the key file can sign, and the public half is
written to ``STORE/store.json`` so a key that does not belong to the store is refused
before anything is written. Keep the key file somewhere other than the store.

**Chunking.** Each file is cut at content-defined boundaries by a gear rolling hash
(:class:`Chunker`): ``h = (h << 1) + GEAR[byte] mod 2**64``; a boundary falls after a byte
where ``h < 2**(64 - AVG_BITS)``, i.e. where the top ``AVG_BITS`` bits are zero, which
happens once every ``2**AVG_BITS`` bytes on average. The shift pushes old bytes out of
the top of ``h`` after 64 steps, so a boundary depends only on the 64 bytes before it,
and an edit moves only the boundaries near it: the chunks after it are the same as
before and are not stored again. Chunks are at least ``MIN_CHUNK`` (32 KiB) and at most
``MAX_CHUNK`` (256 KiB) long; no boundary is looked for below the minimum, so the
average is about ``MIN_CHUNK + 2**AVG_BITS`` = 64 KiB. The gear table comes from the
master key, so the boundaries (visible as chunk sizes in the store) cannot be
predicted from a known file by someone without the key.

**Chunk store.** A chunk's id is its keyed BLAKE3 hash (32 bytes, 64 hex digits); the
chunk is stored once, at ``STORE/chunks/<first 2 hex>/<id>``, encrypted as a native
streamcrypt container with the id as associated data, so a chunk file moved to another
id's place fails authentication. Chunk files are written to a temporary name and renamed.

**Snapshots.** A manifest (JSON: directories, and files with their size, mode, mtime,
keyed BLAKE3 hash and ordered chunk ids) is encrypted (native container, associated data
naming the snapshot) and then signed with Ed25519 over the snapshot name and the
ciphertext. ``STORE/snapshots/<name>`` holds the 64-byte signature followed by the
encrypted manifest.

**Restore** checks everything before the result appears: the signature, the manifest's
authentication, each chunk's authentication and id (recomputed from the plaintext), and
each file's hash. Files are written into a hidden staging directory beside ``DEST_DIR``
that is renamed to ``DEST_DIR`` only when every check passed; on any failure the staging
directory is removed and ``DEST_DIR`` is never created. Errors are streamcrypt's typed
errors: :class:`~streamcrypt.errors.InvalidSignatureError` (a manifest changed, or the
wrong key), :class:`~streamcrypt.errors.AuthenticationError` (a chunk changed or moved, a
file hash differs), :class:`~streamcrypt.errors.FormatError` (a malformed manifest, a
chunk missing from the store), :class:`~streamcrypt.errors.UnknownKeyError` (the key does
not belong to this store).

Not handled, to keep the example short: symbolic links and special files (skipped and
reported), hard links, extended attributes, ownership, locking against two concurrent
backups into one store, and garbage collection of chunks no snapshot uses.
"""

from __future__ import annotations

import argparse
import binascii
import functools
import json
import os
import secrets
import shutil
import stat
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

import anyio

import streamcrypt
from streamcrypt.errors import (
    AuthenticationError,
    FormatError,
    InvalidParameterError,
    InvalidSignatureError,
    StreamCryptError,
    UnknownKeyError,
)
from streamcrypt.keys import SecretKey, constant_time_equal, hkdf
from streamcrypt.primitives import (
    ED25519_SIGNATURE_SIZE,
    Blake3Tap,
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

__all__ = [
    "AVG_BITS",
    "MAX_CHUNK",
    "MIN_CHUNK",
    "BackupKeys",
    "BackupReport",
    "Chunker",
    "RestoreReport",
    "backup",
    "chunk_path",
    "list_snapshots",
    "load_key",
    "main",
    "restore",
    "write_key",
]

# -- parameters ------------------------------------------------------------------------------

#: No boundary is looked for before a chunk is this long.
MIN_CHUNK = 32 * 1024
#: A boundary is forced when a chunk reaches this length.
MAX_CHUNK = 256 * 1024
#: A boundary falls once every 2**AVG_BITS bytes on average after MIN_CHUNK: chunks
#: average about MIN_CHUNK + 2**AVG_BITS = 64 KiB.
AVG_BITS = 15
#: Bytes of history a gear hash depends on (the width of ``h``).
_WINDOW = 64
_MASK64 = (1 << 64) - 1
#: Bytes read from a source file per worker-thread call.
_READ_SIZE = 1 << 20

_FORMAT = "streamcrypt-backup"
_VERSION = 1
_LABEL = b"streamcrypt-backup v1 "
_MANIFEST_AAD = b"streamcrypt-backup v1 manifest\x00"
_SIGNED_CONTEXT = b"streamcrypt-backup v1 snapshot\x00"
_ID_HEX = 64


# -- keys --------------------------------------------------------------------------------------


def load_key(path: str | os.PathLike[str]) -> SecretKey:
    """Read a 32-byte master key: 64 hex digits (whitespace ignored) or 32 raw bytes.

    Raises :class:`InvalidParameterError` for anything else.
    """
    data = Path(path).read_bytes()
    if len(data) == 32:
        return SecretKey(data)
    try:
        raw = binascii.unhexlify(b"".join(data.split()))
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != 32:
        raise InvalidParameterError(
            f"{os.fspath(path)!r} is not a backup key: expected 64 hex digits or 32 raw bytes"
        )
    return SecretKey(raw)


def write_key(path: str | os.PathLike[str]) -> None:
    """Write a fresh master key as hex, readable by the owner only; never overwrites."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(SecretKey.generate(32).secret_bytes().hex() + "\n")


@dataclass(frozen=True, slots=True, repr=False)
class BackupKeys:
    """The keys derived from the master key, one HKDF ``info`` label each."""

    chunk_id: SecretKey
    chunk: SecretKey
    manifest: SecretKey
    file_hash: SecretKey
    signing: Ed25519PrivateKey
    gear: tuple[int, ...] = field(repr=False)

    @classmethod
    def derive(cls, master: SecretKey) -> BackupKeys:
        def sub(label: str, length: int = 32) -> bytes:
            return hkdf(master.secret_bytes(), info=_LABEL + label.encode(), length=length)

        table = sub("chunker gear", 256 * 8)
        gear = tuple(int.from_bytes(table[i : i + 8], "big") for i in range(0, len(table), 8))
        return cls(
            chunk_id=SecretKey(sub("chunk id")),
            chunk=SecretKey(sub("chunk encryption")),
            manifest=SecretKey(sub("manifest encryption")),
            file_hash=SecretKey(sub("file hash")),
            signing=Ed25519PrivateKey(sub("manifest signing")),
            gear=gear,
        )

    def __repr__(self) -> str:
        return f"BackupKeys(<hidden>, signer={self.signing.public_bytes().hex()})"


def _keyed_blake3(key: SecretKey, data: bytes) -> bytes:
    tap = Blake3Tap(key=key, max_threads=1)
    tap.update(data)
    tap.finalize()
    return tap.digest()


# -- content-defined chunking (sans-I/O) ---------------------------------------------------------


class Chunker:
    """Cut a byte stream into content-defined chunks with a gear rolling hash.

    Sans-I/O, in the library's style: ``update(data)`` returns the chunks completed so
    far (a list of ``bytes``, possibly empty), ``finalize()`` the rest (the last chunk may
    be shorter than ``min_size``; an empty input gives no chunk).
    """

    def __init__(
        self,
        gear: Sequence[int],
        *,
        min_size: int = MIN_CHUNK,
        max_size: int = MAX_CHUNK,
        avg_bits: int = AVG_BITS,
    ) -> None:
        if len(gear) != 256:
            raise InvalidParameterError("the gear table needs 256 entries")
        if not _WINDOW <= min_size <= max_size:
            raise InvalidParameterError(f"need {_WINDOW} <= min_size <= max_size")
        self._gear = tuple(gear)
        self._min = min_size
        self._max = max_size
        self._threshold = 1 << (64 - avg_bits)
        self._buf = bytearray()
        self._pos = min_size - _WINDOW  # where the hash resumes in the current chunk
        self._hash = 0

    def _find_cut(self) -> int | None:
        """Length of the chunk at the front of the buffer, or None if more data is needed."""
        buf = memoryview(self._buf)
        end = min(len(buf), self._max)
        start, h = self._pos, self._hash
        if start >= end:
            return self._max if end == self._max else None
        gear, threshold, min_size = self._gear, self._threshold, self._min
        pos = start
        for byte in buf[start:end]:
            h = ((h << 1) + gear[byte]) & _MASK64
            pos += 1
            if h < threshold and pos >= min_size:
                return pos
        if end == self._max:
            return self._max
        self._pos, self._hash = end, h
        return None

    def _take(self, size: int) -> bytes:
        chunk = bytes(self._buf[:size])
        del self._buf[:size]
        self._pos, self._hash = self._min - _WINDOW, 0
        return chunk

    def update(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        self._buf += data
        chunks = []
        while (size := self._find_cut()) is not None:
            chunks.append(self._take(size))
        return chunks

    def finalize(self) -> list[bytes]:
        chunks = self.update(b"")
        if self._buf:
            chunks.append(self._take(len(self._buf)))
        return chunks


# -- the store ------------------------------------------------------------------------------------


def chunk_path(store: str | os.PathLike[str], chunk_id: str) -> Path:
    """Where the chunk with this hex id lives in the store."""
    return Path(store, "chunks", chunk_id[:2], chunk_id)


def _snapshot_path(store: str | os.PathLike[str], name: str) -> Path:
    if not name or name.startswith(".") or "/" in name or os.sep in name:
        raise InvalidParameterError(f"{name!r} is not a snapshot name")
    return Path(store, "snapshots", name)


def list_snapshots(store: str | os.PathLike[str]) -> list[str]:
    """Snapshot names in the store, oldest first (names sort by time)."""
    folder = Path(store, "snapshots")
    if not folder.is_dir():
        return []
    return sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))


def _atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary beside it and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _open_store(store: Path, keys: BackupKeys, *, create: bool) -> None:
    """Check (or create) ``store.json``: the store's signer must be this key's."""
    config = store / "store.json"
    signer = keys.signing.public_bytes().hex()
    if not config.exists():
        if not create:
            raise FileNotFoundError(f"{os.fspath(store)!r} is not a backup store (no store.json)")
        doc = {
            "format": _FORMAT,
            "version": _VERSION,
            "signer": signer,
            "chunking": {"gear": "hkdf", "min": MIN_CHUNK, "avg_bits": AVG_BITS, "max": MAX_CHUNK},
        }
        _atomic_write(config, json.dumps(doc, indent=2).encode() + b"\n")
        return
    try:
        doc = json.loads(config.read_bytes())
        stored = doc["signer"]
    except (ValueError, KeyError, TypeError):
        raise FormatError(f"{os.fspath(config)!r} is malformed") from None
    if stored != signer:
        raise UnknownKeyError(
            "this key does not belong to the store (store.json names another signer): "
            "check the --key file"
        )


# -- backup ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BackupReport:
    """What a backup did: ``chunks_new`` chunk files written, ``chunks_reused`` found."""

    snapshot: str
    files: int
    dirs: int
    bytes_read: int
    chunks: int
    chunks_new: int
    chunks_reused: int
    bytes_new: int
    bytes_stored: int
    skipped: tuple[str, ...]

    def summary(self) -> str:
        return (
            f"snapshot {self.snapshot}: {self.files} files, {self.dirs} dirs, "
            f"{self.bytes_read:,} bytes; {self.chunks} chunks: {self.chunks_new} stored "
            f"({self.bytes_new:,} bytes, {self.bytes_stored:,} encrypted), "
            f"{self.chunks_reused} reused"
            + (f"; skipped {len(self.skipped)} (links, special files)" if self.skipped else "")
        )


@dataclass(frozen=True, slots=True)
class _Tree:
    dirs: list[tuple[str, Path]]
    files: list[tuple[str, Path]]
    skipped: list[str]


def _scan_tree(src: Path, store: Path) -> _Tree:
    """Walk ``src`` in sorted order: directories, regular files, and what is skipped."""
    tree = _Tree([], [], [])
    store_real = store.resolve()
    for top, dirnames, filenames in os.walk(src):
        top_path = Path(top)
        dirnames.sort()
        for name in list(dirnames):
            path = top_path / name
            if path.is_symlink() or path.resolve() == store_real:
                dirnames.remove(name)
                if path.is_symlink():
                    tree.skipped.append(path.relative_to(src).as_posix())
                continue
            tree.dirs.append((path.relative_to(src).as_posix(), path))
        for name in sorted(filenames):
            path = top_path / name
            rel = path.relative_to(src).as_posix()
            if stat.S_ISREG(path.lstat().st_mode):
                tree.files.append((rel, path))
            else:
                tree.skipped.append(rel)
    return tree


class _Backup:
    """One backup run: the keys, the store, and the counters for the report."""

    def __init__(self, store: Path, keys: BackupKeys) -> None:
        self.store = store
        self.keys = keys
        self.seen: set[str] = set()
        self.chunks = self.new = self.reused = self.bytes_new = self.bytes_stored = 0

    def _chunk_ids(self, chunker: Chunker, block: bytes | None) -> list[tuple[str, bytes]]:
        """Cut a block (``None``: the end of the file) and hash each chunk (worker thread)."""
        pieces = chunker.finalize() if block is None else chunker.update(block)
        return [(_keyed_blake3(self.keys.chunk_id, p).hex(), p) for p in pieces]

    async def _store(self, chunk_id: str, piece: bytes) -> None:
        self.chunks += 1
        path = chunk_path(self.store, chunk_id)
        if chunk_id in self.seen or await anyio.Path(path).exists():
            self.reused += 1
        else:
            # Chunks are at most 256 KiB: the one-shot call seals them at once, inline.
            sealed = streamcrypt.encrypt_bytes(
                piece, self.keys.chunk, aad=bytes.fromhex(chunk_id), policy=None
            )
            await anyio.to_thread.run_sync(_atomic_write, path, sealed)
            self.new += 1
            self.bytes_new += len(piece)
            self.bytes_stored += len(sealed)
        self.seen.add(chunk_id)

    async def file(self, rel: str, path: Path) -> dict[str, Any]:
        chunker = Chunker(self.keys.gear)
        file_hash = Blake3Tap(key=self.keys.file_hash)
        ids: list[str] = []
        size = 0
        async with await anyio.open_file(path, "rb") as f:
            st = os.fstat(f.wrapped.fileno())
            while True:
                block = await f.read(_READ_SIZE)
                file_hash.update(block)
                size += len(block)
                found = await anyio.to_thread.run_sync(self._chunk_ids, chunker, block or None)
                for chunk_id, piece in found:
                    await self._store(chunk_id, piece)
                    ids.append(chunk_id)
                if not block:
                    break
        file_hash.finalize()
        return {
            "path": rel,
            "size": size,
            "mode": stat.S_IMODE(st.st_mode),
            "mtime_ns": st.st_mtime_ns,
            "blake3": file_hash.hexdigest(),
            "chunks": ids,
        }


def _default_name() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H%M%S.%fZ")


async def backup(
    src: str | os.PathLike[str],
    store: str | os.PathLike[str],
    master: SecretKey,
    *,
    name: str | None = None,
) -> BackupReport:
    """Back up the tree ``src`` into ``store`` as a new snapshot; returns the report.

    Raises :class:`UnknownKeyError` when the store belongs to another key,
    :class:`InvalidParameterError` for a bad or existing snapshot name, ``OSError``.
    """
    src_path = Path(await anyio.Path(src).absolute())
    store_path = Path(store)
    keys = BackupKeys.derive(master)
    name = name or _default_name()

    def prepare() -> _Tree:
        if _snapshot_path(store_path, name).exists():
            raise InvalidParameterError(f"snapshot {name!r} already exists in the store")
        if not src_path.is_dir():
            raise NotADirectoryError(f"{os.fspath(src)!r} is not a directory")
        _open_store(store_path, keys, create=True)
        return _scan_tree(src_path, store_path)

    tree = await anyio.to_thread.run_sync(prepare)

    run = _Backup(store_path, keys)
    files = []
    for rel, path in tree.files:
        files.append(await run.file(rel, path))
    dirs = [{"path": rel, "mode": stat.S_IMODE(path.stat().st_mode)} for rel, path in tree.dirs]
    manifest = {
        "format": _FORMAT,
        "version": _VERSION,
        "snapshot": name,
        "created": datetime.now(UTC).isoformat(),
        "source": os.fspath(src_path),
        "dirs": dirs,
        "files": files,
    }
    await anyio.to_thread.run_sync(_write_snapshot, store_path, name, keys, manifest)
    return BackupReport(
        snapshot=name,
        files=len(files),
        dirs=len(dirs),
        bytes_read=sum(f["size"] for f in files),
        chunks=run.chunks,
        chunks_new=run.new,
        chunks_reused=run.reused,
        bytes_new=run.bytes_new,
        bytes_stored=run.bytes_stored,
        skipped=tuple(tree.skipped),
    )


def _signed_message(name: str, ciphertext: bytes) -> bytes:
    return _SIGNED_CONTEXT + name.encode() + b"\x00" + ciphertext


def _write_snapshot(store: Path, name: str, keys: BackupKeys, manifest: dict[str, Any]) -> None:
    """Encrypt the manifest, sign the ciphertext, write signature || ciphertext."""
    plaintext = json.dumps(manifest, separators=(",", ":"), sort_keys=True).encode()
    ciphertext = streamcrypt.encrypt_bytes(
        plaintext, keys.manifest, aad=_MANIFEST_AAD + name.encode()
    )
    signature = keys.signing.sign(_signed_message(name, ciphertext))
    _atomic_write(_snapshot_path(store, name), signature + ciphertext)


# -- restore --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _FileEntry:
    path: str
    size: int
    mode: int
    mtime_ns: int
    blake3: str
    chunks: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _Manifest:
    snapshot: str
    dirs: tuple[tuple[str, int], ...]
    files: tuple[_FileEntry, ...]


@dataclass(frozen=True, slots=True)
class RestoreReport:
    """What a restore wrote (after every check passed)."""

    snapshot: str
    files: int
    dirs: int
    bytes_written: int
    chunks_verified: int

    def summary(self) -> str:
        return (
            f"snapshot {self.snapshot}: restored {self.files} files and {self.dirs} dirs, "
            f"{self.bytes_written:,} bytes; {self.chunks_verified} chunks verified"
        )


def _safe_relpath(value: object) -> str:
    """A relative POSIX path with no ``..``, ``.`` or empty parts; else FormatError."""
    if not isinstance(value, str) or not value:
        raise FormatError("the manifest holds an empty or non-text path")
    parts = PurePosixPath(value).parts
    if value.startswith("/") or "\x00" in value or any(p in ("..", ".") for p in parts):
        raise FormatError("the manifest holds a path that leaves the restore directory")
    return value


def _int(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise FormatError("the manifest holds a bad number")
    return value


def _chunk_id(value: object) -> str:
    if not isinstance(value, str) or len(value) != _ID_HEX or value.strip("0123456789abcdef") != "":
        raise FormatError("the manifest holds a malformed chunk id")
    return value


def _parse_manifest(plaintext: bytes, name: str) -> _Manifest:
    try:
        doc = json.loads(plaintext)
        if doc["format"] != _FORMAT or doc["version"] != _VERSION or doc["snapshot"] != name:
            raise FormatError("the manifest is not a version-1 manifest of this snapshot")
        dirs = tuple((_safe_relpath(d["path"]), _int(d["mode"]) & 0o7777) for d in doc["dirs"])
        files = tuple(
            _FileEntry(
                path=_safe_relpath(f["path"]),
                size=_int(f["size"]),
                mode=_int(f["mode"]) & 0o7777,
                mtime_ns=_int(f["mtime_ns"]),
                blake3=_chunk_id(f["blake3"]),
                chunks=tuple(_chunk_id(c) for c in f["chunks"]),
            )
            for f in doc["files"]
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise FormatError(f"the manifest is malformed ({type(exc).__name__})") from None
    return _Manifest(name, dirs, files)


def _load_manifest(store: Path, name: str, keys: BackupKeys) -> _Manifest:
    """Verify the signature, decrypt and parse a snapshot's manifest."""
    blob = _snapshot_path(store, name).read_bytes()
    signature, ciphertext = blob[:ED25519_SIGNATURE_SIZE], blob[ED25519_SIGNATURE_SIZE:]
    try:
        keys.signing.public_key().verify(_signed_message(name, ciphertext), signature)
    except InvalidSignatureError:
        raise InvalidSignatureError(
            f"snapshot {name!r}: the manifest signature does not verify: the snapshot "
            "file was altered or renamed, or this is not the store's key"
        ) from None
    plaintext = streamcrypt.decrypt_bytes(
        ciphertext, keys.manifest, aad=_MANIFEST_AAD + name.encode()
    )
    return _parse_manifest(plaintext, name)


def verify_signature(
    store: str | os.PathLike[str], name: str, public_key: Ed25519PublicKey | bytes
) -> None:
    """Check a snapshot's signature with the public key alone (no master key needed).

    Raises :class:`InvalidSignatureError`.
    """
    key = public_key if isinstance(public_key, Ed25519PublicKey) else Ed25519PublicKey(public_key)
    blob = _snapshot_path(store, name).read_bytes()
    key.verify(_signed_message(name, blob[ED25519_SIGNATURE_SIZE:]), blob[:ED25519_SIGNATURE_SIZE])


async def _restore_file(store: Path, keys: BackupKeys, entry: _FileEntry, target: Path) -> int:
    """Write one file from its chunks, verifying each chunk and the whole file."""
    file_hash = Blake3Tap(key=keys.file_hash)
    written = 0
    async with await anyio.open_file(target, "wb") as out:
        for chunk_id in entry.chunks:
            try:
                sealed = await anyio.Path(chunk_path(store, chunk_id)).read_bytes()
            except FileNotFoundError:
                raise FormatError(
                    f"chunk {chunk_id[:16]}... of {entry.path!r} is missing from the store"
                ) from None
            # AuthenticationError here: the chunk file was altered, or moved from another id.
            plain = streamcrypt.decrypt_bytes(
                sealed, keys.chunk, aad=bytes.fromhex(chunk_id), policy=None
            )
            if not constant_time_equal(
                _keyed_blake3(keys.chunk_id, plain), bytes.fromhex(chunk_id)
            ):
                raise AuthenticationError(
                    f"chunk {chunk_id[:16]}... does not hash to its id: the store is corrupt"
                )
            file_hash.update(plain)
            await out.write(plain)
            written += len(plain)
    file_hash.finalize()
    if written != entry.size or not constant_time_equal(
        file_hash.digest(), bytes.fromhex(entry.blake3)
    ):
        raise AuthenticationError(
            f"{entry.path!r}: the restored file does not match the hash in the manifest"
        )
    os.chmod(target, entry.mode)
    os.utime(target, ns=(entry.mtime_ns, entry.mtime_ns))
    return written


async def restore(
    store: str | os.PathLike[str],
    name: str,
    dest: str | os.PathLike[str],
    master: SecretKey,
) -> RestoreReport:
    """Restore snapshot ``name`` into the new directory ``dest``, verifying everything.

    ``dest`` appears only once every check passed; on failure nothing is left behind.
    Raises :class:`InvalidSignatureError`, :class:`AuthenticationError`,
    :class:`FormatError` (see the module docstring), ``FileExistsError`` when ``dest``
    exists, ``OSError``.
    """
    store_path, dest_path = Path(store), Path(dest)
    keys = BackupKeys.derive(master)
    if await anyio.Path(dest_path).exists() or await anyio.Path(dest_path).is_symlink():
        raise FileExistsError(f"{os.fspath(dest)!r} exists; restore into a new directory")
    manifest = await anyio.to_thread.run_sync(_load_manifest, store_path, name, keys)

    staging = dest_path.with_name(f".{dest_path.name}.restore-{secrets.token_hex(8)}")
    await anyio.Path(staging).mkdir(parents=False)
    try:
        for rel, _mode in manifest.dirs:
            await anyio.Path(staging, rel).mkdir(parents=True, exist_ok=True)
        written = chunks = 0
        for entry in manifest.files:
            target = staging / entry.path
            await anyio.Path(target.parent).mkdir(parents=True, exist_ok=True)
            written += await _restore_file(store_path, keys, entry, target)
            chunks += len(entry.chunks)
        for rel, mode in sorted(manifest.dirs, key=lambda d: d[0].count("/"), reverse=True):
            os.chmod(staging / rel, mode)  # deepest first, after the files are in
        await anyio.Path(staging).rename(dest_path)
    except BaseException:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(lambda: shutil.rmtree(staging, ignore_errors=True))
        raise
    return RestoreReport(name, len(manifest.files), len(manifest.dirs), written, chunks)


# -- the command line -----------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="backup.py", description="Chunked, deduplicating, encrypted backups."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("keygen", help="write a new master key file")
    p.add_argument("keyfile")
    p = sub.add_parser("backup", help="back up SRC_DIR into STORE_DIR as a new snapshot")
    p.add_argument("src")
    p.add_argument("store")
    p.add_argument("--key", required=True, help="master key file")
    p.add_argument("--name", help="snapshot name (default: the UTC time)")
    p = sub.add_parser("restore", help="restore SNAPSHOT into the new directory DEST_DIR")
    p.add_argument("store")
    p.add_argument("snapshot", help="a snapshot name, or 'latest'")
    p.add_argument("dest")
    p.add_argument("--key", required=True, help="master key file")
    p = sub.add_parser("list", help="list the snapshots in STORE_DIR")
    p.add_argument("store")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 1 failed, 2 usage)."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "keygen":
            write_key(args.keyfile)
            print(f"wrote a new master key to {args.keyfile}; keep it apart from the store")
        elif args.command == "list":
            for name in list_snapshots(args.store):
                print(name)
        elif args.command == "backup":
            run = functools.partial(backup, name=args.name)
            report = anyio.run(run, args.src, args.store, load_key(args.key))
            print(report.summary())
        else:
            name = args.snapshot
            if name == "latest":
                names = list_snapshots(args.store)
                if not names:
                    raise FileNotFoundError(f"no snapshots in {args.store!r}")
                name = names[-1]
            restored = anyio.run(restore, args.store, name, args.dest, load_key(args.key))
            print(restored.summary())
    except (StreamCryptError, OSError) as exc:
        print(f"backup.py: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
