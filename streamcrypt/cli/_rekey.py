"""``streamcrypt rekey``: add or remove recipients of age files and envelopes in place.

Key files, recipients and the passphrase are read and checked first, as ``encrypt`` and
``decrypt`` read them (``-i`` identity files, ``-a``/``-A`` like age's ``-r``/``-R``);
then each FILE is re-keyed with :func:`streamcrypt.rekey` (its header rewritten, the
payload kept, the file replaced atomically). A file that fails is named on standard
error and left as it was; the others are still re-keyed, and the exit code is the first
failure's.
"""

from __future__ import annotations

import argparse
import sys
from functools import partial

import anyio

from .. import rekey
from ..codecs import IdentityLike
from ..codecs import age as _age
from ..codecs import envelope as _envelope
from ..errors import StreamCryptError
from ._crypt import (
    _aad,
    _bad_recipient,
    _read_passphrase,
    _recipient_texts,
    _usage,
)
from ._errors import EXIT_OK, describe, exit_code
from ._keyfiles import identity_files


def add_rekey_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``streamcrypt rekey``."""
    p.add_argument("files", nargs="+", metavar="FILE", help="age files or envelopes (binary)")
    p.add_argument(
        "-i",
        "--identity",
        metavar="FILE",
        action="append",
        default=[],
        help="identity file that opens the files (age or streamcrypt X25519, SSH, "
        "secp256k1); repeatable",
    )
    p.add_argument(
        "-a",
        "--add-recipient",
        dest="recipient",
        metavar="RECIPIENT",
        action="append",
        default=[],
        help="public key to add: age1..., age1pq1..., 'ssh-ed25519 AAAA...', 'ssh-rsa "
        "AAAA...' (age), sc-x25519-pub1..., sc-secp256k1-pub1... (envelope); repeatable",
    )
    p.add_argument(
        "-A",
        "--add-recipients-file",
        dest="recipients_file",
        metavar="FILE",
        action="append",
        default=[],
        help="a file of recipients to add, one per line ('#' comments); repeatable",
    )
    p.add_argument(
        "-r",
        "--recipient",
        dest="set_recipient",
        metavar="RECIPIENT",
        action="append",
        default=[],
        help="the whole new list of recipients (every old one goes), as encrypt's -r; "
        "repeatable; not with -a, -A, -x",
    )
    p.add_argument(
        "-R",
        "--recipients-file",
        dest="set_recipients_file",
        metavar="FILE",
        action="append",
        default=[],
        help="a file of the whole new list of recipients, as encrypt's -R; repeatable",
    )
    p.add_argument(
        "-x",
        "--remove-recipient",
        dest="remove",
        metavar="RECIPIENT",
        action="append",
        default=[],
        help="public key to remove (an X25519, ML-KEM or ECIES one only with its identity "
        "among -i: only ssh stanzas name their key); repeatable",
    )
    p.add_argument(
        "-p", "--passphrase", action="store_true", help="prompt for the passphrase that opens"
    )
    p.add_argument(
        "--passphrase-file", metavar="FILE", help="read that passphrase from FILE's first line"
    )
    p.add_argument("--aad", metavar="TEXT", help="envelope: its associated data, UTF-8")


def _parsed(text: str, where: str) -> str:
    """``text`` when age or the envelope reads it as a recipient, else a key error that
    does not echo it."""
    try:
        _age.parse_recipient(text)
    except StreamCryptError as exc:
        try:
            _envelope.parse_recipient(text)
        except StreamCryptError:
            raise _bad_recipient(text, where, exc) from None
    return text


def run_rekey(args: argparse.Namespace) -> int:
    """``streamcrypt rekey``: 0 when every FILE was re-keyed, else the first failure's code."""
    changes = bool(args.recipient or args.recipients_file or args.remove)
    whole = bool(args.set_recipient or args.set_recipients_file)
    if changes and whole:
        raise _usage("rekey takes -r/-R (the whole new list) or -a/-A/-x, not both")
    if not changes and not whole:
        raise _usage("rekey needs recipients to add (-a, -A), to remove (-x), or -r/-R")
    identities: list[IdentityLike] = []
    for kf in identity_files(args.identity):
        identities += kf.age_identities
        identities += kf.envelope_identities
    passphrase = _read_passphrase(args, confirm=False)
    if not identities and passphrase is None:
        raise _usage("rekey needs what opens the files: -i IDENTITY, -p or --passphrase-file")
    add = [_parsed(text, where.replace("-r ", "-a ", 1)) for text, where in _recipient_texts(args)]
    listed = argparse.Namespace(
        recipient=args.set_recipient, recipients_file=args.set_recipients_file
    )
    recipients = [_parsed(text, where) for text, where in _recipient_texts(listed)]
    remove = [_parsed(t.strip(), f"-x recipient number {n}") for n, t in enumerate(args.remove, 1)]
    aad = _aad(args)
    status = EXIT_OK
    for path in args.files:
        call = partial(
            rekey,
            path,
            identities=identities,
            passphrase=passphrase,
            recipients=recipients,
            add=add,
            remove=remove,
            aad=aad,
        )
        try:
            anyio.run(call)
        except (StreamCryptError, OSError) as exc:
            sys.stderr.write(f"streamcrypt: error: {path}: {describe(exc)}\n")
            status = status or exit_code(exc)
    return status
