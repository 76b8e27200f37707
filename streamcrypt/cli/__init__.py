"""The ``streamcrypt`` command (also ``python -m streamcrypt``); see docs/CLI.md.

Every failure ends in one line on stderr, ``streamcrypt: error: <message>``, and a
documented exit code (0 ok, 1 data failed, 2 usage, 3 key problem, 4 I/O; 130 on
Ctrl-C), never a traceback and never key bytes.
"""

from __future__ import annotations

import os
import sys
import warnings

from ._errors import EXIT_INTERRUPTED, EXIT_IO

TYPE_CHECKING = False  # ``typing.TYPE_CHECKING`` without importing typing (start-up)
if TYPE_CHECKING:
    from collections.abc import Sequence

    from ._parser import Runner
else:  # the same class, loaded with the interpreter: collections.abc costs 2.9 ms of start-up
    from _collections_abc import Sequence

__all__ = ["main", "run"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``); returns the exit code."""
    given = list(sys.argv[1:] if argv is None else argv)
    if given == ["--version"]:  # before building the parser: its formatter costs start-up
        from .. import __version__

        sys.stdout.write(f"streamcrypt {__version__}\n")
        return 0
    if given in (["--help"], ["-h"]):  # the command list, without argparse (start-up)
        from ._usage import MIN_COLUMNS, columns, top_help

        width = columns()
        if width >= MIN_COLUMNS:
            sys.stdout.write(top_help(width))
            return 0
    from ._parser import age_style, build_parser  # argparse: after --version
    from ._usage import PROG

    line = age_style(given)
    parser = build_parser(line[0] if line else "")
    if line[:1] == ["verify"] and any(a.partition("=")[0] == "--scheduler" for a in line):
        parser.error(
            "verify checks Ed25519ph signatures; to authenticate encrypted objects on a "
            "cluster, run 'streamcrypt verify-objects --scheduler ADDRESS SRC_URL'"
        )
    args = parser.parse_args(line)
    args.age_style = line is not given  # age's own command line (no command word)
    runner: Runner = args.run
    try:
        with warnings.catch_warnings():  # the library's warnings, one line each
            warnings.showwarning = _show_warning
            return runner(args)
    except KeyboardInterrupt:
        sys.stderr.write(f"\n{PROG}: interrupted\n")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # the reader of stdout went away (``| head``): nothing more to say to it
        return EXIT_IO
    except Exception as exc:  # every failure: one line, a documented code, no traceback
        from ._errors import describe, exit_code

        sys.stderr.write(f"{PROG}: error: {describe(exc)}\n")
        return exit_code(exc)


def _show_warning(message: Warning | str, *_: object, **__: object) -> None:
    """A warning (e.g. a key file others may read) as one line on stderr."""
    from ._usage import PROG

    sys.stderr.write(f"{PROG}: warning: {message}\n")


def run() -> None:
    """The ``streamcrypt`` program (console script and ``python -m streamcrypt``): exits
    with :func:`main`'s code.

    After Ctrl-C (code 130) the process ends at once with ``os._exit``, once the outputs
    were cleaned up and stdout/stderr flushed: a worker thread may still be blocked
    reading a terminal or a pipe, and a normal interpreter exit would wait for it, until
    the input closed."""
    code = main()
    if code == EXIT_INTERRUPTED:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)
    raise SystemExit(code)
