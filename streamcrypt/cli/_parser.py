"""The ``streamcrypt`` command's parser: every command and option, age's command line.

Imported by :func:`streamcrypt.cli.main` once ``--version`` is ruled out (argparse and
its imports are most of the command's start-up).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable

from ._cluster import add_cluster_command
from ._errors import EXIT_USAGE
from ._options import HASH_ALGOS, KEY_SIZES, KEY_TYPES, add_arguments, add_native_arguments
from ._usage import COMMANDS, DESCRIPTION, EPILOG, PROG, columns

TYPE_CHECKING = False  # ``typing.TYPE_CHECKING`` without importing typing (start-up)
if TYPE_CHECKING:
    from typing import Any, NoReturn

#: Commands that work only in a source checkout: not listed in --help nor in errors.
_HIDDEN = ("bench",)
Runner = Callable[[argparse.Namespace], int]


def _lazy(module: str, function: str, **keywords: Any) -> Runner:
    """The runner ``module.function`` (relative to this package), imported when the
    command runs: building the parser imports no format, so ``--help``, ``--version`` and
    usage errors start fast (docs/CLI.md, "Start-up")."""

    def runner(args: argparse.Namespace) -> int:
        target: Callable[..., int] = getattr(importlib.import_module(module, __package__), function)
        return target(args, **keywords)

    return runner


class _Parser(argparse.ArgumentParser):
    """argparse with one-line usage errors (exit code 2), formatting for the terminal's
    width as argparse does (start-up: without shutil, see :func:`columns`)."""

    def _get_formatter(self) -> argparse.HelpFormatter:
        return argparse.HelpFormatter(self.prog, width=columns() - 2)

    def error(self, message: str) -> NoReturn:
        for name in _HIDDEN:  # argparse's "invalid choice" list names every command
            message = message.replace(f", '{name}'", "")
        sys.stderr.write(f"{PROG}: error: {message} (see '{self.prog} --help')\n")
        raise SystemExit(EXIT_USAGE)


class _Unused(argparse.ArgumentParser):
    """Stands for the parser of a command this run does not use: arguments added to it
    are dropped (adding each costs start-up; only the command given needs its own)."""

    def add_argument(self, *args: Any, **kwargs: Any) -> Any:
        return None


def build_parser(command_word: str | None = None) -> _Parser:
    """The parser. Given ``command_word`` (the first word of the command line), only that
    command's options are added: the others' would not be used, and ``--help`` lists
    commands by their one-line help only. ``None``: every command's options."""
    unused = _Unused(add_help=False) if command_word is not None else None
    parser = _Parser(
        prog=PROG,
        description=DESCRIPTION,
        epilog=EPILOG,
    )
    from .. import __version__

    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")

    def subparser(**kwargs: Any) -> argparse.ArgumentParser:
        """The parser of the command ``kwargs["prog"]`` names (``streamcrypt NAME``): a
        new one for the command given, ``unused`` for the others (never parsed with;
        making each cost ~1 ms, most of it gettext looking up translations)."""
        name = kwargs["prog"].rpartition(" ")[2]
        return _Parser(**kwargs) if unused is None or name == command_word else unused

    sub: argparse._SubParsersAction[argparse.ArgumentParser] = parser.add_subparsers(  # type: ignore[call-overload]
        dest="command", metavar="COMMAND", required=True, prog=PROG, parser_class=subparser
    )

    def command(name: str, runner: Runner, help: str | None = None) -> argparse.ArgumentParser:
        """A command; a listed one takes its one-line help from :data:`COMMANDS` (what the
        argparse-free ``--help`` prints), a hidden one gives its own."""
        if name in _HIDDEN:  # without help= argparse leaves it out of the list in --help
            p = sub.add_parser(name, description=help)
        else:
            p = sub.add_parser(name, help=COMMANDS[name], description=COMMANDS[name])
        p.set_defaults(run=runner)
        return p

    p = command(
        "keygen",
        _lazy("._commands", "run_keygen"),
    )
    p.add_argument(
        "input", nargs="?", metavar="KEYFILE", help="-y: the key file to read (default: stdin)"
    )
    p.add_argument(
        "-o",
        "--output",
        metavar="KEYFILE",
        help="the key file (default: the key to stdout, its public half to stderr)",
    )
    p.add_argument(
        "-y",
        dest="public",
        action="store_true",
        help="print the public half of each key in KEYFILE (as age-keygen -y)",
    )
    p.add_argument(
        "-t",
        "--type",
        choices=KEY_TYPES,
        help="key type (default symmetric); age-pq: post-quantum ML-KEM-768 + X25519 (age)",
    )
    p.add_argument("--key-id", metavar="ID", help="symmetric: the key id (default: random)")
    p.add_argument(
        "--size",
        type=int,
        choices=KEY_SIZES,
        help="symmetric: key bytes (default 32; 16 for RFC 8188 HTTP bodies)",
    )
    p.add_argument("-f", "--force", action="store_true", help="replace an existing file")
    p.add_argument(
        "--pkcs11",
        metavar="URI",
        help="make a non-extractable AES-256 key in a PKCS#11 token instead of a file: "
        "pkcs11:token=T;object=LABEL?module-path=LIB&pin-source=env:VAR",
    )

    p = command("encrypt", _lazy("._crypt", "run_encrypt"))
    add_arguments(p, decrypt=False)
    p = command(
        "decrypt",
        _lazy("._crypt", "run_decrypt"),
    )
    add_arguments(p, decrypt=True)

    p = command("rekey", _lazy("._rekey", "run_rekey"))
    if command_word in (None, "rekey"):
        from ._rekey import add_rekey_arguments

        add_rekey_arguments(p)
    p = command(
        "rekey-objects",
        _lazy("._cluster", "run_cluster", operation="rekey"),
    )
    add_cluster_command(p, "rekey")
    add_native_arguments(p)
    p = command(
        "verify-objects",
        _lazy("._cluster", "run_cluster", operation="verify"),
    )
    add_cluster_command(p, "verify")

    p = command(
        "hash",
        _lazy("._commands", "run_hash"),
    )
    p.add_argument("files", nargs="*", metavar="FILE", help="files (default or '-': stdin)")
    p.add_argument("--algo", choices=HASH_ALGOS, default="sha256", help="default sha256")
    p.add_argument(
        "--hmac-key",
        metavar="KEYFILE",
        help="symmetric key file: HMAC-SHA-256/512, or keyed BLAKE3",
    )
    p.add_argument(
        "-c",
        "--check",
        action="store_true",
        help="read '<digest>  <name>' lines from FILES (as sha256sum -c) and check each",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")

    p = command(
        "sign",
        _lazy("._commands", "run_sign"),
    )
    p.add_argument("input", nargs="?", metavar="IN", help="input (default: stdin)")
    p.add_argument("-k", "--key", required=True, metavar="ED25519KEY", help="Ed25519 key file")
    p.add_argument("-o", "--output", metavar="SIG", help="signature file (default: stdout)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")

    p = command(
        "verify",
        _lazy("._commands", "run_verify"),
    )
    p.add_argument("input", nargs="?", metavar="IN", help="input (default: stdin)")
    p.add_argument(
        "-p",
        "--public-key",
        required=True,
        metavar="PUBKEY",
        help="the base64 public key, a file holding it, or the Ed25519 key file",
    )
    p.add_argument("-s", "--signature", required=True, metavar="SIG", help="signature file")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")

    for name in ("serve", "connect"):
        p = command(name, _lazy("._commands", f"run_{name}"))
        if name == "serve":
            p.add_argument("port", type=int, metavar="PORT", help="TCP port (0: any free port)")
            p.add_argument("--host", default="127.0.0.1", help="address to bind (127.0.0.1)")
            p.add_argument(
                "--allow",
                action="append",
                default=[],
                metavar="PUBKEY",
                help="accept only clients with this X25519 public key; repeatable",
            )
        else:
            p.add_argument("host", metavar="HOST")
            p.add_argument("port", type=int, metavar="PORT")
            p.add_argument(
                "--server-key",
                metavar="PUBKEY",
                help="the server's X25519 public key (sc-x25519-pub1..., base64 or a file)",
            )
        p.add_argument("--psk-file", metavar="KEYFILE", help="pre-shared symmetric key file")
        p.add_argument("-k", "--key", metavar="KEYFILE", help="own X25519 identity file")
        p.add_argument(
            "-o",
            "--output",
            metavar="FILE",
            help="write what the peer sends to FILE, only once it ended the session "
            "(default: stdout)",
        )
        p.add_argument("-q", "--quiet", action="store_true", help="no status lines")

    p = command(
        "clean",
        _lazy("._commands", "run_clean"),
    )
    p.add_argument("directories", nargs="*", metavar="DIR", help="directories (default: .)")
    p.add_argument(
        "--older-than",
        type=float,
        default=3600.0,
        metavar="SECONDS",
        help="only temporaries not modified for this long (default 3600)",
    )

    p = command("backup", _lazy("._backup", "run_backup"))
    if command_word in (None, "backup"):  # its actions' parsers only when it runs (start-up)
        from ._backup import add_backup_arguments

        add_backup_arguments(p)

    p = command(
        "bench", _lazy("._commands", "run_bench"), "run the benchmarks (from a source checkout)"
    )
    p.add_argument("--quick", action="store_true", help="smaller sizes, fewer repeats")
    return parser


_DECRYPT_FLAGS = ("-d", "--decrypt")
_ENCRYPT_FLAGS = ("-e", "--encrypt")


def age_style(argv: list[str]) -> list[str]:
    """age's command line (``streamcrypt [-e|-d] [-r ...] [-i ...] [-o OUT] [IN]``, no
    command word) as ``encrypt ...`` / ``decrypt ...``; any other line unchanged.

    It applies only when the first argument is an option other than ``-h``/``--help``/
    ``--version``: ``-d``/``--decrypt`` anywhere (before ``--``) means decrypt, otherwise
    it encrypts, as age does (``-e``/``--encrypt`` optional)."""
    if not argv or not argv[0].startswith("-") or argv[0] in ("-h", "--help", "--version"):
        return argv
    end = argv.index("--") if "--" in argv else len(argv)
    options = argv[:end]
    decrypt = any(a in _DECRYPT_FLAGS for a in options)
    if decrypt and any(a in _ENCRYPT_FLAGS for a in options):
        _Parser(prog=PROG).error("-e (encrypt) and -d (decrypt) exclude each other")
    rest = [a for a in options if a not in _DECRYPT_FLAGS + _ENCRYPT_FLAGS] + argv[end:]
    return ["decrypt" if decrypt else "encrypt", *rest]
