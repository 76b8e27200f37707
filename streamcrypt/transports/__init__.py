"""Layer 4: adapters to the world (encrypted sockets, files, HTTP middleware)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from ..codecs.records import DEFAULT_REKEY_INTERVAL
    from ._asgi import BODY_DECRYPTED, EncryptionMiddleware
    from ._atomic import (
        commit_temporary,
        create_temporary,
        discard_temporary,
        fsync_directory,
        write_atomic,
    )
    from ._config import (
        DEFAULT_HANDSHAKE_TIMEOUT,
        DEFAULT_IDLE_TIMEOUT,
        DEFAULT_RECORD_TIMEOUT,
        AcceptPeer,
        Cipher,
        NoiseHash,
    )
    from ._files import (
        FORMATS,
        EncryptedFile,
        FileOpener,
        open_file,
        remove_stale_temporaries,
    )
    from ._http import DEFAULT_HTTP_RECORD_SIZE, Unencryptable
    from ._listener import DEFAULT_MAX_CONNECTIONS, EncryptedListener, connect, serve
    from ._stream import EncryptedStream, EncryptedStreamAttribute

__all__ = [
    "BODY_DECRYPTED",
    "DEFAULT_HANDSHAKE_TIMEOUT",
    "DEFAULT_HTTP_RECORD_SIZE",
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_RECORD_TIMEOUT",
    "DEFAULT_REKEY_INTERVAL",
    "FORMATS",
    "AcceptPeer",
    "Cipher",
    "EncryptedFile",
    "EncryptedListener",
    "EncryptedStream",
    "EncryptedStreamAttribute",
    "EncryptionMiddleware",
    "FileOpener",
    "NoiseHash",
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

# Where each name is defined: imported from there on first use (sockets, TLS and the
# async engine cost ~100 ms; the command's file outputs need only the temporaries).
_lazy_getattr, _lazy_dir = lazy_exports(
    __name__,
    {
        "._asgi": ("BODY_DECRYPTED", "EncryptionMiddleware"),
        "._atomic": (
            "commit_temporary",
            "create_temporary",
            "discard_temporary",
            "fsync_directory",
            "write_atomic",
        ),
        "._files": (
            "FORMATS",
            "EncryptedFile",
            "FileOpener",
            "open_file",
            "remove_stale_temporaries",
        ),
        "._http": ("DEFAULT_HTTP_RECORD_SIZE", "Unencryptable"),
        "..codecs.records": ("DEFAULT_REKEY_INTERVAL",),
        "._config": (
            "DEFAULT_HANDSHAKE_TIMEOUT",
            "DEFAULT_IDLE_TIMEOUT",
            "DEFAULT_RECORD_TIMEOUT",
            "AcceptPeer",
            "Cipher",
            "NoiseHash",
        ),
        "._listener": ("DEFAULT_MAX_CONNECTIONS", "EncryptedListener", "connect", "serve"),
        "._stream": ("EncryptedStream", "EncryptedStreamAttribute"),
    },
)

# The aiohttp helpers need the optional ``aiohttp`` extra, so they load on first use
# (``from streamcrypt.transports import setup_encryption``) and are left out of
# ``__all__``: the package itself imports without aiohttp.
_AIOHTTP_NAMES = frozenset(
    {
        "BODY_DECRYPTED_KEY",
        "EncryptedStreamResponse",
        "decrypt_response",
        "encrypted_body",
        "setup_encryption",
    }
)
if TYPE_CHECKING:
    from ._aiohttp import BODY_DECRYPTED_KEY as BODY_DECRYPTED_KEY
    from ._aiohttp import EncryptedStreamResponse as EncryptedStreamResponse
    from ._aiohttp import decrypt_response as decrypt_response
    from ._aiohttp import encrypted_body as encrypted_body
    from ._aiohttp import setup_encryption as setup_encryption


def __dir__() -> list[str]:
    return sorted({*_lazy_dir(), *_AIOHTTP_NAMES})  # the lazy names too (PEP 562)


def __getattr__(name: str) -> Any:
    if name in _AIOHTTP_NAMES:
        try:
            from . import _aiohttp
        except ModuleNotFoundError as exc:
            if exc.name is None or exc.name.partition(".")[0] not in {"aiohttp", "multidict"}:
                raise
            raise ModuleNotFoundError(
                f"streamcrypt.transports.{name} needs aiohttp, which is not installed: "
                "install the extra with  pip install 'streamcrypt[aiohttp]'",
                name=exc.name,
            ) from exc
        return getattr(_aiohttp, name)
    return _lazy_getattr(name)
