"""libsodium secretstream as async streams; the codec is :mod:`streamcrypt.codecs.secretstream`.

secretstream ratchets its state message by message, so it runs sequentially (large
pieces still leave the event loop, one at a time).
"""

from __future__ import annotations

from ..abc import Buffer
from ..codecs import FormatOptions
from ..codecs.secretstream import DEFAULT_CHUNK_SIZE, FORMAT
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
) -> _run.Call:
    """The key, plaintext bytes per message and associated data."""
    return _run.Call(FormatOptions(key=key, segment_size=segment_size, aad=aad), policy)


encrypt = _run.streaming(
    FORMAT, _options, "encrypt", "Encrypt an async source as a secretstream of fixed-size messages."
)
decrypt = _run.streaming(
    FORMAT,
    _options,
    "decrypt",
    "Decrypt a secretstream; raises TruncatedStreamError if FINAL never came.",
)
