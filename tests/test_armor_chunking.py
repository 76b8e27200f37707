"""One verdict whatever the chunking for armored age (issue 14, finding 4).

``streamcrypt.decrypt`` of age used to look for armor in the first 10 bytes of an async source
only, so leading whitespace split across pieces turned an armored file into a refused
binary one; and armor that broke after an age header no identity opens was a FormatError
whole and an UnknownKeyError in pieces.
"""

from __future__ import annotations

import base64
import random
from collections.abc import AsyncIterator, Sequence

import anyio
import pytest
from support import age_decrypt, age_encrypt

import streamcrypt
from streamcrypt.codecs import age, armor
from streamcrypt.errors import FormatError, StreamCryptError, UnknownKeyError

ME = age.X25519Identity(bytes(range(1, 33)))
OTHER = age.X25519Identity(bytes(range(2, 34)))
PAYLOAD = b"armored payload " * 10
ARMORED = age_encrypt(PAYLOAD, recipients=[ME.recipient], armor=True)


def _stream(pieces: Sequence[bytes], identity: age.X25519Identity = ME) -> bytes:
    async def source() -> AsyncIterator[bytes]:
        for piece in pieces:
            yield piece

    async def run() -> bytes:
        out = streamcrypt.decrypt(source(), format="age", identities=[identity], policy=None)
        return b"".join([chunk async for chunk in out])

    return anyio.run(run)


def _verdict(call: object) -> str:
    try:
        call()  # type: ignore[operator]
    except StreamCryptError as exc:
        return type(exc).__name__
    return "ok"


@pytest.mark.parametrize("lead", [b"", b" " * 12, b"\n\r   \t\n" * 3, b" " * 700])
def test_every_split_of_the_armored_prefix(lead: bytes) -> None:
    """Leading whitespace and the BEGIN line cut at every point: accepted every time."""
    data = lead + ARMORED
    assert age_decrypt(data, identities=[ME]) == PAYLOAD
    assert streamcrypt.decrypt_bytes(data, format="age", identities=[ME], policy=None) == PAYLOAD
    prefix = len(lead) + len(armor.BEGIN_LINE) + 1
    for cut in range(prefix + 1):
        assert _stream([data[:cut], data[cut:]]) == PAYLOAD, cut
    head = data[:prefix]
    assert _stream([*(head[i : i + 1] for i in range(len(head))), data[prefix:]]) == PAYLOAD


@pytest.mark.parametrize(
    "data",
    [
        ARMORED,
        b" " * 12 + ARMORED,
        b"\t" * 4094 + b"-----BEGIN",  # the armor must start within 4096 bytes
        b"\t" * 4091 + b"-----BEGIN",
        b" " * 5000 + ARMORED,
        age_encrypt(b"x", recipients=[ME.recipient]),
        b"  ----",
        b"  -- not armor",
        b"   ",
        b"",
    ],
)
def test_sniff_agrees_with_is_armored_at_every_cut(data: bytes) -> None:
    whole = armor.is_armored(data)
    for cut in range(min(len(data), 4200) + 1):
        verdict = armor.sniff_armor(data[:cut])
        assert verdict is None or verdict == whole, cut
    assert armor.sniff_armor(data, at_end=True) == whole


def test_leading_whitespace_past_the_sniff_window_is_one_verdict() -> None:
    """Armor starting after 4096 bytes of whitespace is not armor, whole or in pieces."""
    data = b" " * 5000 + ARMORED
    whole = _verdict(lambda: age_decrypt(data, identities=[ME]))
    assert whole == FormatError.__name__
    assert _verdict(lambda: _stream([data[i : i + 7] for i in range(0, len(data), 7)])) == whole


def _broken_armor() -> bytes:
    """Armor whose END line is missing, around an age file for OTHER only."""
    return age_encrypt(PAYLOAD, recipients=[OTHER.recipient], armor=True).rsplit(b"-----END", 1)[0]


def _bad_line_after_header() -> bytes:
    """A stray line after the lines that hold the header and payload nonce."""
    lines = age_encrypt(PAYLOAD, recipients=[OTHER.recipient], armor=True).split(b"\n")
    return b"\n".join([*lines[:5], b"not base64 !", *lines[5:]])


@pytest.mark.parametrize("make", [_broken_armor, _bad_line_after_header])
def test_first_fault_in_byte_order_wins_whatever_the_chunking(make: object) -> None:
    data = make()  # type: ignore[operator]
    expected = UnknownKeyError.__name__  # the header comes before the bad armor
    assert _verdict(lambda: age_decrypt(data, identities=[ME])) == expected
    assert (
        _verdict(
            lambda: streamcrypt.decrypt_bytes(data, format="age", identities=[ME], policy=None)
        )
        == expected
    )
    for size in (1, 7, 64, 65, 1000, len(data)):
        pieces = [data[i : i + size] for i in range(0, len(data), size)]
        assert _verdict(lambda p=pieces: _stream(p)) == expected, size


def test_bad_armor_before_anything_decodes_is_a_format_error() -> None:
    data = b"-----BEGIN AGE ENCRYPTED FILE-----\nnot base64 !\n"
    assert _verdict(lambda: age_decrypt(data, identities=[ME])) == FormatError.__name__
    assert _verdict(lambda: _stream([data[i : i + 1] for i in range(len(data))])) == (
        FormatError.__name__
    )


def test_armor_decoder_reports_a_bad_line_after_the_good_bytes() -> None:
    dec = armor.ArmorDecoder()
    good = armor.armor(bytes(100)).split(b"\n")
    out = dec.update(b"\n".join(good[:2]) + b"\n!!!!\n")
    assert out == bytes(48)
    with pytest.raises(FormatError):
        dec.update(b"")


# ----------------------------------------------------------- whole runs of lines at once
# The decoder takes a run of full 64-column lines in one binascii call (issue 18). Fed 32
# bytes at a time it never holds two lines, so it goes line by line: that is the reference
# each fault below must match, bytes released and verdict, when the text comes in bigger
# pieces. (The message may differ: an over-long line is named as such before its line
# ending arrives, as a malformed line once it has, as before.)

_BODY = bytes(range(256)) * 200  # 51200 bytes: 1066 full lines and a short last one


def _decode(text: bytes, size: int) -> tuple[bytes, bool]:
    dec = armor.ArmorDecoder()
    out = bytearray()
    try:
        for pos in range(0, len(text), size):
            out += dec.update(text[pos : pos + size])
        out += dec.finalize()
    except FormatError:
        return bytes(out), False
    return bytes(out), True


def _faults() -> list[bytes]:
    lf = armor.armor(_BODY)
    crlf = lf.replace(b"\n", b"\r\n")
    at = 35 + 500 * 65  # the start of line 501
    line = lf[at : at + 64]
    return [
        lf,
        crlf,
        lf + b"\n" * 300,  # whitespace after END lines up with where line endings go
        lf[:at] + b"*" + lf[at + 1 :],  # a character outside the alphabet
        lf[:at] + line[:63] + lf[at + 64 :],  # a 63-column line
        lf[:at] + line[:60] + b"=" * 4 + lf[at + 64 :],  # padding inside the body
        lf[:at] + line[:63] + b"=" + lf[at + 64 :],  # a padded full line, then more
        lf[:at] + line[:32] + b"\r" + line[33:] + lf[at + 64 :],  # a stray CR
        crlf[: at + 500] + b"\n" + crlf[at + 501 :],  # one LF among CRLF
        lf[: at + 64] + lf[at + 65 :],  # two lines run together
        lf[:at] + lf[at + 65 :].replace(armor.END_LINE, b""),  # no END line
    ]


@pytest.mark.parametrize("text", _faults())
def test_runs_of_lines_decode_as_line_by_line(text: bytes) -> None:
    expected = _decode(text, 32)
    for size in (len(text), 1 << 12, 65 * 7 + 3):
        assert _decode(text, size) == expected, size
    if expected[1]:
        assert expected[0] == _BODY


_BLOCK = armor._BLOCK_LINES * 48


@pytest.mark.parametrize(
    "size", [0, 1, 47, 48, 49, _BLOCK - 1, _BLOCK, _BLOCK + 1, 3 * _BLOCK + 50]
)
def test_armor_is_the_line_by_line_encoding(size: int) -> None:
    """Blocks of lines (and pieces of any size) give exactly the armor written one
    64-column line at a time with the standard library."""
    data = random.Random(size).randbytes(size)
    text = base64.b64encode(data)
    lines = [text[i : i + 64] for i in range(0, len(text), 64)]
    expected = b"\n".join([armor.BEGIN_LINE, *lines, armor.END_LINE]) + b"\n"
    assert armor.armor(data) == expected
    for piece in (1000, _BLOCK + 7):
        enc = armor.ArmorEncoder()
        out = b"".join(enc.update(data[i : i + piece]) for i in range(0, len(data), piece))
        assert out + enc.finalize() == expected
