"""Layer 4: adapters to the world (encrypted sockets, files, HTTP middleware)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._asgi import EncryptionMiddleware
from ._atomic import (
    commit_temporary,
    create_temporary,
    discard_temporary,
    fsync_directory,
    write_atomic,
)
from ._files import (
    FORMATS,
    EncryptedFile,
    FileFormat,
    FileOpener,
    FileOptions,
    open_file,
    remove_stale_temporaries,
)
from ._http import EncryptionSettings, Unencryptable
from ._stream import (
    DEFAULT_HANDSHAKE_TIMEOUT,
    DEFAULT_REKEY_INTERVAL,
    MAX_RECORD_DATA,
    AcceptPeer,
    EncryptedListener,
    EncryptedStream,
    EncryptedStreamAttribute,
    connect,
    serve,
)

__all__ = [
    "DEFAULT_HANDSHAKE_TIMEOUT",
    "DEFAULT_REKEY_INTERVAL",
    "FORMATS",
    "MAX_RECORD_DATA",
    "AcceptPeer",
    "EncryptedFile",
    "EncryptedListener",
    "EncryptedStream",
    "EncryptedStreamAttribute",
    "EncryptionMiddleware",
    "EncryptionSettings",
    "FileFormat",
    "FileOpener",
    "FileOptions",
    "Unencryptable",
    "commit_temporary",
    "connect",
    "create_temporary",
    "discard_temporary",
    "fsync_directory",
    "open_file",
    "remove_stale_temporaries",
    "serve",
    "write_atomic",
]

# The aiohttp helpers need the optional ``aiohttp`` extra, so they load on first use
# (``from streamcrypt.transports import setup_encryption``) and are left out of
# ``__all__``: the package itself imports without aiohttp.
_AIOHTTP_NAMES = frozenset(
    {
        "SETTINGS_KEY",
        "EncryptedStreamResponse",
        "decrypt_response",
        "encrypted_body",
        "setup_encryption",
    }
)
if TYPE_CHECKING:
    from ._aiohttp import SETTINGS_KEY as SETTINGS_KEY
    from ._aiohttp import EncryptedStreamResponse as EncryptedStreamResponse
    from ._aiohttp import decrypt_response as decrypt_response
    from ._aiohttp import encrypted_body as encrypted_body
    from ._aiohttp import setup_encryption as setup_encryption


def __getattr__(name: str) -> Any:
    if name in _AIOHTTP_NAMES:
        from . import _aiohttp

        return getattr(_aiohttp, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
