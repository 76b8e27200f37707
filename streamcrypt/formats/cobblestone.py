"""C2SP chunked encryption (Cobblestone) as async streams; codec: :mod:`streamcrypt.codecs.cobblestone`."""

from __future__ import annotations

from ..abc import Buffer
from ..codecs import FormatOptions
from ..codecs.cobblestone import FORMAT, Suite
from ..engine import DEFAULT_POLICY, OffloadPolicy
from ..keys import SecretKey
from . import run as _run

__all__ = ["decrypt", "decrypt_bytes", "encrypt", "encrypt_bytes"]


def _options(
    name: str,
    key: Buffer | SecretKey,
    *,
    aad: Buffer = b"",
    suite: Suite | None = None,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> _run.Call:
    """``aad`` is the spec's context."""
    return _run.Call(FormatOptions(key=key, suite=suite, aad=aad), policy)


encrypt = _run.streaming(
    FORMAT,
    _options,
    "encrypt",
    "Encrypt an async source into C2SP chunked encryption, chunks sealed in parallel.\n\n"
    "``aad`` is the spec's context.",
)
decrypt = _run.streaming(
    FORMAT, _options, "decrypt", "Decrypt C2SP chunked encryption, yielding only verified chunks."
)
encrypt_bytes = _run.one_shot(
    FORMAT,
    _options,
    "encrypt_bytes",
    "Encrypt a whole message (random salt), chunks sealed on all cores.",
)
decrypt_bytes = _run.one_shot(
    FORMAT,
    _options,
    "decrypt_bytes",
    "Decrypt a whole message, chunks opened on all cores; all or nothing.",
)
