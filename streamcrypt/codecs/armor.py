"""age's ASCII armor: strict PEM (RFC 7468, section 3, figure 3), label "AGE ENCRYPTED FILE".

Theory of operation
-------------------
::

    -----BEGIN AGE ENCRYPTED FILE-----
    <base64, 64 columns per line, the last line 1..64 columns with canonical = padding>
    -----END AGE ENCRYPTED FILE-----

Armor makes an age file malleable unless the parser is strict, so the decoder accepts
exactly one encoding per payload: every line but the last carries 64 columns, only the
last may carry ``=`` padding, the base64 must be canonical (unused bits zero), and nothing
may stand before the BEGIN line or after the END line except whitespace (space, tab, CR,
LF, VT, FF). Lines end with LF or CRLF; the BEGIN line's ending must be used throughout.
The encoder writes LF line endings and a final LF after the END line, as age does.

Both directions are sans-I/O transforms (``update(data) -> bytes`` / ``finalize()``) with
bounded memory: the decoder holds at most one partial line. Failures raise
:class:`FormatError`.
"""

from __future__ import annotations

import base64
import binascii
import functools
import re
import struct

import pybase64

from ..abc import Buffer, Lifecycle
from ..errors import FormatError
from ._format import TextArmor

__all__ = [
    "ARMOR",
    "BEGIN_LINE",
    "COLUMNS",
    "END_LINE",
    "ArmorDecoder",
    "ArmorEncoder",
    "armor",
    "dearmor",
    "is_armored",
    "sniff_armor",
]

#: The line that opens an armored age file.
BEGIN_LINE = b"-----BEGIN AGE ENCRYPTED FILE-----"
#: The line that closes an armored age file.
END_LINE = b"-----END AGE ENCRYPTED FILE-----"
#: Base64 columns of every line but the last.
COLUMNS = 64
_BYTES_PER_LINE = COLUMNS // 4 * 3  # 48
_WHITESPACE = b" \t\r\n\v\f"
_B64_LINE = re.compile(rb"[A-Za-z0-9+/]*={0,2}")
#: Longest whitespace-free prefix kept while looking for the BEGIN line or a line end.
_MAX_LINE = max(len(BEGIN_LINE), COLUMNS) + 2


#: How far :func:`is_armored` looks: the armor must start within this many bytes.
SNIFF_SIZE = 4096


def is_armored(data: Buffer) -> bool:
    """True when ``data`` (after leading whitespace) starts like armor (``-----BEGIN``)."""
    return bool(sniff_armor(data, at_end=True))


def sniff_armor(head: Buffer, at_end: bool = False) -> bool | None:
    """:func:`is_armored` of data that starts with ``head``, or ``None`` while ``head``
    cannot tell yet (``at_end``: ``head`` is all the data).

    The answer never depends on how the data is cut: once it is not ``None`` it is what
    :func:`is_armored` says of the whole data, so a stream reader asks again with more
    bytes until it gets one (at most :data:`SNIFF_SIZE` of them).
    """
    window = bytes(head[:SNIFF_SIZE])
    rest = window.lstrip(_WHITESPACE)
    if len(rest) >= 5 or (rest and not b"-----".startswith(rest)):
        return rest.startswith(b"-----")
    if at_end or len(window) >= SNIFF_SIZE:
        return rest.startswith(b"-----")
    return None


class ArmorEncoder(Lifecycle):
    """Armor binary data (sans-I/O): ``update(data) -> text bytes``, ``finalize()``."""

    __slots__ = ("_pending", "_started")

    def __init__(self) -> None:
        self._init_lifecycle()
        self._pending = bytearray()
        self._started = False

    def update(self, data: Buffer) -> bytes:
        """Armor what makes whole 64-column lines; the BEGIN line comes first.

        Whole lines are encoded by SIMD base64 (pybase64) and cut in C by a cached
        ``struct`` format, :data:`_BLOCK_LINES` lines at a time: a Python object per line
        is unavoidable, and blocks keep those objects few enough to stay in cache and to
        reuse the allocator's memory (twice the speed of one block per megabyte). Only the
        bytes of a line the input leaves unfinished are kept.
        """
        self._check()
        view = memoryview(data).cast("B")
        parts: list[bytes] = []
        if not self._started:
            parts.append(BEGIN_LINE)
            self._started = True
        pending = self._pending
        if pending:  # finish the line the previous call left open
            need = _BYTES_PER_LINE - len(pending)
            pending += view[:need]
            view = view[need:]
            if len(pending) == _BYTES_PER_LINE:
                parts.append(pybase64.b64encode(pending))
                pending.clear()
        full = len(view) - len(view) % _BYTES_PER_LINE
        block = _BLOCK_LINES * _BYTES_PER_LINE
        for start in range(0, full, block):
            piece = view[start : min(start + block, full)]
            lines = _splitter(len(piece) // _BYTES_PER_LINE).unpack(pybase64.b64encode(piece))
            parts.append(b"\n".join(lines))
        pending += view[full:]
        if not parts:
            return b""
        parts.append(b"")  # the LF after the last line
        return b"\n".join(parts)

    def finalize(self) -> bytes:
        """The last (padded) line and the END line."""
        out = self.update(b"")
        self._finish()
        tail = base64.b64encode(self._pending)
        self._pending.clear()
        return out + (tail + b"\n" if tail else b"") + END_LINE + b"\n"


#: Lines cut per ``struct`` call when armoring (48 KiB of input).
_BLOCK_LINES = 1024


@functools.lru_cache(maxsize=8)
def _splitter(count: int) -> struct.Struct:
    """Unpacks ``count`` 64-column lines from their base64 text."""
    return struct.Struct(f"{COLUMNS}s" * count)


_BEFORE, _BODY, _AFTER_LAST, _AFTER_END = range(4)


class ArmorDecoder(Lifecycle):
    """Strictly de-armor (sans-I/O): ``update(text) -> bytes``, ``finalize()``.

    Raises :class:`FormatError` for anything but the one canonical armor of the payload
    (whitespace around the block excepted), also when the input ends before the END line.
    A bad line is reported on the call after the one that returns the bytes of the good
    lines before it, so a decoder behind this one meets those bytes first: the first fault
    in byte order wins, however the input is cut.
    """

    __slots__ = ("_buf", "_eol", "_error", "_phase")

    def __init__(self) -> None:
        self._init_lifecycle()
        self._buf = bytearray()
        self._phase = _BEFORE
        self._eol = b""
        self._error: FormatError | None = None

    def update(self, data: Buffer) -> bytes:
        """Decode every complete line; returns the bytes they carry."""
        self._check()
        if self._error is not None:
            raise self._break(self._error)
        out = bytearray()
        try:
            self._feed(data, out)
        except FormatError as exc:
            if not out:
                raise self._break(exc) from None
            self._error = exc  # the good lines' bytes first, the fault on the next call
        except Exception as exc:
            raise self._break(exc) from None
        return bytes(out)

    def finalize(self) -> bytes:
        """Check the END line was seen and only whitespace follows it."""
        self._check()
        if self._error is not None:
            raise self._break(self._error)
        try:
            if self._phase != _AFTER_END and bytes(self._buf) == END_LINE:
                self._line(END_LINE, bytearray())  # the END line may lack its line ending
                self._buf.clear()
            if self._phase != _AFTER_END:
                raise FormatError("the armored input ended before its END line: truncated armor")
        except Exception as exc:
            raise self._break(exc) from None
        self._finish()
        return b""

    def _feed(self, data: Buffer, out: bytearray) -> None:
        buf = self._buf
        buf += data
        if self._phase == _BEFORE:
            stripped = len(buf) - len(buf.lstrip(_WHITESPACE))
            del buf[:stripped]
            if not buf:
                return
            if not BEGIN_LINE.startswith(bytes(buf[: len(BEGIN_LINE)])):
                raise FormatError(
                    "armor must start with -----BEGIN AGE ENCRYPTED FILE----- "
                    "(only whitespace may precede it)"
                )
            if len(buf) < len(BEGIN_LINE) + 1:
                return
            rest = buf[len(BEGIN_LINE) :]
            if rest.startswith(b"\n"):
                self._eol = b"\n"
            elif rest.startswith(b"\r\n"):
                self._eol = b"\r\n"
            elif rest == b"\r":
                return
            else:
                raise FormatError("the armor BEGIN line must end right after its label")
            del buf[: len(BEGIN_LINE) + len(self._eol)]
            self._phase = _BODY
        if self._phase == _BODY:
            self._run(buf, out)
        while self._phase in (_BODY, _AFTER_LAST):
            end = buf.find(b"\n")
            if end < 0:
                if len(buf) > _MAX_LINE:
                    raise FormatError(f"armor line is longer than {COLUMNS} columns")
                break
            line = bytes(buf[: end + 1])
            del buf[: end + 1]
            if not line.endswith(self._eol) or b"\r" in line[: -len(self._eol)]:
                raise FormatError("armor lines must all end the same way (LF or CRLF)")
            self._line(line[: -len(self._eol)], out)
        if self._phase == _AFTER_END:
            if buf.strip(_WHITESPACE):
                raise FormatError("armor has data after its END line")
            buf.clear()

    def _run(self, buf: bytearray, out: bytearray) -> None:
        """Decode the longest run of full body lines at the start of ``buf`` in one call.

        A full body line is 64 alphabet characters (no ``=``: a padded line is the last
        one) and the BEGIN line's ending; such lines carry whole base64 groups, so they are
        canonical. Exactly the lines :meth:`_line` would accept one by one are taken, so
        the output and the first fault do not change; the rest (the last lines, the END
        line, a bad line) is left to the line-by-line path.
        """
        eol = self._eol
        width = COLUMNS + len(eol)
        lines = len(buf) // width
        if lines < 2:
            return
        # lines whose ending stands where a 64-column line puts it
        ends = [buf[COLUMNS + i : lines * width : width] for i in range(len(eol))]
        lines = min(len(e) - len(e.lstrip(eol[i : i + 1])) for i, e in enumerate(ends))
        run = buf[: lines * width]  # one copy; the endings are removed from it below
        decoded = _decode_clean_run(run, eol, lines)
        if decoded is None:  # a fault (or a padded last line) within the run
            best: bytes = b""
            low, high = 0, lines - 1  # the predicate holds for every prefix of a clean run
            while low < high:
                mid = (low + high + 1) // 2
                if (prefix := _decode_clean_run(run[: mid * width], eol, mid)) is not None:
                    low, best = mid, prefix
                else:
                    high = mid - 1
            lines, decoded = low, best
        out += decoded
        del buf[: lines * width]

    def _line(self, line: bytes, out: bytearray) -> None:
        if line == END_LINE:
            self._phase = _AFTER_END
            return
        if self._phase == _AFTER_LAST:
            raise FormatError(
                "armor line after a short or padded line: only the END line may follow it"
            )
        if not line or len(line) > COLUMNS or len(line) % 4 or not _B64_LINE.fullmatch(line):
            raise FormatError(
                f"armor line is not {COLUMNS}-column base64 (or a shorter final line)"
            )
        try:
            decoded = base64.b64decode(line, validate=True)
        except (binascii.Error, ValueError):
            raise FormatError("armor line is not valid base64") from None
        if base64.b64encode(decoded) != line:
            raise FormatError("armor base64 is not canonical (non-zero unused bits)")
        if len(line) < COLUMNS or line.endswith(b"="):
            self._phase = _AFTER_LAST
        out += decoded


def _decode_clean_run(run: bytearray, eol: bytes, lines: int) -> bytes | None:
    """The bytes of ``lines`` full body lines (each ending known to stand after its 64
    columns), or ``None`` unless every line holds only alphabet characters, without ``=``
    and without another line-ending byte: their endings removed, exactly ``64 * lines``
    characters must remain, and the validating SIMD decoder refuses any ``\\r``, ``\\n`` or
    non-alphabet character left (and ``=`` anywhere but at the end, checked here)."""
    body = run.replace(eol, b"")
    if len(body) != COLUMNS * lines or body.endswith(b"="):
        return None
    try:
        return pybase64.b64decode(body, validate=True)
    except (binascii.Error, ValueError):
        return None


def armor(data: Buffer) -> bytes:
    """Armor ``data`` in one call."""
    enc = ArmorEncoder()
    return enc.update(data) + enc.finalize()


def dearmor(text: Buffer) -> bytes:
    """Strictly de-armor ``text`` in one call; raises :class:`FormatError`."""
    dec = ArmorDecoder()
    return dec.update(text) + dec.finalize()


#: age's armor as a format descriptor's :class:`~streamcrypt.codecs.SegmentedFormat` sees it.
ARMOR = TextArmor(ArmorEncoder, ArmorDecoder, sniff_armor, BEGIN_LINE)
