"""Child process for the SIGKILL test: writes a large encrypted file until it is killed.

Usage: python _kill_writer.py DEST KEY_HEX. Prints "writing" once the file is open, then
writes 1 MiB chunks (up to 1 GiB, a safety cap) through ``open_file(DEST, "wb")``.
"""

from __future__ import annotations

import sys

import anyio

from streamcrypt.transports import open_file


async def main(dest: str, key: bytes) -> None:
    chunk = bytes(range(256)) * 4096
    async with open_file(dest, "wb", key=key) as f:
        print("writing", flush=True)
        for _ in range(1024):
            await f.write(chunk)
    print("finished", flush=True)  # the parent kills us long before this


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], bytes.fromhex(sys.argv[2]))
