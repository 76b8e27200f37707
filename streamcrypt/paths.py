"""Layer 0: where a name from outside becomes a path, and the one rule it must pass.

An object key, a path inside a backup snapshot, a decrypted rclone name: each is text
someone else chose, and each ends up naming a file under a directory (or an object under
a prefix) that the caller chose. Every such mapping in streamcrypt goes through
:func:`local_paths` / :func:`local_path` (files) or :func:`object_key` (object stores),
which split the name with :func:`name_parts` and refuse, with :class:`~streamcrypt.errors.UnsafePathError`:

- an empty name, a NUL, an absolute name (``/etc/x``);
- an empty, ``.`` or ``..`` component (``a//b``, ``./x``, ``a/../../x``, ``a/``);
- for local files on Windows, a component holding ``\\`` or ``:`` (separators there),
  ending in a dot or a space (Windows drops them: ``.. `` is ``..``), or naming a device
  (``CON``, ``NUL``, ``COM1.txt``...); on POSIX these are ordinary file names;
- for local files, a path whose existing part leads through a symbolic link out of the
  root (``root/sub -> /etc`` refuses ``sub/passwd``); links that stay inside are fine.

The symbolic-link check sees the file system as it is when the name is mapped. A local
file is then written beneath its root by :func:`create_beneath`, which follows no link at
all (each directory opened relative to the one before with ``O_NOFOLLOW``, the temporary
created with ``O_EXCL | O_NOFOLLOW`` and renamed relative to its directory), so a link
planted after the check is refused, never followed.
"""

from __future__ import annotations

import errno
import os
import secrets
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from .errors import UnsafePathError

__all__ = ["create_beneath", "local_path", "local_paths", "name_parts", "object_key"]

#: Whether local names follow Windows' rules (tests set it to check them on POSIX).
_WINDOWS = os.name == "nt"
#: Device names of Windows, whatever the extension or case.
_DEVICES = frozenset(
    ["CON", "PRN", "AUX", "NUL"] + [f"{p}{n}" for p in ("COM", "LPT") for n in "123456789¹²³"]
)


def _not_a_windows_name(part: str) -> bool:
    return (
        "\\" in part
        or ":" in part
        or part[-1] in ". "
        or part.split(".", 1)[0].rstrip(" ").upper() in _DEVICES
    )


def _shown(name: str) -> str:
    return repr(name if len(name) <= 80 else name[:77] + "...")


def name_parts(name: str, *, what: str = "name", local: bool = True) -> tuple[str, ...]:
    """The components of the '/'-separated relative ``name``, each a plain name.

    ``local``: the name will become a local path (on Windows, its rules apply too).
    Raises :class:`UnsafePathError` naming ``what``.
    """
    if not isinstance(name, str):
        raise UnsafePathError(f"{what} is not text")
    if not name:
        raise UnsafePathError(f"{what} is empty")
    if "\x00" in name:
        raise UnsafePathError(f"{what} {_shown(name)} holds a NUL character")
    if name.startswith("/"):
        raise UnsafePathError(f"{what} {_shown(name)} is absolute")
    parts = tuple(name.split("/"))
    windows = local and _WINDOWS
    for part in parts:
        if part in ("", ".", ".."):
            raise UnsafePathError(
                f"{what} {_shown(name)} has an empty, '.' or '..' component: it could "
                "name something outside the directory it belongs under"
            )
        if windows and _not_a_windows_name(part):
            raise UnsafePathError(
                f"{what} {_shown(name)} holds a separator, a trailing dot or space, or a "
                "device name of Windows"
            )
    return parts


def object_key(prefix: str, name: str, *, what: str = "name") -> str:
    """``name`` under the key prefix or URL ``prefix`` of an object store (``prefix/name``).

    Raises :class:`UnsafePathError` for a name :func:`name_parts` refuses.
    """
    parts = name_parts(name, what=what, local=False)
    return prefix.rstrip("/") + "/" + "/".join(parts)


def local_paths(
    root: str | os.PathLike[str], names: Iterable[str], *, what: str = "name"
) -> list[str]:
    """The local paths of ``names`` under the directory ``root``, each through no
    symbolic link that leaves ``root`` (each result starts with ``root``'s real path).

    Each distinct parent directory is resolved once, so a whole tree costs about one
    ``lstat`` per name. Raises :class:`UnsafePathError` for a name :func:`name_parts`
    refuses or a path that a symbolic link (an existing directory, or the file itself)
    takes out of ``root``.
    """
    base = os.path.realpath(root)
    inside: set[tuple[str, ...]] = set()  # parent directories found not to leave base

    def check(name: str, path: str) -> None:
        real = os.path.realpath(path)
        if real != base and os.path.commonpath([base, real]) != base:
            raise UnsafePathError(
                f"{what} {_shown(name)} leads through a symbolic link out of {os.fspath(root)!r}"
            )

    out: list[str] = []
    for name in names:
        parts = name_parts(name, what=what, local=True)
        parent = parts[:-1]
        if parent and parent not in inside:
            check(name, os.path.join(base, *parent))
            inside.add(parent)
        path = os.path.join(base, *parts)
        if os.path.islink(path):
            check(name, path)
        out.append(path)
    return out


def local_path(root: str | os.PathLike[str], name: str, *, what: str = "name") -> str:
    """The local path of one ``name`` under ``root``: :func:`local_paths` of one name."""
    return local_paths(root, (name,), what=what)[0]


_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | _CLOEXEC
_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | _CLOEXEC


def _open_directory(root: str, parts: tuple[str, ...], name: str, what: str) -> int:
    """A descriptor of ``root/parts...``, missing directories made, no link followed
    below ``root`` (``root`` itself is the caller's: made if missing, followed)."""
    os.makedirs(root, exist_ok=True)
    fd = os.open(root, _DIR_FLAGS & ~getattr(os, "O_NOFOLLOW", 0))
    try:
        for part in parts:
            try:
                try:
                    sub = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    try:
                        os.mkdir(part, 0o777, dir_fd=fd)
                    except FileExistsError:
                        pass
                    sub = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
                    raise UnsafePathError(
                        f"{what} {_shown(name)} leads through a symbolic link (or what is "
                        f"not a directory) under {root!r}: it is not followed"
                    ) from None
                raise
            os.close(fd)
            fd = sub
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextmanager
def create_beneath(
    root: str | os.PathLike[str], name: str, *, what: str = "name", tag: str = ""
) -> Iterator[int]:
    """Write the file ``name`` beneath the directory ``root``, atomically, following no
    symbolic link below ``root``: yields the descriptor of a new temporary
    ``.<base>.streamcrypt-<tag>.tmp`` beside it (``tag``: 16 random hex digits unless
    given), which a clean exit fsyncs and renames over ``name`` (a link there is replaced,
    never followed; the directory is fsynced after) and an error removes.

    Missing directories are made. Raises :class:`UnsafePathError` for a name
    :func:`name_parts` refuses or a path through a symbolic link (whenever it was
    planted), ``OSError``.
    """
    parts = name_parts(name, what=what, local=True)
    dfd = _open_directory(os.fspath(root), parts[:-1], name, what)
    try:
        tmp = f".{parts[-1]}.streamcrypt-{tag or secrets.token_hex(8)}.tmp"
        fd = os.open(tmp, _NEW_FILE_FLAGS, 0o666, dir_fd=dfd)
        try:
            try:
                yield fd
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, parts[-1], src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=dfd)
            except FileNotFoundError:
                pass
            raise
        os.fsync(dfd)
    finally:
        os.close(dfd)
