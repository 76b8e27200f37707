"""Layer 4: adapters to the world (encrypted sockets, files, HTTP middleware)."""

from __future__ import annotations

from ._asgi import EncryptionMiddleware, Unencryptable

__all__ = [
    "EncryptionMiddleware",
    "Unencryptable",
]
