"""Doubling in GF(2^128) on the little-endian integer form of a block (XTS, EME).

The masks these modes double derive from the key, so the doubling must not branch on
their bits: the reduction is selected with a mask, never an ``if``. This is the only
GF(2^128) arithmetic in streamcrypt; no native library it uses exposes the operation.
"""

from __future__ import annotations

_MASK = (1 << 128) - 1
#: x^7 + x^2 + x + 1: the low terms of the field polynomial x^128 + x^7 + x^2 + x + 1.
_REDUCTION = 0x87


def double(x: int) -> int:
    """``x * 2`` in GF(2^128); no branch on the bits of ``x``."""
    return ((x << 1) & _MASK) ^ (_REDUCTION & -(x >> 127))


def doublings(x: int, count: int) -> list[int]:
    """``[x, 2x, 4x, ...]``: ``count`` successive doublings of ``x``, ``x`` first."""
    out = [x]
    for _ in range(count - 1):
        x = double(x)
        out.append(x)
    return out
