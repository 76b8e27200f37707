"""libsodium secretstream as async streams; the codec is :mod:`streamcrypt.codecs.secretstream`.

secretstream ratchets its state message by message, so it runs sequentially (large
pieces still leave the event loop, one at a time).
"""

from __future__ import annotations

from ..abc import Buffer
from ..codecs import FormatOptions
from ..codecs.secretstream import DEFAULT_CHUNK_SIZE, FORMAT
from ..deprecation import renamed_keyword
from ..engine import DEFAULT_POLICY, OffloadPolicy
from ..keys import SecretKey
from . import run as _run

__all__ = ["decrypt", "encrypt"]


def _options(
    name: str,
    key: Buffer | SecretKey,
    *,
    segment_size: int = DEFAULT_CHUNK_SIZE,
    aad: Buffer = b"",
    policy: OffloadPolicy | None = DEFAULT_POLICY,
    chunk_size: int | None = None,
) -> _run.Call:
    """The key, plaintext bytes per message (``chunk_size=`` is its deprecated name) and
    associated data."""
    size = renamed_keyword(
        f"formats.secretstream.{name}",
        "chunk_size",
        "segment_size",
        chunk_size,
        segment_size,
        DEFAULT_CHUNK_SIZE,
        stacklevel=5,
    )
    return _run.Call(FormatOptions(key=key, segment_size=size, aad=aad), policy)


encrypt = _run.streaming(
    FORMAT, _options, "encrypt", "Encrypt an async source as a secretstream of fixed-size messages."
)
decrypt = _run.streaming(
    FORMAT,
    _options,
    "decrypt",
    "Decrypt a secretstream; raises TruncatedStreamError if FINAL never came.",
)
