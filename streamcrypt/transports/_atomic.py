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

from ..errors import FileChangedError

#: A temporary is always new (never an existing file or a link planted in its place).
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)


def fsync_directory(directory: str) -> None:
    """Flush a directory's entries (a rename in it) to disk; a no-op where a directory
    cannot be opened (Windows)."""
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)
    try:
        dfd = os.open(directory, flags)
    except OSError:  # platforms that cannot open a directory (Windows): nothing to sync
        return
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def create_temporary(dest: str, *, mode: int | None = None) -> tuple[int, str]:
    """Open a new temporary file beside ``dest``; return its descriptor and path.

    Its final mode is ``mode`` if given, else the mode of the file it will replace (both
    set with ``fchmod`` on a file created readable by its owner only: widening an empty
    file leaks nothing; narrowing after writing would, as an early ``open`` keeps access,
    so nothing is ever narrowed), else what the kernel gives a new file: created with
    ``0o666`` less the process's umask (or the directory's default ACL), never a guess,
    without reading ``/proc`` or changing the umask under other threads.
    """
    directory, name = os.path.split(os.path.abspath(dest))
    owner: tuple[int, int] | None = None
    if mode is None:
        try:
            st = os.stat(dest)
        except FileNotFoundError:
            pass
        else:
            mode, owner = stat.S_IMODE(st.st_mode), (st.st_uid, st.st_gid)
    while True:
        tmp = os.path.join(directory, f".{name}.streamcrypt-{secrets.token_hex(8)}.tmp")
        try:
            fd = os.open(tmp, _CREATE_FLAGS, 0o666 if mode is None else 0o600)
        except FileExistsError:  # pragma: no cover - 64 random bits collided
            continue
        break
    try:
        if owner is not None:
            _keep_owner(fd, *owner)
        if mode is not None and mode != 0o600:
            os.fchmod(fd, mode)  # after fchown, which may clear set-id bits
    except OSError:
        os.close(fd)
        os.unlink(tmp)
        raise
    return fd, tmp


def _keep_owner(fd: int, uid: int, gid: int) -> None:
    """Give the temporary the owner and group of the file it replaces, as far as this
    process may (root: both; the file's owner: a group it is in); what it may not stays
    its own, as a new file's would. POSIX ACLs are not copied."""
    st = os.fstat(fd)
    if (st.st_uid, st.st_gid) == (uid, gid) or not hasattr(os, "fchown"):
        return
    for user in (uid, -1):
        try:
            os.fchown(fd, user, gid)
            return
        except PermissionError:
            continue


def commit_temporary(
    fd: int,
    tmp: str,
    dest: str,
    *,
    durable: bool = True,
    exclusive: bool = False,
    expect: os.stat_result | None = None,
) -> None:
    """Close the temporary and rename it over ``dest``; ``durable``: fsync the temporary
    first and the directory after (a crash then leaves the old ``dest`` or the new one);
    ``exclusive``: never replace an existing ``dest`` (a hard link, atomic, then the
    temporary's name removed; ``FileExistsError`` where ``dest`` exists); ``expect``: the
    stat of the file the temporary was made from, which ``dest`` must still be (same
    file, size and modification time; :class:`FileChangedError` if another writer
    replaced, grew or rewrote it meanwhile: its work is never undone. What runs between
    this check and the rename, microseconds, is not covered).
    If that fails the temporary is removed: a failed commit leaves nothing behind."""
    try:
        try:
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        if expect is not None and not _same_file(os.lstat(dest), expect):
            raise FileChangedError(
                f"{dest} changed while it was being replaced: left as the other writer made it"
            )
        if exclusive:
            os.link(tmp, dest)
            os.unlink(tmp)
        else:
            os.replace(tmp, dest)
    except BaseException:
        discard_temporary(None, tmp)
        raise
    if durable:
        fsync_directory(os.path.dirname(os.path.abspath(dest)))


def _same_file(now: os.stat_result, then: os.stat_result) -> bool:
    return (now.st_dev, now.st_ino, now.st_size, now.st_mtime_ns) == (
        then.st_dev,
        then.st_ino,
        then.st_size,
        then.st_mtime_ns,
    )


def discard_temporary(fd: int | None, tmp: str) -> None:
    """Close the temporary (unless ``fd`` is ``None``) and remove it; ``dest`` is untouched."""
    try:
        if fd is not None:
            os.close(fd)
    finally:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass


def write_atomic(
    dest: str,
    data: bytes | bytearray | memoryview,
    *,
    mode: int | None = None,
    durable: bool = True,
) -> None:
    """Write ``data`` as the whole new content of ``dest``, atomically (temporary, fsync,
    rename, fsync of the directory); ``mode`` as for :func:`create_temporary`,
    ``durable`` as for :func:`commit_temporary`."""
    fd, tmp = create_temporary(dest, mode=mode)
    try:
        view = memoryview(data).cast("B")
        while view:
            view = view[os.write(fd, view) :]
    except BaseException:
        discard_temporary(fd, tmp)
        raise
    commit_temporary(fd, tmp, dest, durable=durable)
