"""``streamcrypt backup ACTION``: init, backup, snapshots, restore, verify, forget, prune,
rekey.

Each action is one call of :mod:`streamcrypt.backup` (docs/BACKUP.md) with the
command's key files, progress bar, messages and exit codes (docs/CLI.md, "backup").
The store's master key is a symmetric key file, as ``init`` (or ``keygen``) writes it;
``init KEYFILE STORE`` makes the store (only ``init`` makes one: a backup into a
location without a store is refused). ``init -r RECIPIENT STORE`` makes a write-only
store instead and writes its writer key
(a symmetric key file too, for ``backup -k``); the other actions then take the
store's identity (``-i IDENTITY``, an age identity file).
"""

from __future__ import annotations

import argparse
import os
import sys
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..keys.keyfile import secret_key_file_text
from ._errors import EXIT_DATA, EXIT_USAGE, CliError
from ._io import Progress
from ._keyfiles import (
    identity_files,
    load_key_file,
    new_key_text,
    read_secret_line,
    write_key_file,
)

if TYPE_CHECKING:
    from ..keys import SecretKey

#: The actions that open the store with its master key (``-k KEYFILE``) or, for a
#: write-only store, its identity (``-i IDENTITY``; ``backup`` takes the writer key).
_KEYED = ("backup", "restore", "verify", "forget", "prune")
_READERS = ("restore", "verify", "forget", "prune")
#: The actions that show a progress bar (``-q`` turns it off).
_LONG = ("backup", "restore", "verify")


def add_backup_arguments(parser: argparse.ArgumentParser) -> None:
    """The actions of ``streamcrypt backup`` and their arguments."""
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    def action(name: str, help: str) -> argparse.ArgumentParser:
        return actions.add_parser(name, help=help, description=help)

    p = action(
        "init",
        "write a new master key file (mode 0600) and, with STORE, make that store for it "
        "(an existing KEYFILE is used as it is); with -r/-R, make the write-only STORE for "
        "those recipients and write its writer key. Only init makes a store",
    )
    p.add_argument("keyfile", metavar="KEYFILE")
    p.add_argument("store", nargs="?", metavar="STORE", help="the store to make")
    p.add_argument("-f", "--force", action="store_true", help="replace an existing file")
    _recipient_options(p, "-r", "--recipient", "an age recipient (age1...) of the store")
    _recipients_file_option(p)
    p = action("backup", "back up SRC_DIR into STORE as a new snapshot")
    p.add_argument("src", metavar="SRC_DIR")
    p.add_argument("store", metavar="STORE", help="a directory or an fsspec URL (s3://...)")
    p.add_argument("--name", help="the snapshot's name (default: the UTC time)")
    p.add_argument("--no-cache", action="store_true", help="read every file again")
    p = action("snapshots", "list the snapshots in STORE by name (no key needed)")
    p.add_argument("store", metavar="STORE")
    p = action("restore", "restore SNAPSHOT into the new directory DEST_DIR")
    p.add_argument("store", metavar="STORE")
    p.add_argument("snapshot", metavar="SNAPSHOT", help="a snapshot name, or 'latest'")
    p.add_argument("dest", metavar="DEST_DIR")
    p = action("verify", "check that every chunk authenticates (exit 1 if anything is wrong)")
    p.add_argument("store", metavar="STORE")
    p.add_argument("--quick", action="store_true", help="pack tables and the index only")
    p = action("forget", "delete snapshots ('latest': the newest); prune frees their space")
    p.add_argument("store", metavar="STORE")
    p.add_argument("snapshots", nargs="+", metavar="SNAPSHOT")
    p = action("rekey", "add or remove recipients of a write-only store (data untouched)")
    p.add_argument("store", metavar="STORE")
    _recipient_options(p, "-a", "--add-recipient", "an age recipient to add")
    _recipient_options(p, "-x", "--remove-recipient", "an age recipient to remove")
    p = action("prune", "delete what no snapshot uses")
    p.add_argument("store", metavar="STORE")
    p.add_argument(
        "--max-unused",
        type=float,
        default=0.1,
        metavar="FRACTION",
        help="rewrite packs with more than this fraction unused (default 0.1)",
    )
    p = action("serve", "serve a store over restic's REST protocol, append-only for writers")
    p.add_argument("--root", required=True, metavar="DIR", help="the store's directory")
    p.add_argument(
        "--listen", default="127.0.0.1:8000", metavar="HOST:PORT", help="(port 0: any free)"
    )
    p.add_argument(
        "--token-file", metavar="FILE", help="the writer's token: create and read, never delete"
    )
    p.add_argument(
        "--owner-token-file", metavar="FILE", help="the owner's token: may also delete (prune)"
    )
    p.add_argument(
        "--max-object-size",
        type=int,
        default=None,
        metavar="BYTES",
        help="refuse larger uploads (default 1 GiB)",
    )
    p.add_argument(
        "--body-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="abandon an upload that stalls this long (default 60)",
    )
    actions.choices["backup"].add_argument(
        "-k",
        "--key",
        required=True,
        metavar="KEYFILE",
        help="the store's master key file, or a write-only store's writer key",
    )
    actions.choices["backup"].add_argument(
        "--cache-dir",
        metavar="DIR",
        help="a write-only store's metadata cache (default ~/.cache/streamcrypt/backup)",
    )
    for name in (*_READERS, "rekey"):
        keys = actions.choices[name].add_mutually_exclusive_group(required=True)
        if name != "rekey":
            keys.add_argument("-k", "--key", metavar="KEYFILE", help="the store's master key file")
        keys.add_argument(
            "-i",
            "--identity",
            action="append",
            metavar="IDENTITY",
            help="an age identity file of a write-only store (repeatable)",
        )
    for name in (*_READERS, "rekey"):
        actions.choices[name].add_argument(
            "--signer",
            metavar="HEX",
            help="the store's signer as 'backup init' printed it: refuse a store whose "
            "config names another (its config and writer key replaced)",
        )
    _recipient_options(
        actions.choices["prune"],
        "-r",
        "--recipient",
        "a recipient of the write-only store besides the identities' own (prune wraps its "
        "session key only to those; rekey: name them with -a)",
    )
    _recipients_file_option(actions.choices["prune"])
    for name in _LONG:
        actions.choices[name].add_argument(
            "-q", "--quiet", action="store_true", help="no progress bar"
        )


def _recipient_options(p: argparse.ArgumentParser, short: str, long: str, help: str) -> None:
    p.add_argument(short, long, action="append", default=[], metavar="RECIPIENT", help=help)


def _recipients_file_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-R",
        "--recipients-file",
        action="append",
        default=[],
        metavar="FILE",
        help="a file of age recipients, one a line",
    )


def _named_recipients(args: argparse.Namespace) -> list[str | Path]:
    """The recipients of ``-r`` and ``-R``: the store's (prune: those vouched for)."""
    return [*args.recipient, *(Path(f) for f in args.recipients_file)]


def _identities(paths: list[str]) -> list[Any]:
    """The age identities of ``-i`` files."""
    return [i for kf in identity_files(paths) for i in kf.age_identities or kf.envelope_identities]


def _init_write_only(args: argparse.Namespace, api: Any, anyio: Any) -> int:
    if args.store is None:
        raise CliError("init -r/-R makes a write-only store: give KEYFILE STORE", EXIT_USAGE)
    if os.path.lexists(args.keyfile) and not args.force:
        raise CliError(f"{args.keyfile} exists (use -f to replace it)", EXIT_USAGE)
    from ..codecs.backup import BackupKeys

    writer = anyio.run(api.create_write_only, args.store, _named_recipients(args))
    write_key_file(args.keyfile, secret_key_file_text(writer), force=args.force)
    signer = BackupKeys.writer(writer).signing.public_bytes().hex()
    print(
        f"made the write-only store {api.shown_location(args.store)}; "
        f"wrote its writer key to {args.keyfile}: "
        "it backs up, and cannot restore or read anything; restore, verify, forget, prune "
        f"and rekey take -i IDENTITY, and --signer {signer} (keep it beside the identity: "
        "it refuses a store whose config and writer key were replaced); prune and rekey "
        "wrap keys only to the identities' own recipients and those named (prune -r/-R, "
        "rekey -a): keep the recipients file too"
    )
    return 0


def _init_store(args: argparse.Namespace, api: Any, anyio: Any) -> int:
    """``init KEYFILE STORE``: make the store for the key in KEYFILE, or for a new key
    written there (made first, so a store already there leaves no new key file)."""
    if os.path.lexists(args.keyfile) and not args.force:
        anyio.run(api.create_store, args.store, _master_key(args.keyfile))
        made = f"for the master key in {args.keyfile}"
    else:
        from ..keys import SecretKey

        key = SecretKey.generate()
        anyio.run(api.create_store, args.store, key)
        write_key_file(args.keyfile, secret_key_file_text(key), force=args.force)
        made = f"and wrote its new master key to {args.keyfile}; keep it apart from the store"
    print(f"made the store {api.shown_location(args.store)} {made}")
    return 0


def _master_key(path: str) -> SecretKey:
    keyfile = load_key_file(path)
    keyfile.require("symmetric", purpose="a backup store opens with a symmetric key file")
    assert keyfile.symmetric is not None
    return keyfile.symmetric


def _token(path: str | None) -> str | None:
    if path is None:
        return None
    return read_secret_line(path, "token").strip() or None


def _serve(args: argparse.Namespace) -> int:
    """Run ``streamcrypt backup serve`` until interrupted (tokens come from files, so
    they never show in the process list)."""
    from ..backup import RestServer

    try:
        import uvicorn  # noqa: F401
    except ImportError:
        raise CliError(
            "backup serve needs uvicorn: pip install 'streamcrypt[server]'", EXIT_USAGE
        ) from None
    limits = {"max_object_size": args.max_object_size, "body_timeout": args.body_timeout}
    app = RestServer(
        args.root,
        token=_token(args.token_file),
        owner_token=_token(args.owner_token_file),
        **{name: value for name, value in limits.items() if value is not None},
    )
    sock = RestServer.bind(args.listen)
    host, port = sock.getsockname()[:2]
    host = f"[{host}]" if ":" in host else host
    deletes = "with the owner's token" if args.owner_token_file else "by nobody"
    print(f"serving {app.root} on http://{host}:{port}/ (append-only; deletes {deletes})")
    sys.stdout.flush()
    app.serve(sock)
    return 0


def run_backup(args: argparse.Namespace) -> int:
    """Run ``streamcrypt backup ACTION``. Typed errors go to :func:`streamcrypt.cli.main`,
    which maps them to exit codes; a ``verify`` that found problems exits 1."""
    if (
        args.action == "init"
        and args.store is None
        and not (args.recipient or args.recipients_file)
    ):
        text, _ = new_key_text("symmetric", None)
        write_key_file(args.keyfile, text, force=args.force)
        print(f"wrote a new master key to {args.keyfile}; keep it apart from the store")
        return 0
    try:
        import anyio

        from .. import backup as api
    except ImportError:
        raise CliError(
            "backup needs the backup extra: pip install 'streamcrypt[backup]'", EXIT_USAGE
        ) from None

    if args.action == "serve":
        return _serve(args)
    if args.action == "init":
        if args.recipient or args.recipients_file:
            return _init_write_only(args, api, anyio)
        return _init_store(args, api, anyio)
    if args.action == "snapshots":
        for name in anyio.run(partial(api.list_snapshots, args.store)):
            print(name)
        return 0
    if args.action == "rekey":
        if not (args.add_recipient or args.remove_recipient):
            raise CliError("rekey needs -a or -x RECIPIENT", EXIT_USAGE)
        recipients = anyio.run(
            partial(
                api.rekey,
                args.store,
                identities=_identities(args.identity),
                add=args.add_recipient,
                remove=args.remove_recipient,
                signer=args.signer,
            )
        )
        print(f"{api.shown_location(args.store)} is now wrapped to: {', '.join(recipients)}")
        return 0
    key = _master_key(args.key) if args.key else None
    ids = None if args.key else _identities(args.identity)
    if args.action == "backup":
        with Progress("backing up", None, enabled=not args.quiet) as bar:
            report = anyio.run(
                partial(
                    api.backup,
                    args.src,
                    args.store,
                    _master_key(args.key),
                    name=args.name,
                    use_cache=not args.no_cache,
                    cache_dir=args.cache_dir,
                    progress=bar.update,
                )
            )
        print(report.summary())
        for item in report.skipped:
            print(f"streamcrypt: skipped {item}", file=sys.stderr)
        for item in report.store_problems:
            print(f"streamcrypt: warning: {item}", file=sys.stderr)
    elif args.action == "restore":
        with Progress("restoring", None, enabled=not args.quiet) as bar:
            restored = anyio.run(
                partial(
                    api.restore,
                    args.store,
                    args.snapshot,
                    args.dest,
                    key,
                    progress=bar.update,
                    identities=ids,
                    signer=args.signer,
                )
            )
        print(restored.summary())
    elif args.action == "verify":
        with Progress("verifying", None, enabled=not args.quiet) as bar:
            checked = anyio.run(
                partial(
                    api.verify,
                    args.store,
                    key,
                    read_data=not args.quick,
                    progress=bar.update,
                    identities=ids,
                    signer=args.signer,
                )
            )
        print(checked.summary())
        if not checked.ok:
            raise CliError(f"verify found {len(checked.problems)} problems in the store", EXIT_DATA)
    elif args.action == "forget":
        names = anyio.run(
            partial(api.forget, args.store, key, args.snapshots, identities=ids, signer=args.signer)
        )
        print(f"forgot {', '.join(names)}; prune frees their space")
    else:
        pruned = anyio.run(
            partial(
                api.prune,
                args.store,
                key,
                max_unused=args.max_unused,
                identities=ids,
                signer=args.signer,
                recipients=_named_recipients(args),
            )
        )
        print(pruned.summary())
    return 0
