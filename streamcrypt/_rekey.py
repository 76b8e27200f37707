"""Recipients changed in place: ``await streamcrypt.rekey(path, identities=..., add=...,
remove=...)`` rewrites the header of an age file or an envelope, the payload untouched.

Theory of operation
-------------------
The format is detected from the file's first bytes; its descriptor's ``rekey`` (a pure
function in the codec: the old header's bytes in, the new header's bytes out, as is and
aligned, below) unwraps the file key with the caller's identities, checks the old
header's authentication, and writes the new stanzas and MAC under the same file key.
The payload depends on the file key only, so its bytes stay as they are.

The file is replaced atomically, as every file streamcrypt writes: the new header and
the payload go to a temporary beside it, which is fsynced and renamed over the file
(``os.replace``), the directory fsynced. Until the rename the file is untouched; a
failure or a cancellation removes the temporary.

The payload is cloned where the file system shares blocks between files (XFS with
reflinks, btrfs): :func:`_clone` is the one place that decides. ``FICLONERANGE`` takes
block-aligned offsets only, and the payload starts at the old header's length, anywhere
in a block; so the codec also writes the new header with a grease stanza that makes its
length the old one's modulo the file system's block (``f_bsize``), the few bytes up to
the payload's first block boundary are written, and every block from there on is
cloned: a re-key then takes the same time at any payload size. Where the kernel refuses
the clone (no reflinks: ext4, tmpfs, another OS), where the format cannot pad (an
envelope, an age passphrase file) or where the payload does not reach a block boundary,
the header without grease goes first and the payload is copied in the kernel
(``os.copy_file_range``, falling back to a chunked copy where it is refused) in steps
of :data:`_STEP` bytes, so a cancellation is seen between steps; that takes time in
proportion to the payload (bench/backup.py ``rekey`` rows give both figures). Every
blocking call runs on the engine's workers (:class:`~streamcrypt.engine.WorkerCalls`).
"""

from __future__ import annotations

import errno
import os
import stat
import struct
import sys
from collections.abc import Iterable
from functools import partial

import anyio

from .abc import Buffer
from .codecs import FORMATS, FormatOptions, IdentityLike, RecipientLike, detect_format, one_or_many
from .engine import DEFAULT_POLICY, OffloadPolicy, WorkerCalls
from .errors import InvalidParameterError, TruncatedStreamError, UnsupportedFormatError
from .keys import Argon2Params
from .transports import commit_temporary, create_temporary, discard_temporary

#: Bytes read first to find the header: the longest envelope header and its container
#: header fit (so the envelope's file key, a password KDF maybe, is never unwrapped
#: twice), and age headers of up to 65 KiB; a longer age header is read again (its
#: parse fails before any key work) up to :data:`_MAX_HEAD`.
_FIRST_HEAD = 65 << 10
#: Longest head read: age's header cap (1 MiB) and then some for the envelope's two headers.
_MAX_HEAD = (1 << 20) + (2 << 10)
#: Payload bytes copied per worker call (a cancellation is seen between calls).
_STEP = 256 << 20
#: Bytes per read/write where the kernel copy is refused.
_CHUNK = 1 << 20
#: Linux's ``FICLONERANGE`` (``_IOW(0x94, 13, struct file_clone_range)``, linux/fs.h) and
#: its argument: ``s64 src_fd; u64 src_offset, src_length, dest_offset``.
_FICLONERANGE = 0x4020940D
_CLONE_RANGE = struct.Struct("=qQQQ")
#: The largest block a header is padded for (a grease stanza costs up to a block more);
#: a file system reporting more (a network one's transfer size) takes the copy.
_MAX_BLOCK = 64 << 10
#: The clone's refusals where the file system cannot share these blocks (no reflinks,
#: another mount, ranges it will not take, an old kernel or a sandbox): the copy serves.
_NO_CLONE = {
    errno.EOPNOTSUPP,
    errno.ENOTSUP,
    errno.EXDEV,
    errno.EINVAL,
    errno.ENOTTY,
    errno.ENOSYS,
    errno.EPERM,
    errno.EBADF,
}
#: copy_file_range's refusals that a plain copy gets round (another file system, an old
#: kernel, a file system or sandbox without it).
_NO_KERNEL_COPY = {errno.EXDEV, errno.ENOSYS, errno.EOPNOTSUPP, errno.EINVAL, errno.EPERM}


async def rekey(
    path: str | os.PathLike[str],
    *,
    identities: Iterable[IdentityLike] | IdentityLike = (),
    passphrase: str | Buffer | None = None,
    recipients: Iterable[RecipientLike] | RecipientLike = (),
    add: Iterable[RecipientLike] | RecipientLike = (),
    remove: Iterable[RecipientLike] | RecipientLike = (),
    aad: Buffer = b"",
    max_work_factor: int | Argon2Params | None = None,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> None:
    """Add and/or remove recipients of the age file or envelope at ``path`` by rewriting
    its header; the payload's bytes are kept. Atomic: on any failure or cancellation the
    file is as it was and no temporary is left. On a file system with reflinks the
    payload's blocks are shared, not copied (an age header then carries a grease stanza
    of less than a block plus 13 bytes that aligns them); elsewhere the payload is copied.
    The new file keeps the old one's mode, and its owner and group as far as this
    process may give them (POSIX ACLs are not copied).

    ``identities`` / ``passphrase`` (and for an envelope the ``aad`` it was written with)
    must unwrap the file key. ``add``: recipients (objects, their texts, or recipient
    files) whose stanzas are appended. ``remove``: recipients whose stanzas are dropped;
    ssh-ed25519 / ssh-rsa stanzas in age name their key, every other stanza only opens for
    its identity, so give the identity of an X25519, ML-KEM or ECIES recipient to remove
    it, or give ``recipients``: the whole new list (alone, without ``add`` and
    ``remove``), every old stanza dropped. The header is authenticated before it is
    rewritten; the payload is not read (a tampered payload still fails when decrypted).

    Raises :class:`~streamcrypt.errors.UnknownKeyError` (nothing given unwraps the file
    key; a recipient to remove whose stanza cannot be told apart),
    :class:`~streamcrypt.errors.AuthenticationError` (the header does not authenticate),
    :class:`~streamcrypt.errors.InvalidParameterError` (no recipient would be left,
    ``recipients`` with ``add`` or ``remove``, a passphrase not alone in age, classic and
    post-quantum mixed, a signed envelope, an option the format does not take, a file
    with other hard links), :class:`~streamcrypt.errors.FileChangedError` (another writer
    replaced or changed the file meanwhile: its version stands, nothing is replaced),
    :class:`~streamcrypt.errors.UnsupportedFormatError` (a format without recipients, or
    armored), :class:`~streamcrypt.errors.FormatError`, :class:`OSError` (a symbolic
    link or not a regular file among them: the file is opened without following links).
    """
    options = FormatOptions(
        aad=aad,
        identities=one_or_many(identities),
        passphrase=passphrase,
        max_work_factor=max_work_factor,
    )
    adding: tuple[RecipientLike, ...] = one_or_many(add)
    removing: tuple[RecipientLike, ...] = one_or_many(remove)
    calls = WorkerCalls(policy)
    dest = os.fspath(path)
    with anyio.CancelScope(shield=True):  # a descriptor opened is a descriptor closed
        src, before, block = await calls.run(_open_source, dest)
    size = before.st_size
    out: int | None = None
    tmp = ""
    committing = False
    try:
        head = await calls.run(os.pread, src, min(size, _FIRST_HEAD), 0)
        fmt = next((f for f in FORMATS.values() if f.identifies(head)), None)
        if fmt is None:
            fmt = detect_format(head, options)  # raises what tells no format
        if fmt.rekey is None or (fmt.detect is not None and not fmt.detect(head)):
            raise UnsupportedFormatError(
                f"a {fmt.name} file has no recipients to change in place"
                if fmt.rekey is None
                else f"an armored {fmt.name} file cannot be re-keyed in place: dearmor it first"
            )
        fmt.check_options(options, "rb")
        options = options._replace(recipients=one_or_many(recipients))
        try:
            header, aligned, old_size = await calls.run(
                fmt.rekey, options, head, adding, removing, block
            )
        except TruncatedStreamError:
            if len(head) == size:
                raise
            head = await calls.run(os.pread, src, min(size, _MAX_HEAD), 0)
            header, aligned, old_size = await calls.run(
                fmt.rekey, options, head, adding, removing, block
            )
        with anyio.CancelScope(shield=True):  # a temporary made is a temporary known
            fd, tmp = await calls.run(create_temporary, dest)
        out = fd
        if not await calls.run(_clone, src, fd, aligned, old_size, size, block):
            await calls.run(_write_all, fd, header)
            offset = old_size
            while offset < size:
                offset += await calls.run(_copy, src, fd, offset, min(_STEP, size - offset))
        committing = True
        await calls.run(partial(commit_temporary, fd, tmp, dest, expect=before))
    except BaseException:
        with anyio.CancelScope(shield=True):
            await calls.settle()  # nothing may still use the descriptors below
            if out is not None and not committing:  # a commit cleans up after itself
                await calls.run(discard_temporary, out, tmp)
        raise
    finally:
        os.close(src)


def _open_source(path: str) -> tuple[int, os.stat_result, int]:
    """The file opened for reading without following a link, its stat (the commit checks
    that the name still holds this file, unchanged), and the block a clone aligns to (its
    file system's ``f_bsize``; ``0`` where no clone is tried: not Linux, or not a power of
    two up to :data:`_MAX_BLOCK`); raises :class:`OSError` (``ELOOP`` for a link),
    :class:`UnsupportedFormatError` for what is not a regular file and
    :class:`InvalidParameterError` for a file with other hard links (a re-key replaces
    one name: the others would keep the old recipients, a removed one still reading)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsupportedFormatError(f"{path} is not a regular file: only files are re-keyed")
        if st.st_nlink > 1:
            raise InvalidParameterError(
                f"{path} has {st.st_nlink - 1} other hard link(s): a re-key replaces this name "
                "only, and the others would keep the old recipients; copy it to a file of its "
                "own first"
            )
        block = os.fstatvfs(fd).f_bsize if sys.platform == "linux" else 0
    except BaseException:
        os.close(fd)
        raise
    if block & (block - 1) or block > _MAX_BLOCK:
        block = 0
    return fd, st, block


def _clone(src: int, dst: int, header: bytes, old_size: int, size: int, block: int) -> bool:
    """Write ``header`` and then ``src``'s payload (from ``old_size`` to ``size``) to the
    empty ``dst``, the payload's blocks shared with ``src`` (``FICLONERANGE``): True.
    False, ``dst`` left empty, where that cannot be: no ``block``, a header whose length
    is not the old one's modulo ``block``, a payload that does not reach a block
    boundary, or a clone the kernel refuses (:data:`_NO_CLONE`). The bytes from
    ``old_size`` up to its block boundary are written, so both offsets of the clone are
    block-aligned; its length runs to the end of ``src``, which the kernel takes
    unaligned. Raises :class:`TruncatedStreamError` if ``src`` got shorter."""
    start = -(-old_size // block) * block if block else size
    if start >= size or (len(header) - old_size) % block:
        return False
    import fcntl  # Linux only, as the block is

    _write_all(dst, header)
    lead = os.pread(src, start - old_size, old_size)
    if len(lead) < start - old_size:
        raise TruncatedStreamError("the file got shorter while it was re-keyed")
    _write_all(dst, lead)
    arg = _CLONE_RANGE.pack(src, start, size - start, start + len(header) - old_size)
    try:
        fcntl.ioctl(dst, _FICLONERANGE, arg)
    except OSError as exc:
        if exc.errno not in _NO_CLONE:
            raise
        os.ftruncate(dst, 0)
        os.lseek(dst, 0, os.SEEK_SET)
        return False
    return True


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _copy(src: int, dst: int, offset: int, count: int) -> int:
    """Copy ``count`` bytes of ``src`` from ``offset`` to ``dst``'s position, in the
    kernel where it can; raises :class:`TruncatedStreamError` if ``src`` ends first."""
    done = 0
    kernel = hasattr(os, "copy_file_range")
    while done < count:
        n = -1
        if kernel:
            try:
                n = os.copy_file_range(src, dst, count - done, offset + done)
            except OSError as exc:
                if exc.errno not in _NO_KERNEL_COPY:
                    raise
                kernel = False
        if n < 0:
            data = os.pread(src, min(_CHUNK, count - done), offset + done)
            _write_all(dst, data)
            n = len(data)
        if n == 0:
            raise TruncatedStreamError("the file got shorter while it was re-keyed")
        done += n
    return done
