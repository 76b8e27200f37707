"""List, read and write the files of an rclone crypt remote that lives in a local directory.

Run it::

    python examples/rclone_remote.py ROOT ls
    python examples/rclone_remote.py ROOT cat path/in/remote > out
    python examples/rclone_remote.py ROOT put local-file path/in/remote

``ROOT`` is the directory the crypt remote wraps (rclone's ``remote = ROOT``). The
password comes from ``--password`` / ``--password2`` in clear, or from the environment as
rclone.conf stores them, obscured: ``RCLONE_CONFIG_<NAME>_PASSWORD`` and ``..._PASSWORD2``
with ``--remote NAME``. ``--filename-encryption`` (standard, obfuscate, off) and
``--filename-encoding`` (base32, base64, base32768) match the remote's settings.

Contents stream through the engine in bounded memory (blocks sealed and opened on worker
threads); ``cat`` releases only verified blocks and checks the plaintext size against the
file size, ``put`` writes to a temporary beside the destination and renames it into place
(:func:`streamcrypt.paths.create_beneath`: no symbolic link below ``ROOT`` is followed,
even one planted while it runs). A name that would lead out of ``ROOT`` (``..``, an
absolute path, a symbolic link out of it) is refused (``UnsafePathError``).
Exit status: 0 ok, 1 failed (the error's type and message on stderr).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import anyio

import streamcrypt
from streamcrypt.codecs.rclone import RcloneKeys, RcloneNameCipher, decrypted_size
from streamcrypt.errors import StreamCryptError
from streamcrypt.paths import create_beneath, local_path


def _keys(args: argparse.Namespace) -> RcloneKeys:
    if args.password is not None:
        return RcloneKeys.from_password(args.password, args.password2 or "")
    prefix = f"RCLONE_CONFIG_{args.remote.upper()}_"
    if prefix + "PASSWORD" not in os.environ:
        raise SystemExit(f"give --password or set {prefix}PASSWORD (obscured, as in rclone.conf)")
    return RcloneKeys.from_config(
        os.environ[prefix + "PASSWORD"], os.environ.get(prefix + "PASSWORD2", "")
    )


async def _chunks(path: Path) -> AsyncIterator[bytes]:
    async with await anyio.open_file(path, "rb") as f:
        while piece := await f.read(1 << 20):
            yield piece


def ls(root: Path, names: RcloneNameCipher) -> list[tuple[str, int]]:
    """``(clear path, plaintext size)`` of every file under ``root``, sorted."""
    found = []
    for path in root.rglob("*"):
        if path.is_file():
            clear = names.decrypt_path(path.relative_to(root).as_posix())
            found.append((clear, decrypted_size(path.stat().st_size)))
    return sorted(found)


async def cat(
    root: Path, names: RcloneNameCipher, keys: RcloneKeys, name: str
) -> AsyncIterator[bytes]:
    """The verified plaintext of ``name``."""
    path = anyio.Path(local_path(root, names.encrypt_path(name)))
    size = decrypted_size((await path.stat()).st_size)
    async for piece in streamcrypt.decrypt(
        _chunks(Path(path)), keys, format="rclone", expected_size=size
    ):
        yield piece


async def put(
    root: Path, names: RcloneNameCipher, keys: RcloneKeys, local: Path, name: str
) -> None:
    """Encrypt ``local`` into the remote as ``name`` (atomically, following no link)."""
    remote = names.encrypt_path(name)
    local_path(root, remote)  # refuse a hostile name before reading anything
    with create_beneath(root, remote) as fd:  # a temporary, renamed over the file at the end
        async with await anyio.open_file(fd, "wb", closefd=False) as out:
            async for piece in streamcrypt.encrypt(_chunks(local), keys, format="rclone"):
                await out.write(piece)


async def _main(args: argparse.Namespace) -> None:
    root = Path(args.root)
    keys = await anyio.to_thread.run_sync(_keys, args)
    names = RcloneNameCipher(keys, args.filename_encryption, args.filename_encoding)
    if args.command == "ls":
        for name, size in await anyio.to_thread.run_sync(ls, root, names):
            print(f"{size:>12} {name}")
    elif args.command == "cat":
        async for piece in cat(root, names, keys, args.name):
            sys.stdout.buffer.write(piece)
        sys.stdout.buffer.flush()
    else:
        await put(root, names, keys, Path(args.local), args.name)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root")
    parser.add_argument("--password")
    parser.add_argument("--password2")
    parser.add_argument("--remote", default="crypt", help="name for RCLONE_CONFIG_<NAME>_PASSWORD")
    parser.add_argument(
        "--filename-encryption", default="standard", choices=["standard", "obfuscate", "off"]
    )
    parser.add_argument(
        "--filename-encoding", default="base32", choices=["base32", "base64", "base32768"]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("ls")
    sub.add_parser("cat").add_argument("name")
    p = sub.add_parser("put")
    p.add_argument("local")
    p.add_argument("name")
    args = parser.parse_args(argv)
    try:
        anyio.run(_main, args)
    except (StreamCryptError, OSError) as exc:
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
