"""The one symmetric key-file format, shared by the library, the examples and the CLI.

The documented format (docs/CLI.md, "Key files") is UTF-8 text of ``name: value`` lines,
``#`` lines being comments::

    streamcrypt-key: 1
    type: symmetric
    id: <key id, may be empty>
    key: <base64 of the key bytes: 16 or 32 of them>

A key file holds a key of one of the sizes the library's formats use (:data:`KEY_SIZES`):
32 bytes for the native container, secretstream, Tink and the envelope's symmetric keys,
16 bytes for RFC 8188 HTTP bodies (``aes128gcm``'s input keying material).

Reading also accepts the older form the examples used to write: 64 hex digits (whitespace
and ``#`` comment lines ignored), read as a key without an id. Writing produces only the
documented form. Messages name the file and what is wrong, never the key.
"""

from __future__ import annotations

import base64
import binascii
import os
import stat
import warnings
from collections.abc import Sequence

from ..errors import InsecureKeyFileWarning, InvalidKeySizeError, InvalidParameterError
from ._secret import SecretKey, key_bytes

__all__ = [
    "KEY_FILE_MAGIC",
    "KEY_FILE_VERSION",
    "KEY_SIZE",
    "KEY_SIZES",
    "b64_key",
    "created_comment",
    "key_file_fields",
    "key_file_lines",
    "read_secret_file",
    "read_secret_key_file",
    "secret_key_file_text",
    "secret_key_from_text",
    "write_secret_key_file",
]

#: The first field name of a key file (``streamcrypt-key: 1``).
KEY_FILE_MAGIC = "streamcrypt-key"
#: The key-file version this module reads and writes.
KEY_FILE_VERSION = "1"
#: Bytes of a symmetric key ``streamcrypt keygen`` makes by default (the native container's).
KEY_SIZE = 32
#: Every size of symmetric key a key file holds: 16 (RFC 8188 HTTP bodies) and 32 bytes.
KEY_SIZES = (16, 32)
_MAX_KEY_FILE = 1 << 20
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


def key_file_lines(text: str) -> list[str]:
    """The stripped lines of a key file that are neither blank nor ``#`` comments."""
    return [s for s in (line.strip() for line in text.splitlines()) if s and not s.startswith("#")]


def key_file_fields(lines: Sequence[str], source: str) -> dict[str, str]:
    """``name: value`` lines as a dict (names lower-cased); raises InvalidParameterError."""
    out: dict[str, str] = {}
    for line in lines:
        name, sep, value = line.partition(":")
        if not sep:
            raise InvalidParameterError(f"{source}: malformed line (expected 'name: value')")
        name = name.strip().lower()
        if name in out:
            raise InvalidParameterError(f"{source}: the field {name!r} appears twice")
        out[name] = value.strip()
    if out.get(KEY_FILE_MAGIC) != KEY_FILE_VERSION:
        raise InvalidParameterError(
            f"{source}: not a streamcrypt key file of version {KEY_FILE_VERSION} "
            f"(expected a '{KEY_FILE_MAGIC}: {KEY_FILE_VERSION}' line)"
        )
    if "key" not in out:
        raise InvalidParameterError(f"{source}: no 'key:' line")
    return out


def _sizes_text(sizes: Sequence[int]) -> str:
    return " or ".join(str(n) for n in sizes)


def b64_key(
    value: str, source: str, what: str = "key", sizes: Sequence[int] = (KEY_SIZE,)
) -> bytes:
    """Key bytes of one of ``sizes`` from base64; raises InvalidParameterError /
    InvalidKeySizeError."""
    try:
        raw = base64.b64decode(value.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise InvalidParameterError(f"{source}: the {what} is not valid base64") from None
    return key_bytes(raw, f"{source}: the {what}", tuple(sizes))


def _is_legacy_hex(lines: Sequence[str]) -> bool:
    digits = "".join("".join(lines).split())
    return len(digits) == 2 * KEY_SIZE and set(digits) <= _HEX_DIGITS


def secret_key_from_text(text: str, *, source: str = "key file") -> SecretKey:
    """The symmetric key in a key file's text: the documented format or 64 hex digits.

    Raises :class:`InvalidParameterError` for anything else (another key type, a malformed
    file), :class:`InvalidKeySizeError` for a key that is not 16 or 32 bytes.
    """
    lines = key_file_lines(text)
    if not lines:
        raise InvalidParameterError(f"{source} holds no key")
    if _is_legacy_hex(lines):
        return SecretKey(bytes.fromhex("".join("".join(lines).split())))
    if ":" not in lines[0]:
        raise InvalidParameterError(
            f"{source} is not a symmetric key file: expected '{KEY_FILE_MAGIC}: "
            f"{KEY_FILE_VERSION}' lines (as 'streamcrypt keygen' writes) or 64 hex digits"
        )
    fields = key_file_fields(lines, source)
    kind = fields.get("type")
    if kind != "symmetric":
        raise InvalidParameterError(f"{source} holds a {kind!r} key, not a symmetric key")
    key_id = fields.get("id", "")
    if len(key_id.encode()) > 255:
        raise InvalidParameterError(f"{source}: the key id is longer than 255 bytes")
    return SecretKey(b64_key(fields["key"], source, sizes=KEY_SIZES), key_id=key_id)


def read_secret_file(path: str | os.PathLike[str], limit: int, what: str = "key file") -> bytes:
    """At most ``limit + 1`` bytes of a file that holds a secret: the one place streamcrypt
    opens one (key files, identities, passphrase and password files, on the command line
    and on cluster workers). Warns with :class:`InsecureKeyFileWarning` when the file is a
    regular file that group or others may read or write (its mode, from the open file).

    Raises :class:`OSError` when the file cannot be read.
    """
    with open(path, "rb") as f:
        mode = os.fstat(f.fileno()).st_mode
        if stat.S_ISREG(mode) and mode & 0o077:
            warnings.warn(
                InsecureKeyFileWarning(
                    f"{what} {os.fspath(path)} may be read or written by other users "
                    f"(mode {stat.S_IMODE(mode):04o}); restrict it with chmod 600"
                ),
                stacklevel=2,
            )
        return f.read(limit + 1)


def read_secret_key_file(path: str | os.PathLike[str]) -> SecretKey:
    """:meth:`SecretKey.from_file`: read a symmetric key file (either accepted form).

    Raises :class:`OSError` when the file cannot be read, :class:`InvalidParameterError`
    (or :class:`InvalidKeySizeError`) when it is not a symmetric key file.
    """
    source = os.fspath(path)
    raw = read_secret_file(path, _MAX_KEY_FILE)
    if len(raw) > _MAX_KEY_FILE:
        raise InvalidParameterError(f"{source} is too large to be a key file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidParameterError(f"{source} is not a text key file") from None
    return secret_key_from_text(text, source=source)


def created_comment() -> str:
    """The ``# created: <UTC time>`` line every key file starts with."""
    import datetime  # here: reading key files (the command's every run) needs no clock

    created = datetime.datetime.now(datetime.UTC).replace(microsecond=0).isoformat()
    return f"# created: {created}\n"


def secret_key_file_text(key: SecretKey) -> str:
    """The documented key-file text for ``key`` (16 or 32 bytes). It holds the secret: write
    it only to a file readable by its owner (:func:`write_secret_key_file` does).

    Raises :class:`InvalidKeySizeError` for a key of another size."""
    if len(key) not in KEY_SIZES:
        raise InvalidKeySizeError(
            f"a key file holds a {_sizes_text(KEY_SIZES)}-byte key, got {len(key)}"
        )
    if any(c in key.key_id for c in "\r\n"):
        raise InvalidParameterError("a key id written to a key file must be one line")
    return (
        "# streamcrypt symmetric key: SECRET, keep it private\n"
        f"{created_comment()}"
        f"{KEY_FILE_MAGIC}: {KEY_FILE_VERSION}\ntype: symmetric\nid: {key.key_id}\n"
        f"key: {base64.b64encode(key.secret_bytes()).decode()}\n"
    )


def write_secret_key_file(path: str | os.PathLike[str], key: SecretKey) -> None:
    """Write ``key`` in the documented format to a new file of mode 0600.

    Never replaces a file: raises :class:`FileExistsError` if ``path`` exists.
    """
    data = secret_key_file_text(key).encode()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
    except BaseException:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        raise
