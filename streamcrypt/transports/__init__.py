"""Layer 4: adapters to the world (encrypted sockets, files, HTTP middleware)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from ..codecs.records import DEFAULT_REKEY_INTERVAL as DEFAULT_REKEY_INTERVAL
    from ._asgi import BODY_DECRYPTED as BODY_DECRYPTED
    from ._asgi import EncryptionMiddleware as EncryptionMiddleware
    from ._atomic import commit_temporary as commit_temporary
    from ._atomic import create_temporary as create_temporary
    from ._atomic import discard_temporary as discard_temporary
    from ._atomic import fsync_directory as fsync_directory
    from ._atomic import write_atomic as write_atomic
    from ._config import DEFAULT_HANDSHAKE_TIMEOUT as DEFAULT_HANDSHAKE_TIMEOUT
    from ._config import DEFAULT_IDLE_TIMEOUT as DEFAULT_IDLE_TIMEOUT
    from ._config import DEFAULT_RECORD_TIMEOUT as DEFAULT_RECORD_TIMEOUT
    from ._config import AcceptPeer as AcceptPeer
    from ._config import Cipher as Cipher
    from ._config import NoiseHash as NoiseHash
    from ._files import FORMATS as FORMATS
    from ._files import EncryptedFile as EncryptedFile
    from ._files import FileOpener as FileOpener
    from ._files import open_file as open_file
    from ._files import remove_stale_temporaries as remove_stale_temporaries
    from ._http import DEFAULT_HTTP_RECORD_SIZE as DEFAULT_HTTP_RECORD_SIZE
    from ._http import Unencryptable as Unencryptable
    from ._listener import DEFAULT_MAX_CONNECTIONS as DEFAULT_MAX_CONNECTIONS
    from ._listener import EncryptedListener as EncryptedListener
    from ._listener import connect as connect
    from ._listener import serve as serve
    from ._stream import EncryptedStream as EncryptedStream
    from ._stream import EncryptedStreamAttribute as EncryptedStreamAttribute


# Where each name is defined: imported from there on first use (sockets, TLS and the
# async engine cost ~100 ms; the command's file outputs need only the temporaries).
_TABLE = {
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
}
#: Plumbing for streamcrypt's own layers (the command's outputs, the backup store, the
#: cluster): importable from here, not public API, so not in ``__all__``.
_PLUMBING = {
    "commit_temporary",
    "create_temporary",
    "discard_temporary",
    "fsync_directory",
    "write_atomic",
}
__all__ = sorted(n for names in _TABLE.values() for n in names if n not in _PLUMBING)
_lazy_getattr, _lazy_dir = lazy_exports(__name__, _TABLE)

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
