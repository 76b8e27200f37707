"""A chunked, deduplicating, encrypted backup tool: a short program over streamcrypt.backup.

Run it (needs ``pip install 'streamcrypt[backup,cli]'``)::

    python examples/backup.py keygen backup.key
    python examples/backup.py backup  ~/Documents /mnt/store --key backup.key
    python examples/backup.py list    /mnt/store
    python examples/backup.py restore /mnt/store 2025-01-31T120000.123456Z ./restored --key backup.key
    python examples/backup.py verify  /mnt/store --key backup.key
    python examples/backup.py forget  /mnt/store 2025-01-31T120000.123456Z --key backup.key
    python examples/backup.py prune   /mnt/store --key backup.key

``STORE`` is a directory or any fsspec URL. The key file holds one 32-byte master key, in the
format ``streamcrypt keygen`` writes (docs/CLI.md, "Key files"; 64 hex digits or 32 raw bytes
are read too); every key the store uses is derived from it. Keep it somewhere other than
the store: without it nothing can be restored.

What each command does (the library does the work; docs/BACKUP.md has the store layout):

- **backup** cuts files into content-defined chunks (FastCDC), stores each chunk once
  (keyed-BLAKE3 id, zstd, AES-256-GCM, in packs of ~16 MiB) and writes a signed,
  encrypted snapshot. A file whose size, times and inode match the previous snapshot of
  the same directory is not read again. Symbolic links, empty files, modes and times are
  kept; sockets, fifos and devices are skipped and reported, and so is a file replaced
  after the scan (by a link, a FIFO or another file). Work runs on every core.
- **restore** verifies every chunk and writes into a new directory that appears only
  when everything verified (``latest`` names the newest snapshot); no snapshot path
  leads out of it (``UnsafePathError``).
- **verify** authenticates every chunk of every pack without restoring, and names the
  files that a damaged chunk or pack affects (exit status 1 when anything is wrong).
- **forget** deletes snapshots; **prune** then deletes or rewrites packs nothing uses.

A lock keeps two backups (or a backup and a prune) from working on one store at once; a
backup killed at any point leaves the store consistent, and the next run reuses what the
killed one stored. Errors are streamcrypt's typed errors, printed with exit status 1.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import anyio

from streamcrypt import backup as store_api
from streamcrypt.errors import StreamCryptError
from streamcrypt.keys import SecretKey

__all__ = ["load_key", "main"]


def load_key(path: str | os.PathLike[str]) -> SecretKey:
    """Read the master key: a streamcrypt key file (or 64 hex digits), or 32 raw bytes.

    Raises :class:`InvalidParameterError` for anything else, :class:`OSError` if unreadable.
    """
    data = Path(path).read_bytes()
    if len(data) == 32:  # raw bytes, e.g. from head -c 32 /dev/urandom
        return SecretKey(data)
    return SecretKey.from_file(path)


@contextmanager
def progress_bar(description: str, enabled: bool) -> Iterator[store_api.Progress | None]:
    """The ``streamcrypt`` command's progress bar (rich, on a terminal, after half a second
    of work), fed by the library's ``progress(done, total)`` callback."""
    if not enabled:
        yield None
        return
    from streamcrypt.cli._io import Progress  # the command's bar: one look for both

    bar: Progress | None = None
    shown = 0

    def update(done: int, total: int) -> None:
        nonlocal bar, shown
        if bar is None:
            bar = Progress(description, total, enabled=True)
        bar.advance(done - shown)
        shown = done

    try:
        yield update
    finally:
        if bar is not None:
            bar.close()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="backup.py", description="Chunked, deduplicating, encrypted backups."
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("keygen", help="write a new master key file")
    p.add_argument("keyfile")
    p = sub.add_parser("backup", help="back up SRC_DIR into STORE as a new snapshot")
    p.add_argument("src")
    p.add_argument("store")
    p.add_argument("--name", help="snapshot name (default: the UTC time)")
    p.add_argument("--no-cache", action="store_true", help="read every file again")
    p = sub.add_parser("restore", help="restore SNAPSHOT into the new directory DEST_DIR")
    p.add_argument("store")
    p.add_argument("snapshot", help="a snapshot name, or 'latest'")
    p.add_argument("dest")
    p = sub.add_parser("list", help="list the snapshots in STORE")
    p.add_argument("store")
    p = sub.add_parser("verify", help="check that every chunk authenticates")
    p.add_argument("store")
    p.add_argument("--quick", action="store_true", help="pack tables and index only")
    p = sub.add_parser("forget", help="delete snapshots (prune frees their space)")
    p.add_argument("store")
    p.add_argument("snapshots", nargs="+")
    p = sub.add_parser("prune", help="delete what no snapshot uses")
    p.add_argument("store")
    p.add_argument("--max-unused", type=float, default=0.1, help="rewrite packs above this")
    for name in ("backup", "restore", "verify", "forget", "prune"):
        sub.choices[name].add_argument("--key", required=True, help="master key file")
    return parser


def _run(args: argparse.Namespace) -> int:
    cmd = args.command
    if cmd == "keygen":
        SecretKey.generate(32).to_file(args.keyfile)  # mode 0600, never overwrites
        print(f"wrote a new master key to {args.keyfile}; keep it apart from the store")
        return 0
    if cmd == "list":
        for name in store_api.list_snapshots(args.store):
            print(name)
        return 0
    key = load_key(args.key)
    show = not args.quiet
    if cmd == "backup":
        with progress_bar("backing up", show) as bar:
            done = anyio.run(
                partial(
                    store_api.backup,
                    args.src,
                    args.store,
                    key,
                    name=args.name,
                    use_cache=not args.no_cache,
                    progress=bar,
                )
            )
        print(done.summary())
        for item in done.skipped:
            print(f"skipped: {item}", file=sys.stderr)
    elif cmd == "restore":
        name = args.snapshot
        if name == "latest":
            names = store_api.list_snapshots(args.store)
            if not names:
                raise FileNotFoundError(f"no snapshots in {args.store!r}")
            name = names[-1]
        with progress_bar("restoring", show) as bar:
            restored = anyio.run(
                partial(store_api.restore, args.store, name, args.dest, key, progress=bar)
            )
        print(restored.summary())
    elif cmd == "verify":
        with progress_bar("verifying", show) as bar:
            checked = anyio.run(
                partial(store_api.verify, args.store, key, read_data=not args.quick, progress=bar)
            )
        print(checked.summary())
        return 0 if checked.ok else 1
    elif cmd == "forget":
        anyio.run(store_api.forget, args.store, key, args.snapshots)
        print(f"forgot {len(args.snapshots)} snapshots; run prune to free their space")
    else:
        pruned = anyio.run(partial(store_api.prune, args.store, key, max_unused=args.max_unused))
        print(pruned.summary())
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 1 failed, 2 usage)."""
    args = _parser().parse_args(argv)
    try:
        return _run(args)
    except (StreamCryptError, OSError) as exc:
        print(f"backup.py: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
