"""Walking the source tree: what a backup stores, in path order (blocking; run on a worker)."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field

__all__ = ["ScanEntry", "TreeScan", "scan_tree"]


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


def scan_tree(source: str, exclude: str | None = None) -> TreeScan:
    """Every entry under ``source`` (not following links), sorted by path; ``exclude``
    (a real path, e.g. a store inside the source) is left out with everything below it."""
    scan = TreeScan()
    exclude_real = os.path.realpath(exclude) if exclude else None

    def walk(directory: str, prefix: str) -> None:
        try:
            with os.scandir(directory) as it:
                items = sorted(it, key=lambda d: d.name)
        except OSError:
            scan.skipped.append(prefix.rstrip("/") or ".")
            return
        for item in items:
            rel = prefix + item.name
            try:
                st = item.stat(follow_symlinks=False)
            except OSError:
                scan.skipped.append(rel)
                continue
            mode = st.st_mode
            if stat.S_ISDIR(mode):
                if exclude_real is not None and os.path.realpath(item.path) == exclude_real:
                    continue
                scan.entries.append(ScanEntry(rel, item.path, "dir", st))
                walk(item.path, rel + "/")
            elif stat.S_ISREG(mode):
                scan.entries.append(ScanEntry(rel, item.path, "file", st))
            elif stat.S_ISLNK(mode):
                try:
                    target = os.readlink(item.path)
                except OSError:
                    scan.skipped.append(rel)
                    continue
                scan.entries.append(ScanEntry(rel, item.path, "symlink", st, target))
            else:
                scan.skipped.append(rel)

    walk(source, "")
    return scan
