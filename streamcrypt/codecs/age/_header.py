"""age v1's header: its text form, strict parsing, the MAC (the stanza line rules).

An age header is the version line, one or more stanzas (``-> type args...`` and a body
of canonical unpadded base64 in 64-column lines ending with a shorter one) and the MAC
line ``--- <HMAC-SHA-256>``. :func:`parse_header` reads it from a buffer, :class:`_HeaderScan`
finds its end in bytes that arrive in pieces, :func:`_build_header` writes one.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from ...abc import Buffer, as_bytes
from ...errors import FormatError, InvalidParameterError, UnsupportedFormatError
from ...keys import hkdf
from .._stanza import Stanza, b64decode, b64encode

#: The first line of every age v1 header.
VERSION_LINE = b"age-encryption.org/v1"
_VERSION_PREFIX = b"age-encryption.org/"
#: Plaintext bytes per payload chunk (the last chunk may be shorter).
CHUNK_SIZE = 65536
#: Bytes of the ChaCha20-Poly1305 tag after each chunk.
TAG_SIZE = 16
#: Bytes of the random file key that each recipient stanza wraps.
FILE_KEY_SIZE = 16
#: Bytes of the random payload nonce between the header and the payload.
NONCE_SIZE = 16
#: Longest header a reader buffers before giving up (a post-quantum stanza is ~1.6 KB).
DEFAULT_MAX_HEADER_SIZE = 1 << 20
_COLUMNS = 64

_B64 = re.compile(rb"[A-Za-z0-9+/]*")
_VERSION = re.compile(rb"age-encryption\.org/[\x21-\x7e]+")
_MAC_LINE = re.compile(rb"--- ([A-Za-z0-9+/]{43})")
_MAC_LINE_SIZE = 4 + 43 + 1


# ---------------------------------------------------------------------------------------
# Header
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AgeHeader:
    """A parsed (not yet authenticated) age v1 header."""

    stanzas: tuple[Stanza, ...]
    mac: bytes
    #: Header bytes, including the MAC line's LF (the payload nonce follows).
    size: int
    #: What the MAC covers: the header up to and including ``---``.
    mac_input: bytes = field(repr=False)


def _check_version(data: bytes) -> bool:
    """False while the version line is incomplete; raises if it is not v1."""
    n = min(len(data), len(_VERSION_PREFIX))
    if data[:n] != _VERSION_PREFIX[:n]:
        raise FormatError("not an age file: it must start with 'age-encryption.org/'")
    end = data.find(b"\n")
    if end < 0:
        if len(data) > 256:
            raise FormatError("age version line is too long")
        return False
    version = data[:end]
    if version == VERSION_LINE:
        return True
    if _VERSION.fullmatch(version):
        raise UnsupportedFormatError(
            f"unsupported age version {version[len(_VERSION_PREFIX) :].decode()!r}; this reads v1"
        )
    raise FormatError("age version line is malformed")


def parse_header(data: Buffer, *, max_size: int = DEFAULT_MAX_HEADER_SIZE) -> AgeHeader | None:
    """Parse an age v1 header from the start of ``data``; ``None`` while it is incomplete.

    Raises :class:`FormatError` for anything the spec does not allow (and past
    ``max_size`` bytes), :class:`UnsupportedFormatError` for another age version.
    """
    raw = as_bytes(data, "data")
    size = _HeaderScan(max_size)(raw)
    return None if size is None else _parse_complete(raw[:size])


def _check_line(line: bytes) -> None:
    if not line.startswith(b"-> ") and not (len(line) <= _COLUMNS and _B64.fullmatch(line)):
        raise FormatError("age header line is neither a stanza, a body line, nor the MAC")


class _HeaderScan:
    """Where the header ends, in bytes that arrive in pieces: each byte is looked at about
    once, so reading a header is linear in its length whatever the chunking. Fails early,
    in byte order, on a line no header can hold (a bad line fails before the MAC line),
    rather than buffering up to the size cap. :func:`parse_header` is one call of it.
    """

    __slots__ = ("_line", "_max_size", "_searched")

    def __init__(self, max_size: int) -> None:
        self._max_size = max_size
        self._line = 0  # start of the first line not checked yet (0: the version line)
        self._searched = 0  # no LF in data[_line:_searched]

    def __call__(self, data: bytes | bytearray) -> int | None:
        """The header's length once its MAC line is complete, else ``None``."""
        if self._line == 0:
            if not _check_version(bytes(data[:258])):  # it refuses a line past 256 bytes
                return None
            self._line = self._searched = data.find(b"\n") + 1
        while True:
            start = self._line
            end = data.find(b"\n", max(start, self._searched))
            if end < 0:
                break
            if data.startswith(b"---", start):
                if end + 1 > self._max_size:
                    raise FormatError(f"age header is longer than {self._max_size} bytes")
                return end + 1
            _check_line(bytes(data[start:end]))
            self._line = self._searched = end + 1
        self._searched = len(data)
        start = self._line
        partial = len(data) - start
        # The MAC line's cap (48) is below a body line's (64), so it is met first.
        if partial > _MAC_LINE_SIZE and data.startswith(b"---", start):
            raise FormatError("age header MAC line is too long")
        if partial > _COLUMNS and not data.startswith(b"-> ", start):
            raise FormatError("age stanza body line is longer than 64 columns")
        if len(data) > self._max_size and not data.startswith(b"---", start):
            raise FormatError(f"age header is longer than {self._max_size} bytes (or not a header)")
        return None


def _read_stanza(lines: Sequence[bytes], i: int, end: int) -> tuple[Stanza, int]:
    """The stanza whose ``-> `` line is ``lines[i]`` (its body in the lines before
    ``end``) and the index of the line after it; :class:`FormatError` if malformed.
    The age header and the plugin protocol (``_plugin``) read stanzas with it."""
    line = lines[i]
    if not line.startswith(b"-> "):
        raise FormatError("age header line is neither a stanza ('-> ') nor the MAC ('---')")
    try:
        args = tuple(line[3:].decode("ascii").split(" "))
    except UnicodeDecodeError:
        raise FormatError("age stanza arguments must be visible ASCII") from None
    i += 1  # the arguments are checked as the Stanza is made
    body = bytearray()
    while True:
        if i >= end:
            raise FormatError(
                "age stanza body must end with a line shorter than 64 columns "
                "(an empty line after a full one)"
            )
        chunk = lines[i]
        i += 1
        if len(chunk) > _COLUMNS or not _B64.fullmatch(chunk):
            raise FormatError("age stanza body line is not base64 of at most 64 columns")
        body += chunk
        if len(chunk) < _COLUMNS:
            break
    return Stanza(args, b64decode(bytes(body), "stanza body")), i


def _parse_complete(text: bytes) -> AgeHeader:
    lines = text.split(b"\n")[:-1]  # text ends with LF; the last line is the MAC line
    last = len(lines) - 1
    stanzas: list[Stanza] = []
    i = 1
    while i < last:
        stanza, i = _read_stanza(lines, i, last)
        stanzas.append(stanza)
    if not stanzas:
        raise FormatError("age header has no recipient stanza")
    mac_line = _MAC_LINE.fullmatch(lines[last])
    if mac_line is None:
        raise FormatError("age header MAC line must be '--- ' and 43 base64 characters")
    mac = b64decode(mac_line.group(1), "header MAC")
    return AgeHeader(tuple(stanzas), mac, len(text), text[: len(text) - _MAC_LINE_SIZE + 3])


def _header_mac(file_key: bytes, mac_input: bytes) -> bytes:
    return hmac.new(hkdf(file_key, info=b"header"), mac_input, hashlib.sha256).digest()


def _encode_stanza(stanza: Stanza) -> bytes:
    """A stanza as header text: the argument line and the 64-column body lines (the
    plugin protocol's framing too)."""
    body = b64encode(stanza.body)
    lines = [body[i : i + _COLUMNS] for i in range(0, len(body), _COLUMNS)]
    if not lines or len(lines[-1]) == _COLUMNS:
        lines.append(b"")
    return b"-> " + " ".join(stanza.args).encode() + b"\n" + b"".join(x + b"\n" for x in lines)


#: The type of the grease stanza :func:`grease_stanza` writes. The spec has readers skip
#: a stanza of a type they do not know (Go age and rage do; the age test kit's
#: ``x25519_grease`` has one), so it carries nothing and is dropped at the next re-key.
GREASE_TYPE = "grease"
#: The shortest grease :func:`grease_stanza` writes: ``-> grease``, one body line ``AA``.
MIN_GREASE = len(f"-> {GREASE_TYPE}\nAA\n")


def grease_stanza(size: int) -> Stanza:
    """A grease stanza whose header text (:func:`_encode_stanza`) is exactly ``size``
    bytes, ``size`` >= :data:`MIN_GREASE`: a body of zero bytes, and where no body length
    hits ``size`` a filler argument of ``0``s. Nothing in it derives from a key or the
    payload; it only moves the payload to an offset (``streamcrypt.rekey`` aligns it so
    that the payload's blocks can be shared). Raises :class:`InvalidParameterError` for a
    ``size`` below :data:`MIN_GREASE`."""
    if size < MIN_GREASE:
        raise InvalidParameterError(f"a grease stanza takes at least {MIN_GREASE} bytes")
    room = size - len(f"-> {GREASE_TYPE}\n")  # for the body lines and a " 000..." argument
    chars = room * _COLUMNS // (_COLUMNS + 1)  # base64 characters: each line takes an LF
    while True:  # a few steps at most: a body length of 4k+1 characters does not exist
        filler = room - (chars + chars // _COLUMNS + 1)
        if chars % 4 != 1 and (filler == 0 or filler >= 2):
            break
        chars -= 1
    args = (GREASE_TYPE, "0" * (filler - 1)) if filler else (GREASE_TYPE,)
    return Stanza(args, bytes(chars * 3 // 4))


def scrypt_not_alone(stanzas: Sequence[Stanza]) -> bool:
    """Whether an scrypt stanza shares the header with another: the spec forbids it (a
    passphrase is a file's only recipient), for readers and writers alike."""
    return len(stanzas) > 1 and any(s.kind == "scrypt" for s in stanzas)


def _build_header(file_key: bytes, stanzas: Sequence[Stanza]) -> bytes:
    """The header, MAC included, for encrypting and re-keying alike: what is written
    reads. Raises :class:`InvalidParameterError` for no stanza, an scrypt stanza not
    alone (:func:`scrypt_not_alone`), or a header the reader's scan refuses with its
    default cap (:data:`DEFAULT_MAX_HEADER_SIZE`: a plugin's or a custom recipient's
    large stanzas, or many recipients)."""
    if not stanzas:
        raise InvalidParameterError("an age header needs at least one stanza")
    if scrypt_not_alone(stanzas):
        raise InvalidParameterError(
            "a passphrase (scrypt) stanza must be an age file's only stanza: a passphrase "
            "file cannot get recipients, nor a file with recipients a passphrase"
        )
    text = VERSION_LINE + b"\n" + b"".join(_encode_stanza(s) for s in stanzas) + b"---"
    header = text + b" " + b64encode(_header_mac(file_key, text)) + b"\n"
    try:
        _HeaderScan(DEFAULT_MAX_HEADER_SIZE)(header)
    except FormatError as exc:
        raise InvalidParameterError(f"this age header cannot be written: {exc}") from None
    return header
