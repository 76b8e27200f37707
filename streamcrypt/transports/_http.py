"""What the HTTP middlewares share: their settings, checked once, and what they select.

Framework-free (no starlette, no aiohttp), so both the ASGI middleware and the aiohttp
helpers build on it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, TypeAlias

from ..codecs.ece import DEFAULT_MAX_RECORD_SIZE, DEFAULT_RECORD_SIZE, EceEncryptor
from ..engine import DEFAULT_POLICY, OffloadPolicy
from ..errors import InvalidParameterError
from ..keys import KeyRing

__all__ = ["EncryptionSettings", "Unencryptable"]

#: What to do with a response a gzip middleware would pass through untouched (file
#: sends, 206 answers, bodies already carrying a Content-Encoding): encrypt it, or refuse
#: it with a 500. Never send it in clear.
Unencryptable: TypeAlias = Literal["encrypt", "refuse"]


@dataclass(frozen=True, slots=True)
class EncryptionSettings:
    """What an encrypting HTTP middleware encrypts, and how. Build with :meth:`create`."""

    keys: KeyRing
    record_size: int = DEFAULT_RECORD_SIZE
    include_paths: tuple[str, ...] | None = None
    exclude_paths: tuple[str, ...] = ()
    content_types: frozenset[str] | None = None
    on_unencryptable: Unencryptable = "encrypt"
    decrypt_requests: bool = True
    max_record_size: int = DEFAULT_MAX_RECORD_SIZE
    policy: OffloadPolicy | None = DEFAULT_POLICY

    @classmethod
    def create(
        cls,
        *,
        keys: KeyRing,
        record_size: int = DEFAULT_RECORD_SIZE,
        include_paths: Iterable[str] | None = None,
        exclude_paths: Iterable[str] = (),
        content_types: Iterable[str] | None = None,
        on_unencryptable: Unencryptable = "encrypt",
        decrypt_requests: bool = True,
        max_record_size: int = DEFAULT_MAX_RECORD_SIZE,
        policy: OffloadPolicy | None = DEFAULT_POLICY,
    ) -> EncryptionSettings:
        """Check and normalise the options; raises :class:`InvalidParameterError`."""
        if not isinstance(keys, KeyRing):
            raise InvalidParameterError(
                f"keys must be a KeyRing of 16-byte keys, not {type(keys).__name__}"
            )
        if on_unencryptable not in ("encrypt", "refuse"):
            raise InvalidParameterError(
                f"on_unencryptable must be 'encrypt' or 'refuse', not {on_unencryptable!r}"
            )
        EceEncryptor(keys, record_size=record_size)  # the record size and active key, now
        return cls(
            keys=keys,
            record_size=record_size,
            include_paths=None if include_paths is None else tuple(include_paths),
            exclude_paths=tuple(exclude_paths),
            content_types=None
            if content_types is None
            else frozenset(t.partition(";")[0].strip().lower() for t in content_types),
            on_unencryptable=on_unencryptable,
            decrypt_requests=decrypt_requests,
            max_record_size=max_record_size,
            policy=policy,
        )

    def selects(self, path: str) -> bool:
        """Whether requests to ``path`` are handled (prefix match)."""
        if self.include_paths is not None and not any(
            path.startswith(p) for p in self.include_paths
        ):
            return False
        return not any(path.startswith(p) for p in self.exclude_paths)

    def encrypts_type(self, content_type: str | bytes | None) -> bool:
        """Whether a response of this ``Content-Type`` is encrypted (``text/*`` works)."""
        if self.content_types is None:
            return True
        if isinstance(content_type, bytes):
            content_type = content_type.decode("latin-1")
        media = (content_type or "").partition(";")[0].strip().lower()
        return media in self.content_types or f"{media.partition('/')[0]}/*" in self.content_types
