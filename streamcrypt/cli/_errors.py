"""Exit codes of the ``streamcrypt`` command and the mapping from typed errors to them.

=====  ====================================================================================
code   meaning
=====  ====================================================================================
0      success
1      the data failed: authentication (wrong key of the right kind, tampering, a bad
       signature), a malformed or unsupported format, a truncated stream, a limit, a failed
       handshake
2      usage: bad or conflicting options, an output that would be overwritten, no terminal
       to prompt on
3      key problem: a key file missing, unreadable, malformed, of the wrong kind or size;
       no key given; the data names a key (key id, recipient) the given keys do not hold;
       an age plugin missing, failing or out of protocol
4      I/O: an input file missing or unreadable, an output that cannot be written, a
       network connection refused or lost
130    interrupted (Ctrl-C)
=====  ====================================================================================
"""

from __future__ import annotations

from ..errors import (
    FileChangedError,
    InvalidKeySizeError,
    InvalidParameterError,
    InvalidPublicKeyError,
    PluginError,
    StoreNotFoundError,
    StreamCryptError,
    TokenError,
    UnknownKeyError,
)

EXIT_OK = 0
EXIT_DATA = 1
EXIT_USAGE = 2
EXIT_KEY = 3
EXIT_IO = 4
EXIT_INTERRUPTED = 130


class CliError(Exception):
    """An error the command reports in one line and exits with ``code``."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def exit_code(exc: BaseException) -> int:
    """The documented exit code for ``exc`` (see the module docstring)."""
    if isinstance(exc, CliError):
        return exc.code
    if isinstance(
        exc,
        UnknownKeyError | InvalidKeySizeError | InvalidPublicKeyError | PluginError | TokenError,
    ):
        return EXIT_KEY
    if isinstance(exc, InvalidParameterError):
        return EXIT_USAGE
    if isinstance(exc, StoreNotFoundError | FileChangedError):  # as a missing file, a lost write
        return EXIT_IO
    if isinstance(exc, StreamCryptError):  # authentication, format, truncation, limits...
        return EXIT_DATA
    import anyio  # here, not at the top: the command's start-up skips it (docs/CLI.md)

    if isinstance(
        exc, OSError | anyio.BrokenResourceError | anyio.ClosedResourceError | anyio.EndOfStream
    ):
        return EXIT_IO
    if isinstance(exc, KeyboardInterrupt):
        return EXIT_INTERRUPTED
    return EXIT_DATA


def describe(exc: BaseException) -> str:
    """A one-line message for ``exc`` (library messages never hold key bytes or plaintext)."""
    if isinstance(exc, OSError) and exc.strerror:
        where = exc.filename if exc.filename is not None else None
        return f"{where}: {exc.strerror}" if where is not None else exc.strerror
    import anyio

    if isinstance(exc, anyio.BrokenResourceError | anyio.ClosedResourceError):
        return "the connection was closed or broken"
    if isinstance(exc, anyio.EndOfStream):
        return "the connection ended early"
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    text = " ".join(str(exc).split())
    return text or type(exc).__name__
