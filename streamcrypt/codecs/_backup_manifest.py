"""The manifest of a backup snapshot: its nodes (files, directories, symbolic links) and
their JSON encoding, checked on the way in (paths through :func:`streamcrypt.paths.name_parts`,
numbers, chunk ids). :mod:`streamcrypt.codecs.backup` seals and opens it as a snapshot."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import zstandard

from ..errors import FormatError, UnsafePathError
from ..keys import load_json
from ..paths import name_parts

FORMAT = "streamcrypt-backup"
VERSION = 1
#: Bytes of a blob or object id (keyed BLAKE3).
ID_SIZE = 32

_KINDS = ("file", "dir", "symlink")


@dataclass(frozen=True, slots=True)
class Node:
    """One entry of a snapshot: a file, a directory or a symbolic link.

    ``ctime_ns`` and ``inode`` serve the metadata cache of the next backup (a file whose
    size, times and inode are unchanged is not read again).
    """

    kind: str
    path: str
    mode: int
    mtime_ns: int
    size: int = 0
    chunks: tuple[bytes, ...] = ()
    target: str = ""
    ctime_ns: int = 0
    inode: int = 0

    def to_json(self) -> list[Any]:
        if self.kind == "file":
            return [
                "f",
                self.path,
                self.mode,
                self.mtime_ns,
                self.size,
                self.ctime_ns,
                self.inode,
                [c.hex() for c in self.chunks],
            ]
        if self.kind == "dir":
            return ["d", self.path, self.mode, self.mtime_ns]
        return ["l", self.path, self.mode, self.mtime_ns, self.target]


def _safe_path(value: object) -> str:
    """A manifest path that :func:`streamcrypt.paths.name_parts` takes (restore maps it
    again, with the local rules, through :func:`streamcrypt.paths.local_paths`)."""
    if not isinstance(value, str):
        raise FormatError("the manifest holds a path that is not text")
    try:
        name_parts(value, what="a manifest path", local=False)
    except UnsafePathError as exc:
        raise FormatError(f"the manifest is unsafe: {exc}") from None
    return value


def _uint(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise FormatError("the manifest holds a bad number")
    return value


def _chunk_id(value: object) -> bytes:
    if not isinstance(value, str) or len(value) != 2 * ID_SIZE:
        raise FormatError("the manifest holds a malformed chunk id")
    try:
        return bytes.fromhex(value)
    except ValueError:
        raise FormatError("the manifest holds a malformed chunk id") from None


def _node(item: object) -> Node:
    if not isinstance(item, list) or not item:
        raise FormatError("the manifest holds a malformed entry")
    tag = item[0]
    if tag == "f" and len(item) == 8:
        _, path, mode, mtime, size, ctime, inode, chunks = item
        if not isinstance(chunks, list):
            raise FormatError("the manifest holds a malformed chunk list")
        return Node(
            "file",
            _safe_path(path),
            _uint(mode) & 0o7777,
            _uint(mtime),
            _uint(size),
            tuple(_chunk_id(c) for c in chunks),
            ctime_ns=_uint(ctime),
            inode=_uint(inode),
        )
    if tag == "d" and len(item) == 4:
        return Node("dir", _safe_path(item[1]), _uint(item[2]) & 0o7777, _uint(item[3]))
    if tag == "l" and len(item) == 5 and isinstance(item[4], str) and item[4]:
        return Node("symlink", _safe_path(item[1]), _uint(item[2]), _uint(item[3]), target=item[4])
    raise FormatError("the manifest holds an entry of unknown kind")


@dataclass(frozen=True, slots=True)
class Manifest:
    """What one snapshot holds: its nodes (sorted by path) and where they came from."""

    snapshot: str
    created: str
    source: str
    host: str
    nodes: tuple[Node, ...]

    def files(self) -> Iterable[Node]:
        return (n for n in self.nodes if n.kind == "file")

    def encode(self) -> bytes:
        doc = {
            "format": FORMAT,
            "version": VERSION,
            "snapshot": self.snapshot,
            "created": self.created,
            "source": self.source,
            "host": self.host,
            "nodes": [n.to_json() for n in self.nodes],
        }
        return json.dumps(doc, separators=(",", ":")).encode()

    def pack(self) -> bytes:
        """zstd of :meth:`encode`: what a snapshot file seals (and a write-only store's
        writer, the same bytes, in its cache)."""
        return zstandard.ZstdCompressor(level=9).compress(self.encode())

    @classmethod
    def decode(cls, data: bytes, name: str) -> Manifest:
        """Parse a manifest; raises :class:`FormatError` for anything unexpected."""
        doc = load_json(data, "the manifest")
        try:
            if doc["format"] != FORMAT or doc["version"] != VERSION:
                raise FormatError("not a version-1 backup manifest")
            if doc["snapshot"] != name:
                raise FormatError("the manifest belongs to another snapshot")
            nodes = tuple(_node(item) for item in doc["nodes"])
            return cls(name, str(doc["created"]), str(doc["source"]), str(doc["host"]), nodes)
        except (ValueError, KeyError, TypeError) as exc:
            raise FormatError(f"the manifest is malformed ({type(exc).__name__})") from None
