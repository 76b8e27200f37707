"""Objects through fsspec: listing a prefix, temporaries beside a destination, commits.

Every output is written to a temporary beside its destination,
``.<name>.streamcrypt-<run><attempt>.tmp`` (8 hex digits of run id, 8 random hex digits
per attempt, the shape :func:`streamcrypt.transports.remove_stale_temporaries` knows),
and moved over the destination only once it is complete: locally a rename (after an
fsync of the file; the directory is fsynced after), on object stores the backend's move.
A destination is therefore either untouched or whole. Two attempts of one task (a worker
presumed dead that was not) never share a temporary. When a run ends, the coordinator
removes the temporaries of that run left by workers that died mid-task.
"""

from __future__ import annotations

import os
import posixpath
import re
import secrets
from collections.abc import Mapping, Sequence
from typing import Any

import fsspec
from fsspec.implementations.local import LocalFileSystem

from ..errors import InvalidParameterError
from ..paths import local_path, object_key
from ..transports import fsync_directory

_TEMP = re.compile(r"^\..+\.streamcrypt-[0-9a-f]{16}\.tmp$")

#: One object to process: source URL, its name under the destination prefix (None for
#: verify), size in bytes.
ObjectPair = tuple[str, str | None, int]


def new_run_id() -> str:
    return secrets.token_hex(4)


def open_fs(url: str, storage_options: Mapping[str, Any]) -> tuple[Any, str]:
    """The fsspec filesystem and path of ``url``."""
    fs, path = fsspec.core.url_to_fs(url, **dict(storage_options))
    return fs, path


def is_local(fs: Any) -> bool:
    return isinstance(fs, LocalFileSystem)


def destination(prefix: str, name: str, storage_options: Mapping[str, Any]) -> tuple[Any, str]:
    """The file system and path of the object ``name`` under the destination prefix URL
    ``prefix``: through :func:`streamcrypt.paths.local_path` on a local disk (no symbolic
    link out of the prefix), :func:`streamcrypt.paths.object_key` elsewhere.

    Raises :class:`UnsafePathError` for a name that would leave the prefix.
    """
    fs, root = open_fs(prefix, storage_options)
    what = "the object name"
    if is_local(fs):
        return fs, local_path(root, name, what=what)
    return fs, object_key(root, name, what=what)


def temporary_path(fs: Any, dest: str, run_id: str) -> str:
    """A fresh temporary path beside ``dest`` for one attempt of this run."""
    parent, name = posixpath.split(dest)
    tmp = f".{name}.streamcrypt-{run_id}{secrets.token_hex(4)}.tmp"
    return posixpath.join(parent, tmp) if parent else tmp


def commit(fs: Any, tmp: str, dest: str) -> None:
    """Move the complete temporary over ``dest`` (atomic rename on a local disk)."""
    if is_local(fs):
        os.replace(tmp, dest)
        fsync_directory(os.path.dirname(os.path.abspath(dest)))
    else:
        fs.mv(tmp, dest)


def discard(fs: Any, tmp: str) -> None:
    try:
        fs.rm(tmp)
    except FileNotFoundError:
        pass


def expand(
    src: str | Sequence[str],
    dst: str | None,
    storage_options: Mapping[str, Any],
    *,
    suffix: str = "",
    strip_suffix: str = "",
) -> list[ObjectPair]:
    """The objects under prefix ``src`` (or the list of URLs ``src``) with their names
    under prefix ``dst``: the same relative names, ``strip_suffix`` removed and ``suffix``
    added. Temporaries of streamcrypt are skipped.

    Raises :class:`UnsafePathError` for a source whose name would leave ``dst`` (``..``,
    an empty component, a symbolic link out of a local ``dst``: checked here, before any
    task, and again on the worker), :class:`InvalidParameterError` for an empty set or two
    sources that would land on one destination, ``FileNotFoundError`` for a missing source.
    """
    pairs: list[tuple[str, str, int]] = []  # url, relative name, size
    if isinstance(src, str):
        fs, root = open_fs(src, storage_options)
        if fs.isfile(root):
            info = fs.info(root)
            pairs.append((fs.unstrip_protocol(root), posixpath.basename(root), info["size"]))
        else:
            found = fs.find(root, detail=True)
            if not found and not fs.exists(root):
                raise FileNotFoundError(f"no such prefix: {src}")
            base = root.rstrip("/") + "/"
            for path, info in sorted(found.items()):
                if _TEMP.match(posixpath.basename(path)):
                    continue
                if not path.startswith(base):
                    raise InvalidParameterError(f"{src!r} lists {path!r}, not under it")
                # the key as listed, never normalised: "x/../../y" stays itself (and is refused)
                rel = path[len(base) :]
                pairs.append((fs.unstrip_protocol(path), rel, info["size"]))
    else:
        for url in src:
            fs, path = open_fs(url, storage_options)
            pairs.append((url, posixpath.basename(path), fs.info(path)["size"]))
    if not pairs:
        raise InvalidParameterError(f"no objects to process under {src!r}")
    if dst is None:
        return [(url, None, size) for url, _, size in pairs]
    out: list[ObjectPair] = []
    seen: set[str] = set()
    for url, rel, size in pairs:
        if strip_suffix and rel.endswith(strip_suffix):
            rel = rel[: -len(strip_suffix)]
        name = rel + suffix
        _, target = destination(dst, name, storage_options)
        if target in seen:
            raise InvalidParameterError(f"two sources would be written to {target}")
        seen.add(target)
        out.append((url, name, size))
    return out


def remove_run_temporaries(
    dests: Sequence[str], run_id: str, storage_options: Mapping[str, Any]
) -> int:
    """Remove this run's temporaries beside ``dests`` (left by workers that died); how many."""
    pattern = re.compile(rf"^\..+\.streamcrypt-{re.escape(run_id)}[0-9a-f]{{8}}\.tmp$")
    parents: dict[str, Any] = {}
    for url in dests:
        fs, path = open_fs(url, storage_options)
        parents.setdefault(posixpath.dirname(path), fs)
    removed = 0
    for parent, fs in parents.items():
        try:
            names = fs.ls(parent, detail=False)
        except FileNotFoundError:
            continue
        for name in names:
            if pattern.match(posixpath.basename(name)):
                discard(fs, name)
                removed += 1
    return removed
