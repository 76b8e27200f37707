"""Bech32 (BIP 173) without the 90-character limit, as age uses it for keys.

A Bech32 string is ``hrp || "1" || data || checksum``: the data bytes regrouped into
5-bit symbols of the 32-letter alphabet, and a 6-symbol BCH checksum over the expanded
human-readable part and the data (the original Bech32 constant 1, not Bech32m). A string
is all lowercase or all uppercase; the checksum is always computed over the lowercase
form. age drops BIP 173's length limit (post-quantum recipients are ~1950 characters).
"""

from __future__ import annotations

from collections.abc import Iterable

from ..errors import FormatError

_CHARSET = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"
_VALUES = {c: i for i, c in enumerate(_CHARSET)}
_GENERATOR = (0x3B6A57B2, 0x26508E6D, 0x1EA119FA, 0x3D4233DD, 0x2A1462B3)
_CHECKSUM_SIZE = 6


def _polymod(values: list[int]) -> int:
    chk = 1
    for v in values:
        top = chk >> 25
        chk = (chk & 0x1FFFFFF) << 5 ^ v
        for i, g in enumerate(_GENERATOR):
            if (top >> i) & 1:
                chk ^= g
    return chk


def _hrp_expand(hrp: str) -> list[int]:
    return [ord(c) >> 5 for c in hrp] + [0] + [ord(c) & 31 for c in hrp]


def _regroup(values: Iterable[int], size: int, to: int) -> tuple[list[int], int, int]:
    """``values`` of ``size`` bits regrouped into ``to``-bit ones (BIP 173's
    convertbits): the whole groups, then the bits left over and how many there are."""
    acc = bits = 0
    out: list[int] = []
    for v in values:
        acc = (acc << size) | v
        bits += size
        while bits >= to:
            bits -= to
            out.append((acc >> bits) & ((1 << to) - 1))
    return out, acc & ((1 << bits) - 1), bits


def bech32_encode(hrp: str, data: bytes, *, upper: bool = False) -> str:
    """Encode ``data`` under ``hrp``; all uppercase when ``upper`` (age secret keys).

    Raises :class:`FormatError` for an empty or non-ASCII human-readable part.
    """
    lower = hrp.lower()
    if not lower or any(not 33 <= ord(c) <= 126 for c in lower):
        raise FormatError("a Bech32 human-readable part is 1 or more printable ASCII characters")
    symbols, rest, bits = _regroup(data, 8, 5)
    if bits:  # the last symbol is zero-padded
        symbols.append(rest << (5 - bits))
    mod = _polymod(_hrp_expand(lower) + symbols + [0] * _CHECKSUM_SIZE) ^ 1
    checksum = [(mod >> 5 * (5 - i)) & 31 for i in range(_CHECKSUM_SIZE)]
    text = lower + "1" + "".join(_CHARSET[v] for v in symbols + checksum)
    return text.upper() if upper else text


def bech32_decode(text: str) -> tuple[str, bytes]:
    """Decode a Bech32 string: the lowercase human-readable part and the data bytes.

    Raises :class:`FormatError` for mixed case, a bad character, a missing separator, a
    bad checksum or bad padding.
    """
    if any(not 33 <= ord(c) <= 126 for c in text):
        raise FormatError("Bech32 string has a character outside printable ASCII")
    lower = text.lower()
    if text != lower and text != text.upper():
        raise FormatError("Bech32 string mixes upper and lower case")
    pos = lower.rfind("1")
    if pos < 1 or pos + 1 + _CHECKSUM_SIZE > len(lower):
        raise FormatError("Bech32 string has no human-readable part or is too short")
    hrp = lower[:pos]
    try:
        symbols = [_VALUES[c] for c in lower[pos + 1 :]]
    except KeyError:
        raise FormatError("Bech32 string has a character outside the Bech32 alphabet") from None
    if _polymod(_hrp_expand(hrp) + symbols) != 1:
        raise FormatError("Bech32 checksum does not match: the key string is mistyped or cut")
    data, rest, bits = _regroup(symbols[:-_CHECKSUM_SIZE], 5, 8)
    if bits >= 5 or rest:
        raise FormatError("Bech32 data has invalid padding bits: corrupt or truncated key")
    return hrp, bytes(data)
