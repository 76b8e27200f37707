"""Atomic file replacement: write beside the destination, fsync, rename into place.

``create_temporary(dest)`` opens ``.<name>.streamcrypt-<random>.tmp`` in the destination's
directory (keeping an existing file's permissions); ``commit_temporary`` fsyncs it, renames
it over the destination and fsyncs the directory; ``discard_temporary`` removes it. Until
the commit the destination is untouched, so a failure or a crash never leaves a partial
file in its place (a crash leaves the temporary: ``remove_stale_temporaries``). Blocking:
call from a worker thread in async code. Used by encrypted files and the command line.
"""

from __future__ import annotations

import os
import secrets
import stat

__all__ = ["commit_temporary", "create_temporary", "discard_temporary", "fsync_directory"]


def fsync_directory(directory: str) -> None:
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)
    try:
        dfd = os.open(directory, flags)
    except OSError:  # platforms that cannot open a directory (Windows): nothing to sync
        return
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def create_temporary(dest: str) -> tuple[int, str]:
    directory, name = os.path.split(os.path.abspath(dest))
    try:
        mode = stat.S_IMODE(os.stat(dest).st_mode)
    except FileNotFoundError:
        mode = None
    while True:
        tmp = os.path.join(directory, f".{name}.streamcrypt-{secrets.token_hex(8)}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
        except FileExistsError:  # pragma: no cover - 64 random bits collided
            continue
        break
    if mode is not None:  # keep the permissions of the file being replaced
        try:
            os.fchmod(fd, mode)
        except OSError:
            os.close(fd)
            os.unlink(tmp)
            raise
    return fd, tmp


def commit_temporary(fd: int, tmp: str, dest: str) -> None:
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, dest)
    fsync_directory(os.path.dirname(os.path.abspath(dest)))


def discard_temporary(fd: int | None, tmp: str) -> None:
    try:
        if fd is not None:
            os.close(fd)
    finally:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
