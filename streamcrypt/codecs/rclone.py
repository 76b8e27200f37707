"""rclone crypt (the ``crypt`` remote), byte for byte: file contents, keys, names.

Theory of operation
-------------------
File contents are ``"RCLONE\\x00\\x00" || nonce (24) || block_0 || ...``: 64 KiB blocks,
each a NaCl secretbox under the data key with nonce ``nonce + i``, so a segmented stream
(:class:`RcloneCodec` on the shared segmented core, random access by :func:`layout`).
No block is marked last: a cut at a block boundary is a valid shorter file for every
reader, so ``expected_size=`` turns a known plaintext size into a check. Keys come from
scrypt of the password (and ``password2``); names are EME-AES-256, obfuscated or kept.
The formats, in full: docs/FORMATS.md ("rclone crypt").
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import ClassVar, Literal

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

from ..abc import Buffer, as_bytes
from ..errors import (
    AuthenticationError,
    FormatError,
    InvalidKeySizeError,
    InvalidPaddingError,
    InvalidParameterError,
    LimitExceededError,
    TruncatedStreamError,
    UnsafePathError,
)
from ..keys import HoldsSecrets, random_bytes, secret_text_bytes
from ..paths import name_parts
from ..primitives import Eme, XSalsa20Poly1305
from . import _base32768
from ._format import FormatOptions, ReadAt, SegmentedFormat
from ._segmented import (
    SegmentCodec,
    SegmentedDecryptor,
    SegmentedEncryptor,
    SegmentJob,
    SegmentLayout,
)

__all__ = [
    "BLOCK_DATA_SIZE",
    "BLOCK_SIZE",
    "DEFAULT_SALT",
    "FORMAT",
    "HEADER_SIZE",
    "MAGIC",
    "NONCE_SIZE",
    "TAG_SIZE",
    "NameEncoding",
    "NameEncryption",
    "RcloneCodec",
    "RcloneDecryptor",
    "RcloneEncryptor",
    "RcloneKeys",
    "RcloneLayout",
    "RcloneNameCipher",
    "decrypted_size",
    "encrypted_size",
    "header_size",
    "is_rclone",
    "layout",
    "obscure",
    "reveal",
]

#: The 8 bytes every rclone crypt file starts with.
MAGIC = b"RCLONE\x00\x00"
#: Bytes of the file nonce after the magic (block i uses nonce + i).
NONCE_SIZE = 24
#: Bytes of a file header: magic and nonce.
HEADER_SIZE = len(MAGIC) + NONCE_SIZE
#: Bytes of the Poly1305 tag of each block.
TAG_SIZE = 16
#: Plaintext bytes per block (the last block may be shorter).
BLOCK_DATA_SIZE = 64 * 1024
#: Bytes of a sealed full block: tag and ciphertext.
BLOCK_SIZE = BLOCK_DATA_SIZE + TAG_SIZE
#: The salt rclone uses when no password2 ("salt") is configured.
DEFAULT_SALT = bytes.fromhex("a80df43a8fbd0308a7cab83e581f86b1")
_KEY_MATERIAL = 32 + 32 + 16
_NONCE_MOD = 1 << (8 * NONCE_SIZE)
#: rclone's fixed key for obscuring config values (fs/config/obscure): public by design.
_OBSCURE_KEY = bytes.fromhex("9c935b48730a554d6bfd7c63c886a92bd390198eb8128afbf4de162b8b95f638")
_NAME_BLOCK = 16
_MAX_NAME_CIPHERTEXT = 2048

#: rclone's ``filename_encryption`` settings.
NameEncryption = Literal["standard", "obfuscate", "off"]
#: rclone's ``filename_encoding`` settings for encrypted names.
NameEncoding = Literal["base32", "base64", "base32768"]


# ---------------------------------------------------------------------------------------
# Keys and obscured config values
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RcloneKeys(HoldsSecrets):
    """The three keys of a crypt remote: data key, name key, name tweak (no bytes in repr)."""

    data_key: bytes = field(repr=False)
    name_key: bytes = field(repr=False)
    name_tweak: bytes = field(repr=False)

    _pickle_advice: ClassVar[str] = "rebuild it on the other side with from_config()"

    def __post_init__(self) -> None:
        sizes = (len(self.data_key), len(self.name_key), len(self.name_tweak))
        if sizes != (32, 32, 16):
            raise InvalidKeySizeError(
                f"rclone keys are 32 + 32 + 16 bytes (data key, name key, name tweak), got {sizes}"
            )

    @classmethod
    def from_material(cls, material: Buffer) -> RcloneKeys:
        """Split 80 bytes of key material (rclone's own tests use 80 zero bytes)."""
        raw = bytes(material)
        if len(raw) != _KEY_MATERIAL:
            raise InvalidKeySizeError(f"rclone key material is 80 bytes, got {len(raw)}")
        return cls(raw[:32], raw[32:64], raw[64:])

    @classmethod
    def from_password(cls, password: str, password2: str = "") -> RcloneKeys:
        """Derive the keys as rclone does: scrypt(N=16384, r=8, p=1) over the password,
        salted with ``password2`` or rclone's default salt. Both in clear (see
        :meth:`from_config` for the obscured values of rclone.conf). Costs ~16 MiB and tens
        of milliseconds. Raises :class:`InvalidParameterError` for an empty password
        (rclone would use all-zero keys; ask for that with ``from_material(bytes(80))``).
        """
        if not password:
            raise InvalidParameterError(
                "an rclone crypt password must not be empty (rclone turns an empty password "
                "into all-zero keys: use RcloneKeys.from_material(bytes(80)) for that)"
            )
        salt = secret_text_bytes(password2, "password2") if password2 else DEFAULT_SALT
        kdf = Scrypt(salt=salt, length=_KEY_MATERIAL, n=16384, r=8, p=1)
        return cls.from_material(kdf.derive(secret_text_bytes(password)))

    @classmethod
    def from_config(cls, password: str, password2: str = "") -> RcloneKeys:
        """Keys from the ``password`` / ``password2`` values as rclone.conf stores them
        (obscured). Raises :class:`FormatError` for a value that is not obscured."""
        return cls.from_password(reveal(password), reveal(password2) if password2 else "")


def _ctr(iv: bytes, data: bytes) -> bytes:
    ctx = Cipher(algorithms.AES(_OBSCURE_KEY), modes.CTR(iv)).encryptor()
    return ctx.update(data) + ctx.finalize()


def obscure(value: str, *, iv: bytes | None = None) -> str:
    """Obscure a config value as ``rclone obscure`` does (random IV unless given)."""
    iv = random_bytes(16) if iv is None else as_bytes(iv, "iv")
    if len(iv) != 16:
        raise InvalidParameterError(f"the obscuring IV is 16 bytes, got {len(iv)}")
    return (
        base64.urlsafe_b64encode(iv + _ctr(iv, secret_text_bytes(value, "the value to obscure")))
        .rstrip(b"=")
        .decode()
    )


def reveal(value: str) -> str:
    """The clear text of an obscured config value; raises :class:`FormatError`."""
    raw = _b64url_decode(value, "obscured value")
    if len(raw) < 16:
        raise FormatError("an obscured value is at least 16 bytes once decoded: is it obscured?")
    try:
        return _ctr(raw[:16], raw[16:]).decode()
    except UnicodeDecodeError:
        pass  # raised below, outside the handler: the decode error holds the revealed bytes
    raise FormatError("the revealed value is not UTF-8: is it obscured?")


def _b64url_decode(text: str, what: str) -> bytes:
    if not re.fullmatch(r"[A-Za-z0-9_-]*", text) or len(text) % 4 == 1:
        raise FormatError(f"{what} is not unpadded URL-safe base64")
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if base64.urlsafe_b64encode(raw).rstrip(b"=").decode() != text:
        raise FormatError(f"{what} is not canonical base64 (non-zero unused bits)")
    return raw


# ---------------------------------------------------------------------------------------
# File contents
# ---------------------------------------------------------------------------------------


class RcloneCodec(SegmentCodec):
    """64 KiB secretbox blocks with nonce ``base + index`` (little-endian, 192 bits)."""

    __slots__ = ("_base", "_box", "first_segment_size", "segment_size")

    overhead: ClassVar[int] = TAG_SIZE
    final_may_be_full: ClassVar[bool] = True
    max_segments: int = 1 << 64  # rclone adds block counts to the nonce as a uint64

    def __init__(self, data_key: bytes, nonce: bytes) -> None:
        if len(nonce) != NONCE_SIZE:
            raise InvalidParameterError(f"an rclone file nonce is {NONCE_SIZE} bytes")
        self._box = XSalsa20Poly1305(data_key)
        self._base = int.from_bytes(nonce, "little")
        self.segment_size = self.first_segment_size = BLOCK_DATA_SIZE

    def _nonce(self, index: int) -> bytes:
        return ((self._base + index) % _NONCE_MOD).to_bytes(NONCE_SIZE, "little")

    def seal_segment(self, index: int, plaintext: Buffer, final: bool, out: memoryview) -> int:
        if not plaintext:
            raise InvalidParameterError("rclone never writes an empty block")
        return self._box.seal_into(self._nonce(index), plaintext, out)

    def open_segment(self, index: int, ciphertext: Buffer, final: bool, out: memoryview) -> int:
        """Open block ``index``. Raises AuthenticationError, TruncatedStreamError.

        An empty final block 0 is the empty file (a header alone): nothing to open.
        """
        size = len(ciphertext)
        if size == 0 and index == 0 and final:
            return 0
        if size <= TAG_SIZE:
            raise TruncatedStreamError(
                f"rclone block {index} has {size} bytes, not more than its {TAG_SIZE}-byte "
                "tag: the file was cut inside a block"
            )
        try:
            return self._box.open_into(self._nonce(index), ciphertext, out)
        except AuthenticationError:
            raise AuthenticationError(
                f"rclone block {index} did not verify: wrong password or salt, or a "
                "tampered, reordered or cut file"
            ) from None

    def __repr__(self) -> str:
        return "RcloneCodec(<key hidden>)"


def encrypted_size(plaintext_size: int) -> int:
    """The encrypted size of ``plaintext_size`` bytes (rclone's ``EncryptedSize``)."""
    blocks, rest = divmod(plaintext_size, BLOCK_DATA_SIZE)
    return HEADER_SIZE + blocks * BLOCK_SIZE + (TAG_SIZE + rest if rest else 0)


def decrypted_size(stream_size: int) -> int:
    """The plaintext size of an encrypted file of ``stream_size`` bytes (``DecryptedSize``).

    Raises :class:`TruncatedStreamError` for a size no file can have.
    """
    payload = stream_size - HEADER_SIZE
    if payload < 0:
        raise TruncatedStreamError(
            f"{stream_size} bytes cannot hold the {HEADER_SIZE}-byte rclone header"
        )
    blocks, rest = divmod(payload, BLOCK_SIZE)
    if rest and rest <= TAG_SIZE:
        raise TruncatedStreamError(
            f"an rclone file of {stream_size} bytes ends inside a block's tag: truncated"
        )
    return blocks * BLOCK_DATA_SIZE + (rest - TAG_SIZE if rest else 0)


def is_rclone(head: Buffer) -> bool:
    """True when ``head`` starts with the rclone crypt magic (detection by magic)."""
    return bytes(head[: len(MAGIC)]) == MAGIC


def header_size(head: Buffer) -> int | None:
    """The header length (always 32) once ``head`` shows the magic; ``None`` while shorter.

    Raises :class:`FormatError` when the magic is wrong.
    """
    n = min(len(head), len(MAGIC))
    if bytes(head[:n]) != MAGIC[:n]:
        raise FormatError("not an rclone crypt file: bad magic (expected 'RCLONE\\0\\0')")
    return HEADER_SIZE if len(head) >= len(MAGIC) else None


def _open_header(keys: RcloneKeys, data: Buffer) -> RcloneCodec:
    if len(data) < HEADER_SIZE:
        raise TruncatedStreamError(
            f"an rclone file is at least {HEADER_SIZE} bytes (magic and nonce), got {len(data)}"
        )
    header_size(data)
    return RcloneCodec(keys.data_key, bytes(data[len(MAGIC) : HEADER_SIZE]))


def _check_keys(keys: object) -> RcloneKeys:
    if not isinstance(keys, RcloneKeys):
        raise InvalidParameterError(
            "rclone crypt takes RcloneKeys (RcloneKeys.from_password / from_config), "
            f"not {type(keys).__name__}"
        )
    return keys


class RcloneEncryptor(SegmentedEncryptor):
    """Encrypt file contents for a crypt remote (sans-I/O transform).

    ``nonce`` is for tests only (it must never repeat under one key): by default it is
    random, as rclone's. An empty input gives the 32-byte header alone.
    """

    __slots__ = ()

    def __init__(self, keys: RcloneKeys, *, nonce: bytes | None = None) -> None:
        keys = _check_keys(keys)
        nonce = random_bytes(NONCE_SIZE) if nonce is None else as_bytes(nonce, "nonce")
        super().__init__(RcloneCodec(keys.data_key, nonce), MAGIC + nonce)

    def finish(self) -> list[SegmentJob]:
        """The final block's job; none for an empty file (rclone writes no empty block)."""
        self._check()
        if self._index == 0 and not self._held_len:
            self._finish()
            return []
        return super().finish()


class RcloneDecryptor(SegmentedDecryptor):
    """Decrypt rclone crypt contents, releasing each 64 KiB block only after it verified.

    Raises :class:`FormatError` (bad magic), :class:`AuthenticationError` (wrong keys,
    tampering, reordering, a cut inside a block), :class:`TruncatedStreamError` (input
    ended inside the header or inside a block's tag; with ``expected_size``, a file
    shorter than that). Without ``expected_size`` a file cut at a block boundary cannot
    be told from a shorter file (see the module docstring).
    """

    __slots__ = ("_expected",)

    def __init__(self, keys: RcloneKeys, *, expected_size: int | None = None) -> None:
        keys = _check_keys(keys)
        self._expected = _check_expected_size(expected_size)

        def reader(data: bytearray) -> tuple[SegmentCodec, int] | None:
            head = bytes(data[:HEADER_SIZE])  # bounded: the header is fixed-size
            header_size(head)
            if len(head) < HEADER_SIZE:
                return None
            return _open_header(keys, head), HEADER_SIZE

        super().__init__(reader)

    def finish(self) -> list[SegmentJob]:
        """The final block's job; an empty file has none. Checks ``expected_size``."""
        self._check()
        codec = self._codec
        if codec is not None:
            held = self._held_len
            total = self._index * BLOCK_DATA_SIZE + max(held - TAG_SIZE, 0)
            error: Exception | None = None
            if 0 < held <= TAG_SIZE:
                error = TruncatedStreamError(
                    f"the rclone file ends {held} byte(s) into block {self._index}, inside "
                    "its tag: truncated"
                )
            elif self._expected is not None and total != self._expected:
                error = _size_error(total, self._expected)
            if error is not None:
                raise self._break(error)
            if held == 0:
                self._finish()
                return []
        return super().finish()


def _size_error(actual: int, expected: int) -> Exception:
    if actual < expected:
        return TruncatedStreamError(
            f"the rclone file holds {actual} plaintext bytes, {expected} were expected: "
            "it was cut (at a block boundary, which the format itself cannot show)"
        )
    return FormatError(
        f"the rclone file holds {actual} plaintext bytes, more than the {expected} expected"
    )


class RcloneLayout(SegmentLayout):
    """:class:`SegmentLayout` that also maps the empty file (a header and no block)."""

    __slots__ = ()

    @property
    def segment_count(self) -> int:
        if self.stream_size == self.header_size:
            return 1  # one empty "final block" that opens to nothing
        return super().segment_count

    @property
    def plaintext_size(self) -> int:
        return decrypted_size(self.stream_size)


def layout(
    keys: RcloneKeys, head: Buffer, stream_size: int, *, expected_size: int | None = None
) -> RcloneLayout:
    """Check the magic at the start of ``head`` and map a file of ``stream_size`` bytes.

    The plaintext size comes from the file size (rclone's ``DecryptedSize``); with
    ``expected_size`` a different one raises (see :class:`RcloneDecryptor`). Raises
    :class:`FormatError`, :class:`TruncatedStreamError`.
    """
    codec = _open_header(_check_keys(keys), head)
    lay = RcloneLayout(codec, HEADER_SIZE, stream_size)
    size = lay.plaintext_size
    if expected_size is not None and size != expected_size:
        raise _size_error(size, expected_size)
    return lay


# ---------------------------------------------------------------------------------------
# Names
# ---------------------------------------------------------------------------------------

_VERSION_SEARCH = re.compile(r"-v[0-9]{4}-[0-9]{2}-[0-9]{2}-[0-9]{6}-[0-9]{3}")
_VERSION_TAIL = re.compile(
    r"-v([0-9]{4})-([0-9]{2})-([0-9]{2})-([0-9]{2})([0-9]{2})([0-9]{2})-([0-9]{3})"
)
_VERSION_LEN = len("-v2006-01-02-150405.000")


def _split_ext(name: str) -> tuple[str, str]:
    dot = name.rfind(".")
    if dot < 0:
        return name, ""
    base, ext = name[:dot], name[dot:]
    return (ext, "") if base == "" else (base, ext)


def _remove_version(name: str) -> tuple[str, str] | None:
    """``(name without version, version)`` as rclone's ``version.Remove``, else None."""
    if not _VERSION_SEARCH.search(name):
        return None
    base, ext = _split_ext(name)
    if len(base) < _VERSION_LEN:
        return None
    tail = base[len(base) - _VERSION_LEN :]
    m = _VERSION_TAIL.fullmatch(tail)
    if m is None:
        return None
    try:
        year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
        datetime(year, month, day, hour, minute, second)
    except ValueError:
        return None
    return base[: len(base) - _VERSION_LEN] + ext, tail


def _add_version(name: str, version: str) -> str:
    base, ext = _split_ext(name)
    return base + version + ext


def _rune(value: int) -> str:
    """``chr`` as Go writes a rune: an invalid one becomes U+FFFD."""
    return chr(value) if 0 <= value <= 0x10FFFF and not 0xD800 <= value <= 0xDFFF else "\ufffd"


def _clear_path(path: str) -> str:
    """A decrypted path, if :func:`streamcrypt.paths.name_parts` takes it: a name from a
    remote that decrypts to ``..``, ``.``, an empty component or a NUL would lead a local
    path elsewhere (rclone never writes one)."""
    try:
        name_parts(path, what="the decrypted path", local=False)
    except UnsafePathError as exc:
        raise FormatError(str(exc)) from None
    return path


def _go_mod(a: int, b: int) -> int:
    """Go's ``%`` (truncated toward zero), for rotation amounts read from a name."""
    r = abs(a) % b
    return -r if a < 0 else r


class RcloneNameCipher(HoldsSecrets):
    """Encrypt and decrypt file and directory names as a crypt remote does.

    ``mode``: ``"standard"`` (EME-AES-256), ``"obfuscate"`` or ``"off"``; ``encoding``:
    ``"base32"`` (rclone's default), ``"base64"`` or ``"base32768"``;
    ``directory_name_encryption`` (default True, as rclone); ``suffix`` for ``off``
    (``".bin"``; ``""`` or ``"none"`` for none). Decryption raises :class:`FormatError`
    (bad encoding, wrong length), :class:`InvalidPaddingError` (wrong keys or not an
    encrypted name); encryption raises :class:`LimitExceededError` for a name over 2047
    bytes.
    """

    __slots__ = ("_dirs", "_eme", "_encoding", "_mode", "_name_key", "_suffix", "_tweak")

    def __init__(
        self,
        keys: RcloneKeys,
        mode: NameEncryption = "standard",
        encoding: NameEncoding = "base32",
        *,
        directory_name_encryption: bool = True,
        suffix: str = ".bin",
    ) -> None:
        keys = _check_keys(keys)
        if mode not in ("standard", "obfuscate", "off"):
            raise InvalidParameterError(
                f"unknown rclone filename_encryption {mode!r}: standard, obfuscate or off"
            )
        if encoding not in ("base32", "base64", "base32768"):
            raise InvalidParameterError(
                f"unknown rclone filename_encoding {encoding!r}: base32, base64 or base32768"
            )
        if suffix.lower() == "none":
            suffix = ""
        elif suffix and not suffix.startswith("."):
            suffix = "." + suffix  # as rclone does (it logs an error and adds the dot)
        self._mode: NameEncryption = mode
        self._encoding: NameEncoding = encoding
        self._dirs = directory_name_encryption
        self._suffix = suffix
        self._eme = Eme(keys.name_key)
        self._tweak = keys.name_tweak
        self._name_key = keys.name_key

    def __repr__(self) -> str:
        return f"RcloneNameCipher(mode={self._mode!r}, encoding={self._encoding!r}, <keys hidden>)"

    # -- encodings ----------------------------------------------------------------------
    def _encode(self, data: bytes) -> str:
        if self._encoding == "base32":
            return base64.b32hexencode(data).decode().rstrip("=").lower()
        if self._encoding == "base64":
            return base64.urlsafe_b64encode(data).decode().rstrip("=")
        return _base32768.encode(data)

    def _decode(self, text: str) -> bytes:
        if self._encoding == "base32":
            if text.endswith("=") or not re.fullmatch(r"[0-9A-Va-v]*", text):
                raise FormatError("bad base32 name encoding (base32hex, no padding)")
            try:
                raw = base64.b32hexdecode(text.upper() + "=" * (-len(text) % 8))
            except binascii.Error:
                raise FormatError("bad base32 name encoding (length)") from None
            if self._encode(raw) != text.lower():
                raise FormatError("bad base32 name encoding (not canonical)")
            return raw
        if self._encoding == "base64":
            return _b64url_decode(text, "a base64 name")
        return _base32768.decode(text)

    # -- one segment --------------------------------------------------------------------
    def encrypt_segment(self, name: str) -> str:
        """One path segment (no ``/``) encrypted in ``standard`` or ``obfuscate`` mode."""
        if not name:
            return ""
        if self._mode == "obfuscate":
            return self._obfuscate(name)
        raw = name.encode("utf-8", "surrogateescape")
        pad = _NAME_BLOCK - len(raw) % _NAME_BLOCK
        if len(raw) + pad > _MAX_NAME_CIPHERTEXT:
            raise LimitExceededError(
                f"an rclone encrypted name holds at most {_MAX_NAME_CIPHERTEXT - 1} bytes, "
                f"this one has {len(raw)}"
            )
        return self._encode(self._eme.encrypt(self._tweak, raw + bytes([pad]) * pad))

    def decrypt_segment(self, text: str) -> str:
        """Undo :meth:`encrypt_segment`."""
        if not text:
            return ""
        if self._mode == "obfuscate":
            return self._deobfuscate(text)
        raw = self._decode(text)
        if len(raw) % _NAME_BLOCK:
            raise FormatError("an encrypted name is not a multiple of 16 bytes once decoded")
        if len(raw) > _MAX_NAME_CIPHERTEXT:
            raise FormatError("an encrypted name is longer than 2048 bytes once decoded")
        padded = self._eme.decrypt(self._tweak, raw)
        pad = padded[-1]
        if not 1 <= pad <= _NAME_BLOCK or padded[-pad:] != bytes([pad]) * pad:
            raise InvalidPaddingError(
                "the decrypted name has bad PKCS#7 padding: wrong password or salt, or not "
                "an encrypted name"
            )
        return padded[:-pad].decode("utf-8", "surrogateescape")

    def _rotation(self, base: int) -> int:
        return base + sum(self._name_key)

    def _obfuscate(self, name: str) -> str:
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            return "!." + name
        total = sum(map(ord, name)) % 256
        shift = self._rotation(total)
        out = [f"{total}."]
        for ch in name:
            r = ord(ch)
            if ch == "!":
                out.append("!!")
            elif "0" <= ch <= "9":
                out.append(chr(48 + (r - 48 + shift % 9 + 1) % 10))
            elif "A" <= ch <= "Z" or "a" <= ch <= "z":
                pos = r - 65 - (6 if r >= 97 else 0)
                pos = (pos + shift % 25 + 1) % 52
                out.append(chr(65 + pos + (6 if pos >= 26 else 0)))
            elif 0xA0 <= r <= 0xFF:
                out.append(chr(0xA0 + (r - 0xA0 + shift % 95 + 1) % 96))
            elif r >= 0x100:
                block = r - r % 256
                new = block + (r - block + shift % 127 + 1) % 256
                out.append("!" + ch if 0xD800 <= new <= 0xDFFF else chr(new))
            else:
                out.append(ch)
        return "".join(out)

    def _deobfuscate(self, text: str) -> str:
        num, dot, rest = text.partition(".")
        if not dot:
            raise FormatError("not an obfuscated rclone name (no '.')")
        if num == "!":
            return rest
        if not re.fullmatch(r"[+-]?[0-9]{1,18}", num):
            raise FormatError("not an obfuscated rclone name (no rotation number)")
        shift = self._rotation(int(num))
        out: list[str] = []
        quoted = False
        for ch in rest:
            r = ord(ch)
            if quoted:
                out.append(ch)
                quoted = False
            elif ch == "!":
                quoted = True
            elif "0" <= ch <= "9":
                new = r - (_go_mod(shift, 9) + 1)
                out.append(_rune(new + 10 if new < 48 else new))
            elif "A" <= ch <= "Z" or "a" <= ch <= "z":
                pos = r - 65 - (6 if r >= 97 else 0) - (_go_mod(shift, 25) + 1)
                pos += 52 if pos < 0 else 0
                out.append(_rune(65 + pos + (6 if pos >= 26 else 0)))
            elif 0xA0 <= r <= 0xFF:
                new = r - (_go_mod(shift, 95) + 1)
                out.append(_rune(new + 96 if new < 0xA0 else new))
            elif r >= 0x100:
                block = r - r % 256
                new = r - (_go_mod(shift, 127) + 1)
                new += 256 if new < block else 0
                out.append(_rune(new))
            else:
                out.append(ch)
        return "".join(out)

    # -- paths --------------------------------------------------------------------------
    def _transform_path(self, path: str, forward: bool) -> str:
        segments = path.split("/")
        last = len(segments) - 1
        for i, segment in enumerate(segments):
            if not self._dirs and i != last:
                continue
            version = _remove_version(segment) if i == last else None
            if version is not None:
                segment = version[0]
            segment = self.encrypt_segment(segment) if forward else self.decrypt_segment(segment)
            segments[i] = _add_version(segment, version[1]) if version is not None else segment
        return "/".join(segments)

    def encrypt_path(self, path: str) -> str:
        """A file path (``a/b/name``) as the remote stores it (rclone ``EncryptFileName``)."""
        if self._mode == "off":
            return path + self._suffix
        return self._transform_path(path, True)

    def decrypt_path(self, path: str) -> str:
        """The clear file path of a stored one; raises :class:`FormatError` (also for a
        clear path that is not a plain relative one: ``..``, ``.``, an empty component, a
        NUL) and :class:`InvalidPaddingError` (rclone ``DecryptFileName``)."""
        return _clear_path(self._decrypt_path(path))

    def _decrypt_path(self, path: str) -> str:
        if self._mode == "off":
            keep = len(path) - len(self._suffix)
            if keep <= 0 or not path.endswith(self._suffix):
                raise FormatError(
                    f"not an encrypted file name: it does not end in {self._suffix!r}"
                )
            clear = path[:keep]
            removed = _remove_version(clear)
            if removed is not None and removed[0] == "":
                raise FormatError("not an encrypted file name: a version string alone")
            return clear
        return self._transform_path(path, False)

    def encrypt_dir(self, path: str) -> str:
        """A directory path as stored (rclone ``EncryptDirName``)."""
        if self._mode == "off" or not self._dirs:
            return path
        return self._transform_path(path, True)

    def decrypt_dir(self, path: str) -> str:
        """The clear directory path of a stored one (rclone ``DecryptDirName``; ``""`` is
        the root); raises as :meth:`decrypt_path`."""
        if self._mode == "off" or not self._dirs:
            clear = path
        else:
            clear = self._transform_path(path, False)
        return _clear_path(clear) if clear else clear


def _keys(options: FormatOptions) -> RcloneKeys:
    """``key=`` (:class:`RcloneKeys`), or the keys of ``password=`` / ``password2=``."""
    if options.key is not None:
        return _check_keys(options.key)
    assert options.password is not None
    return RcloneKeys.from_password(options.password, options.password2)


def _check_expected_size(expected_size: int | None) -> int | None:
    if expected_size is not None and (
        not isinstance(expected_size, int) or isinstance(expected_size, bool) or expected_size < 0
    ):
        raise InvalidParameterError(
            f"expected_size must be a non-negative int or None, got {expected_size!r}"
        )
    return expected_size


def _derive(options: FormatOptions) -> FormatOptions:
    """The options keyed by :class:`RcloneKeys` (scrypt of ``password=``: ~50 ms)."""
    return options._replace(key=_keys(options), password=None, password2="")


def _check(options: FormatOptions, mode: str) -> None:
    if (options.key is None) == (not options.password):
        raise InvalidParameterError(
            'format="rclone" needs password= (the crypt remote\'s password, in clear; '
            "password2= is its optional salt) or key= (RcloneKeys), one of them"
        )
    _check_expected_size(options.expected_size)


def _layout(options: FormatOptions, read_at: ReadAt, stream_size: int) -> SegmentLayout:
    head = read_at(0, HEADER_SIZE)
    return layout(_keys(options), head, stream_size, expected_size=options.expected_size)


#: rclone crypt's format descriptor (``key``: :class:`RcloneKeys`, or ``password=`` and
#: ``password2=``; 64 KiB blocks). It has no end marker: a file cut at a block boundary
#: is caught only with ``expected_size`` (the codec's keyword).
FORMAT = SegmentedFormat(
    "rclone",
    encryptor=lambda o: RcloneEncryptor(_keys(o)),
    decryptor=lambda o: RcloneDecryptor(_keys(o), expected_size=o.expected_size),
    writes=frozenset({"key", "password", "password2"}),
    reads=frozenset({"key", "password", "password2", "expected_size"}),
    check=_check,
    derive=_derive,
    detect=is_rclone,
    header_size=header_size,
    max_header_size=HEADER_SIZE,
    layout=_layout,
    opens_files=True,
    detects_truncation_at_boundary=False,
)
