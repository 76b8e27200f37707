"""The command's top-level help, without argparse: ``streamcrypt --help`` in ~40 ms.

argparse and what it imports (``re``, ``enum``, ``gettext``, ``locale``, ``textwrap``) are
about 20 ms of the command's start-up on the machines this was measured on, twice what
the interpreter leaves of the 50 ms target. The top-level help is only the list of
commands, so it is printed from :data:`COMMANDS`, the table the parser also takes every
command's one-line help from (one source; a test compares the two).
"""

from __future__ import annotations

import os
import sys

PROG = "streamcrypt"
DESCRIPTION = (
    "Streaming encryption, hashing, signing and encrypted pipes. Reference: "
    '"The streamcrypt command" in the streamcrypt documentation. As age: '
    "streamcrypt [-e|-d] [-r RECIPIENT | -R FILE | -i IDENTITY | -p] [-a] [-o OUT] [IN] "
    "(the encrypt and decrypt commands, without the command word)."
)
EPILOG = (
    "exit codes: 0 ok, 1 data failed (authentication, format, truncation), "
    "2 usage, 3 key problem, 4 I/O error"
)
#: ``encrypt``/``decrypt --format``: every format the command speaks, each a descriptor of
#: :data:`streamcrypt.codecs.FORMATS` (``native``: the container or the envelope). Not
#: read from that registry here (it imports the formats: start-up); tests/test_cli.py
#: checks that this list is exactly the formats the command's table (``_crypt._USES``) uses.
FORMATS = ("native", "age", "tink", "rclone", "aws")
#: Every listed command and its one-line help, in the order ``--help`` lists them.
COMMANDS: dict[str, str] = {
    "keygen": "generate a key file (mode 0600), or print a key's public half",
    "encrypt": f"encrypt a file or stdin ({', '.join(FORMATS)})",
    "decrypt": "decrypt a file or stdin, releasing only verified data",
    "rekey": "add or remove recipients of age files and envelopes in place",
    "rekey-objects": "re-encrypt objects under a new key on a Dask cluster (key rotation)",
    "verify-objects": (
        "authenticate encrypted objects end to end on a Dask cluster, writing nothing"
    ),
    "hash": "print digests like sha256sum (BLAKE3, SHA-2, HMAC)",
    "sign": "sign a file or stdin with Ed25519ph (base64 signature)",
    "verify": (
        "verify an Ed25519ph signature over a file or stdin "
        "(encrypted objects on a cluster: verify-objects)"
    ),
    "serve": "accept one encrypted TCP session: stdin to it, it to stdout",
    "connect": "open an encrypted TCP session: stdin to it, it to stdout",
    "clean": "remove temporaries left beside outputs by killed runs",
    "backup": "chunked, deduplicated, encrypted backups of directories",
}


def columns() -> int:
    """``shutil.get_terminal_size().columns`` (``$COLUMNS``, else standard output's
    terminal, else 80), without importing shutil and the compression modules it brings."""
    try:
        width = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        width = 0
    if width <= 0:
        try:
            width = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            width = 0
    return width if width > 0 else 80


def _wrap(text: str, width: int, indent: str = "", first: str = "") -> list[str]:
    """``text`` in lines of at most ``width`` characters (words never split), the first
    line starting with ``first`` (or ``indent``), the others with ``indent``."""
    lines: list[str] = []
    line = first or indent
    start = len(line)
    for word in text.split():
        if len(line) > start and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = indent
            start = len(line)
        line += (" " if len(line) > start else "") + word
    lines.append(line)
    return lines


#: The narrowest terminal :func:`top_help` lays out as argparse does; narrower ones (where
#: argparse also wraps the usage line and moves the help column) get argparse's own.
MIN_COLUMNS = 50


def top_help(width: int) -> str:
    """``streamcrypt --help`` for a ``width``-column terminal (at least
    :data:`MIN_COLUMNS`), character for character what argparse prints (a test compares)."""
    width -= 2  # argparse's margin
    column = 18  # where argparse starts the help text (on terminals of MIN_COLUMNS and up)
    out = [f"usage: {PROG} [-h] [--version] COMMAND ...", ""]
    out += _wrap(DESCRIPTION, width)
    out += ["", "positional arguments:", "  COMMAND"]
    for name, help in COMMANDS.items():
        head = f"    {name}"
        if len(head) <= column - 2:
            out += _wrap(help, width, " " * column, head.ljust(column))
        else:
            out += [head, *_wrap(help, width, " " * column)]
    out += ["", "options:"]
    for flags, help in (
        ("-h, --help", "show this help message and exit"),
        ("--version", "show program's version number and exit"),
    ):
        out += _wrap(help, width, " " * column, f"  {flags}".ljust(column))
    out += [""]
    out += _wrap(EPILOG, width)
    return "\n".join(out) + "\n"
