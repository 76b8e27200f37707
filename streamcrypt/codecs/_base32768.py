"""base32768 as rclone names files with it (github.com/Max-Sum/base32768, ``SafeEncoding``).

Each character carries 15 bits (or 7 for the last), so a name costs about half the
characters of base64 on services that count characters, not bytes. The alphabet is 1028
BMP code points whose low five bits are zero, each the start of a block of 32: the four
lowest start the 7-bit blocks (the final character), the other 1024 the 15-bit blocks,
in code point order. The input is read as a big-endian bit string cut into 15-bit
characters; 1..7 bits left at the end go into one 7-bit character, 8..14 bits into one
15-bit character, padded with 1 bits in both cases.

Decoding here is strict: a character outside the alphabet, a 7-bit character that is not
the last, or non-canonical padding raises :class:`FormatError`.
"""

from __future__ import annotations

from ..errors import FormatError

# The alphabet's block starts as ranges (first, last) stepping by 32, from the library's
# safe alphabet.
_RANGES = (
    (0x0180, 0x0180), (0x0240, 0x0280), (0x04A0, 0x04A0), (0x0500, 0x0500),
    (0x0680, 0x06A0), (0x0760, 0x0780), (0x07C0, 0x07C0), (0x1000, 0x1000),
    (0x10A0, 0x10A0), (0x1100, 0x1140), (0x1180, 0x1180), (0x11E0, 0x1220),
    (0x1260, 0x1260), (0x12E0, 0x12E0), (0x1320, 0x1320), (0x13A0, 0x13C0),
    (0x1420, 0x1640), (0x16A0, 0x16C0), (0x1780, 0x1780), (0x1820, 0x1840),
    (0x18C0, 0x18C0), (0x1980, 0x1980), (0x19E0, 0x19E0), (0x1A20, 0x1A20),
    (0x1BC0, 0x1BC0), (0x1C00, 0x1C00), (0x1D00, 0x1D00), (0x21E0, 0x21E0),
    (0x22C0, 0x22C0), (0x2340, 0x23C0), (0x2400, 0x2400), (0x2500, 0x2740),
    (0x2780, 0x27A0), (0x2800, 0x2960), (0x29A0, 0x29A0), (0x2A20, 0x2A40),
    (0x2A80, 0x2AA0), (0x2AE0, 0x2B40), (0x2C00, 0x2C00), (0x2C80, 0x2CC0),
    (0x2D00, 0x2D00), (0x2D40, 0x2D40), (0x2EA0, 0x2EC0), (0x31C0, 0x31C0),
    (0x3400, 0x4D80), (0x4DC0, 0x9FA0), (0xA000, 0xA460), (0xA4A0, 0xA4A0),
    (0xA500, 0xA5E0), (0xA640, 0xA640), (0xA6A0, 0xA6C0), (0xA700, 0xA740),
    (0xA780, 0xA780), (0xA840, 0xA840),
)  # fmt: skip

_STARTS = [c for first, last in _RANGES for c in range(first, last + 1, 32)]
assert len(_STARTS) == 1028
_SHORT = _STARTS[:4]  # 7-bit characters
_LONG = _STARTS[4:]  # 15-bit characters
#: block (code point >> 5) -> (value of the block's first character, bits it carries)
_DECODE = {c >> 5: (i << 5, 7) for i, c in enumerate(_SHORT)} | {
    c >> 5: (i << 5, 15) for i, c in enumerate(_LONG)
}


def encode(data: bytes) -> str:
    """The base32768 text of ``data``."""
    out: list[str] = []
    acc = nbits = 0
    for byte in data:
        acc = (acc << 8) | byte
        nbits += 8
        if nbits >= 15:
            nbits -= 15
            v = acc >> nbits
            acc &= (1 << nbits) - 1
            out.append(chr(_LONG[v >> 5] | (v & 31)))
    if nbits:
        width = 7 if nbits <= 7 else 15
        v = (acc << (width - nbits)) | ((1 << (width - nbits)) - 1)
        table = _SHORT if width == 7 else _LONG
        out.append(chr(table[v >> 5] | (v & 31)))
    return "".join(out)


def decode(text: str) -> bytes:
    """The bytes ``text`` encodes; raises :class:`FormatError` for anything not canonical."""
    acc = nbits = 0
    last = len(text) - 1
    for i, ch in enumerate(text):
        entry = _DECODE.get(ord(ch) >> 5) if ord(ch) <= 0xFFFF else None
        if entry is None:
            raise FormatError(f"not base32768: character {i} is outside the alphabet")
        base, width = entry
        if width == 7 and i != last:
            raise FormatError("not base32768: a 7-bit character before the end")
        acc = (acc << width) | base | (ord(ch) & 31)
        nbits += width
    pad = nbits % 8
    data = (acc >> pad).to_bytes(nbits // 8, "big") if nbits >= 8 else b""
    if encode(data) != text:
        raise FormatError("not canonical base32768 (padding bits or length)")
    return data
