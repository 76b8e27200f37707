"""Walking the source tree: what a backup stores, in path order (blocking; run on a worker)."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class ScanEntry:
    """One file, directory or symbolic link found under the source (``lstat`` result)."""

    path: str  # relative, '/'-separated
    full: str
    kind: str  # "file", "dir", "symlink"
    st: os.stat_result
    target: str = ""


@dataclass(slots=True)
class TreeScan:
    entries: list[ScanEntry] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # sockets, fifos, devices, unreadable

    @property
    def total_bytes(self) -> int:
        return sum(e.st.st_size for e in self.entries if e.kind == "file")


#: How a directory is opened for listing: never through a symbolic link (one swapped in
#: for a directory during the scan would list what lies outside the source).
_DIR_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_DIRECTORY", 0)
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
)
#: Whether directories can be listed through descriptors here (POSIX; not Windows).
_BY_DESCRIPTOR = os.scandir in os.supports_fd and os.open in os.supports_dir_fd


def scan_tree(source: str, exclude: str | None = None) -> TreeScan:
    """Every entry under ``source`` (not following links), sorted by path; ``exclude``
    (a real path, e.g. a store inside the source) is left out with everything below it.

    Each directory is opened relative to its parent's descriptor with ``O_NOFOLLOW`` and
    must be the directory its ``lstat`` saw (device, inode): one replaced during the scan
    (by a link, or another directory) is skipped, so the scan never lists what lies
    outside ``source``."""
    scan = TreeScan()
    exclude_real = os.path.realpath(exclude) if exclude else None

    def walk(path: str, prefix: str, parent_fd: int | None, seen: os.stat_result | None) -> None:
        try:
            if not _BY_DESCRIPTOR:
                fd = None
            elif parent_fd is None:  # the source itself: the caller's choice, links and all
                fd = os.open(path, _DIR_FLAGS & ~getattr(os, "O_NOFOLLOW", 0))
            else:
                fd = os.open(os.path.basename(path), _DIR_FLAGS, dir_fd=parent_fd)
        except OSError:
            scan.skipped.append(prefix.rstrip("/") or ".")
            return
        try:
            if fd is not None and seen is not None:
                st = os.fstat(fd)
                if (st.st_dev, st.st_ino) != (seen.st_dev, seen.st_ino):
                    scan.skipped.append(f"{prefix.rstrip('/')} (replaced during the scan)")
                    return
            try:
                with os.scandir(path if fd is None else fd) as it:
                    items = sorted(it, key=lambda d: d.name)
            except OSError:
                scan.skipped.append(prefix.rstrip("/") or ".")
                return
            for item in items:
                visit(item, os.path.join(path, item.name), prefix + item.name, fd)
        finally:
            if fd is not None:
                os.close(fd)

    def visit(item: os.DirEntry[Any], full: str, rel: str, dir_fd: int | None) -> None:
        try:
            st = item.stat(follow_symlinks=False)
        except OSError:
            scan.skipped.append(rel)
            return
        mode = st.st_mode
        if stat.S_ISDIR(mode):
            if exclude_real is not None and os.path.realpath(full) == exclude_real:
                return
            scan.entries.append(ScanEntry(rel, full, "dir", st))
            walk(full, rel + "/", dir_fd, st)
        elif stat.S_ISREG(mode):
            scan.entries.append(ScanEntry(rel, full, "file", st))
        elif stat.S_ISLNK(mode):
            try:
                target = os.readlink(full if dir_fd is None else item.name, dir_fd=dir_fd)
            except OSError:
                scan.skipped.append(rel)
                return
            scan.entries.append(ScanEntry(rel, full, "symlink", st, target))
        else:
            scan.skipped.append(rel)

    walk(source, "", None, None)
    return scan
