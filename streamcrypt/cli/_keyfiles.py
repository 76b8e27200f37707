"""Key files of the ``streamcrypt`` command: writing them (keygen) and reading any of them.

Four kinds of file, all UTF-8 text, ``#`` lines are comments (docs/CLI.md has the spec):

* symmetric and Ed25519 keys: ``name: value`` lines (the format is ``streamcrypt.keys.keyfile``
  for symmetric keys, which also reads the older 64 hex digits) — ``streamcrypt-key: 1``,
  ``type: symmetric`` (or ``ed25519``), ``id: <key id>`` (symmetric only; it goes into
  every container header), ``key: <base64>`` (32 bytes; a symmetric key may be 16 bytes,
  for RFC 8188 HTTP bodies);
* X25519 identities: one ``SC-X25519-SECRET-1...`` line (the envelope's Bech32 form),
  with a ``# public key: sc-x25519-pub1...`` comment;
* age identities: ``AGE-SECRET-KEY-1...`` lines, as ``age-keygen`` writes them (and
  plugin identities, ``AGE-PLUGIN-NAME-1...``), or an SSH private key file (Ed25519 or
  RSA; OpenSSH or PEM), as age's ``-i ~/.ssh/id_rsa``;
* Tink keysets: a cleartext JSON keyset (read only).

Every failure here is a key problem: :class:`KeyFileError` (exit code 3). Messages name
the file and what is wrong with it, never the key.
"""

from __future__ import annotations

import base64
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from .._lazy import LazyModule
from ..errors import StreamCryptError
from ..keys import SecretKey
from ..keys import keyfile as _kf
from ._errors import EXIT_KEY, EXIT_USAGE, CliError

TYPE_CHECKING = False  # ``typing.TYPE_CHECKING`` without importing typing (start-up)
if TYPE_CHECKING:
    from .. import primitives as _primitives
    from ..codecs import age as _age
    from ..codecs import envelope as _envelope
    from ..codecs import tink as _tink
    from ..codecs import tink_keyset as _tink_keyset
else:  # imported when a key of that kind is first read or made (start-up)
    _primitives = LazyModule("streamcrypt.primitives")  # Ed25519 keys (libsodium)
    _age = LazyModule("streamcrypt.codecs.age")
    _envelope = LazyModule("streamcrypt.codecs.envelope")
    _tink = LazyModule("streamcrypt.codecs.tink")
    _tink_keyset = LazyModule("streamcrypt.codecs.tink_keyset")

_MAGIC_FIELD = _kf.KEY_FILE_MAGIC
_VERSION = _kf.KEY_FILE_VERSION
_MAX_KEY_FILE = 1 << 20

KeyKind = Literal["symmetric", "ed25519", "x25519", "age", "tink"]

#: Every recipient form age encryption takes (for messages).
AGE_RECIPIENT_KINDS = (
    "age1..., age1pq1..., a plugin's age1NAME1..., 'ssh-ed25519 AAAA...' or 'ssh-rsa AAAA...'"
)
#: Every identity file form age takes (for messages).
AGE_IDENTITY_KINDS = (
    "AGE-SECRET-KEY-1..., AGE-SECRET-KEY-PQ-1... or AGE-PLUGIN-NAME-1... lines, or an "
    "ssh-ed25519 or ssh-rsa private key such as ~/.ssh/id_ed25519"
)


class KeyFileError(CliError):
    """A key file is missing, unreadable, malformed or of the wrong kind (exit code 3)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, EXIT_KEY)


@dataclass(eq=False)
class KeyFile:
    """What a key file holds; exactly the fields of its ``kind`` are set."""

    path: str
    kind: KeyKind
    symmetric: SecretKey | None = None
    ed25519: _primitives.Ed25519PrivateKey | None = None
    envelope_identities: list[_envelope.X25519Identity | _envelope.EciesIdentity] = field(
        default_factory=list
    )
    age_identities: list[_age.AnyIdentity] = field(default_factory=list)
    tink_keyset: _tink.TinkKeyset | None = None
    #: raw X25519 private keys (for Noise), for the identity kinds that are X25519
    x25519_raw: list[bytes] = field(default_factory=list, repr=False)

    def __repr__(self) -> str:
        return f"KeyFile({self.path!r}, {self.kind})"

    def describe(self) -> str:
        return {
            "symmetric": "a symmetric key",
            "ed25519": "an Ed25519 signing key",
            "x25519": "an X25519 identity",
            "age": "an age identity",
            "tink": "a Tink keyset",
        }[self.kind]

    def require(self, *kinds: KeyKind, purpose: str) -> None:
        """Raise :class:`KeyFileError` unless this file is of one of ``kinds``."""
        if self.kind not in kinds:
            raise KeyFileError(f"{self.path} holds {self.describe()}, but {purpose}")


# --------------------------------------------------------------------------------- reading


def _read_text(path: str, *, secret: bool = True) -> str:
    """A key file's text; a ``secret`` one is read by :func:`keyfile.read_secret_file`,
    which warns when others may read it."""
    try:
        if path == "-":  # standard input (keygen -y)
            raw = sys.stdin.buffer.read(_MAX_KEY_FILE + 1)
        elif secret:
            raw = _kf.read_secret_file(path, _MAX_KEY_FILE)
        else:
            with open(path, "rb") as f:
                raw = f.read(_MAX_KEY_FILE + 1)
    except OSError as exc:
        raise KeyFileError(f"cannot read key file {path}: {exc.strerror or exc}") from None
    if len(raw) > _MAX_KEY_FILE:
        raise KeyFileError(f"{path} is too large to be a key file")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise KeyFileError(
            f"{path} is not a text key file (expected a file written by 'streamcrypt keygen', "
            "an age identity file, an SSH private key or a Tink JSON keyset)"
        ) from None


#: The longest passphrase file the command reads (its first line is the passphrase).
_MAX_SECRET_LINE = 1 << 16


def read_secret_line(path: str, what: str) -> str:
    """The first line of a secret's file (a passphrase, rclone's password2, a server
    token), read as every secret file is (:func:`keyfile.read_secret_file`); raises
    :class:`KeyFileError` naming the file, never its contents."""
    try:
        raw = _kf.read_secret_file(path, _MAX_SECRET_LINE, f"{what} file")
    except OSError as exc:
        raise KeyFileError(f"cannot read the {what} file {path}: {exc.strerror or exc}") from None
    first = raw[:_MAX_SECRET_LINE].split(b"\n", 1)[0].rstrip(b"\r")
    try:
        line = first.decode("utf-8")
    except UnicodeDecodeError:
        line = None  # raised below, outside the handler: its message shows a secret byte
    if line is None:
        raise KeyFileError(f"the {what} file {path} is not valid UTF-8")
    if not line:
        raise KeyFileError(f"the {what} file {path} is empty")
    return line


def _b64_key(value: str, path: str, what: str) -> bytes:
    try:
        return _kf.b64_key(value, path, what)
    except StreamCryptError as exc:
        raise KeyFileError(str(exc)) from None


def _load_fields(path: str, lines: Sequence[str], text: str) -> KeyFile:
    try:
        fields = _kf.key_file_fields(lines, path)
        if fields.get("type") == "symmetric":
            return KeyFile(path, "symmetric", symmetric=_kf.secret_key_from_text(text, source=path))
    except StreamCryptError as exc:
        raise KeyFileError(str(exc)) from None
    kind = fields.get("type")
    if kind == "ed25519":
        seed = _b64_key(fields["key"], path, "key")
        return KeyFile(path, "ed25519", ed25519=_primitives.Ed25519PrivateKey(seed))
    raise KeyFileError(f"{path}: unknown key type {kind!r} (expected symmetric or ed25519)")


def _load_identities(path: str, lines: Sequence[str]) -> KeyFile:
    envelope_ids: list[_envelope.X25519Identity | _envelope.EciesIdentity] = []
    age_ids: list[_age.AnyIdentity] = []
    raws: list[bytes] = []
    for number, line in enumerate(lines, 1):
        ident: _envelope.X25519Identity | _envelope.EciesIdentity | _age.AnyIdentity
        if line.upper().startswith(("AGE-SECRET-KEY-", "AGE-PLUGIN-")):
            ident = _age.parse_identity(line)
            age_ids.append(ident)
        elif line.upper().startswith("SC-"):
            ident = _envelope.parse_identity(line)
            envelope_ids.append(ident)
        else:
            raise KeyFileError(
                f"{path}: line {number} is not an identity (AGE-SECRET-KEY-1..., "
                "AGE-SECRET-KEY-PQ-1..., AGE-PLUGIN-NAME-1... or SC-X25519-SECRET-1...)"
            )
        if isinstance(ident, _age.X25519Identity):  # an X25519 key pair serves Noise too
            raws.append(ident.secret_key().secret_bytes())
    if envelope_ids and age_ids:
        raise KeyFileError(f"{path}: mixes age and streamcrypt identities; use two files")
    if age_ids:
        return KeyFile(path, "age", age_identities=age_ids, x25519_raw=raws)
    return KeyFile(path, "x25519", envelope_identities=envelope_ids, x25519_raw=raws)


def load_key_file(path: str) -> KeyFile:
    """Read any key file the command knows; raises :class:`KeyFileError` (exit code 3)."""
    text = _read_text(path)
    if text.lstrip().startswith("{"):
        try:
            return KeyFile(path, "tink", tink_keyset=_tink_keyset.keyset_from_json(text))
        except StreamCryptError as exc:
            raise KeyFileError(f"{path}: not a usable Tink keyset: {exc}") from None
    if text.lstrip().startswith("-----BEGIN "):
        try:  # an SSH private key file (as age's -i ~/.ssh/id_ed25519 or id_rsa)
            return KeyFile(path, "age", age_identities=_age.parse_identities(text))
        except StreamCryptError as exc:
            raise KeyFileError(f"{path}: {exc}") from None
    lines = _kf.key_file_lines(text)
    if not lines:
        raise KeyFileError(f"{path} holds no key")
    try:
        if ":" in lines[0]:
            return _load_fields(path, lines, text)
        if not lines[0].upper().startswith(("AGE-SECRET-KEY-", "AGE-PLUGIN-", "SC-")):
            # the older symmetric form (64 hex digits), or a clear message about the format
            return KeyFile(path, "symmetric", symmetric=_kf.secret_key_from_text(text, source=path))
        return _load_identities(path, lines)
    except KeyFileError:
        raise
    except StreamCryptError as exc:
        raise KeyFileError(f"{path}: {exc}") from None


def parse_public_key(value: str, *, kind: Literal["ed25519", "x25519"]) -> bytes:
    """A 32-byte public key from a literal or a file holding one.

    Accepted forms: base64 of the 32 bytes; for X25519 also ``sc-x25519-pub1...`` and
    ``age1...``; a file holding one of these (``#`` comments allowed), or a private key
    file of the same kind (its public half is used). Raises :class:`KeyFileError`.
    """
    text = value
    source = "the public key"
    if os.path.exists(value):
        keyfile_text = _read_text(value, secret=False)  # a private key is read again below
        source = value
        lines = _kf.key_file_lines(keyfile_text)
        if len(lines) != 1 or lines[0].upper().startswith(("AGE-SECRET-KEY-", "SC-")):
            kf = load_key_file(value)
            if kind == "ed25519" and kf.ed25519 is not None:
                return kf.ed25519.public_bytes()
            if kind == "x25519" and kf.x25519_raw:
                from cryptography.hazmat.primitives.asymmetric import x25519

                private = x25519.X25519PrivateKey.from_private_bytes(kf.x25519_raw[0])
                return private.public_key().public_bytes_raw()
            raise KeyFileError(f"{value} holds {kf.describe()}, not an {kind} public key")
        text = lines[0]
    text = text.strip()
    if kind == "x25519" and text.lower().startswith(("sc-x25519-pub1", "age1")):
        try:
            return _age.X25519Recipient.parse(text).public_bytes()
        except StreamCryptError as exc:
            raise KeyFileError(f"{source}: not an X25519 public key: {exc}") from None
    raw = _b64_key(text, source, f"{kind} public key")
    if kind == "ed25519":
        try:
            _primitives.Ed25519PublicKey(raw)
        except StreamCryptError as exc:
            raise KeyFileError(f"{source}: {exc}") from None
    return raw


def public_lines(kf: KeyFile) -> list[str]:
    """The public half of each key in ``kf``, one line each (``keygen -y``).

    Raises :class:`KeyFileError` for a kind without a public half (symmetric keys)."""
    if kf.ed25519 is not None:
        return [base64.b64encode(kf.ed25519.public_bytes()).decode()]
    if kf.kind == "age":
        if any(isinstance(ident, _age.PluginIdentity) for ident in kf.age_identities):
            raise KeyFileError(
                f"{kf.path} holds an age plugin identity: its recipient comes from the "
                "plugin (e.g. age-plugin-pkcs11 --identity URI prints both)"
            )
        return [str(ident.recipient) for ident in kf.age_identities]
    if kf.kind == "x25519":
        return [str(ident.recipient) for ident in kf.envelope_identities]
    raise KeyFileError(f"{kf.path} holds {kf.describe()}, which has no public half")


# --------------------------------------------------------------------------------- writing


def new_key_text(kind: str, key_id: str | None, size: int | None = None) -> tuple[str, str | None]:
    """A fresh key of ``kind`` (a symmetric key of ``size`` bytes, default 32): the file
    text and the public half to print (if any)."""
    created = _kf.created_comment()
    if kind == "symmetric":
        kid = key_id if key_id is not None else os.urandom(8).hex()
        if "\n" in kid or ":" in kid or len(kid.encode()) > 255:
            raise CliError("--key-id must be one line without ':' of at most 255 bytes", EXIT_USAGE)
        key = SecretKey.generate(size or _kf.KEY_SIZE, key_id=kid)
        return _kf.secret_key_file_text(key), None
    if key_id is not None or size is not None:
        raise CliError("--key-id and --size apply to symmetric keys only", EXIT_USAGE)
    if kind == "ed25519":
        signing = _primitives.Ed25519PrivateKey.generate()
        public = base64.b64encode(signing.public_bytes()).decode()
        text = (
            "# streamcrypt Ed25519 signing key: SECRET, keep it private\n"
            f"{created}# public key: {public}\n{_MAGIC_FIELD}: {_VERSION}\ntype: ed25519\n"
            f"key: {base64.b64encode(signing.secret_bytes()).decode()}\n"
        )
        return text, public
    if kind == "x25519":
        ident = _envelope.X25519Identity.generate(text_form="envelope")
        public = str(ident.recipient)
        text = (
            "# streamcrypt X25519 identity: SECRET, keep it private\n"
            f"{created}# public key: {public}\n{ident.to_string()}\n"
        )
        return text, public
    if kind in ("age", "age-pq"):
        pq = kind == "age-pq"
        age_ident = (_age.MLKEM768X25519Identity if pq else _age.X25519Identity).generate()
        public = str(age_ident.recipient)
        return f"{created}# public key: {public}\n{age_ident.to_string()}\n", public
    raise CliError(f"unknown key type {kind!r}", EXIT_USAGE)


def write_key_file(path: str, text: str, *, force: bool, mode: int = 0o600) -> None:
    """Write a key file with mode 0600; an existing file is replaced only with ``force``.

    Without ``force`` the file is created exclusively (``O_EXCL``): an existing file is a
    usage error (exit 2). With ``force`` it is replaced atomically.
    """
    data = text.encode()
    if not force:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
        except FileExistsError:
            raise CliError(
                f"{path} exists; refusing to overwrite a key file (use --force)", EXIT_USAGE
            ) from None
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            os.unlink(path)
            raise
        os.close(fd)
        return
    from ..transports import write_atomic  # here: only a replaced file needs it (start-up)

    write_atomic(path, data, mode=mode)  # owner-only from creation on


def identity_files(paths: list[str]) -> list[KeyFile]:
    """The key files of ``-i``, each one of identities (age or X25519), or a key error."""
    files: list[KeyFile] = []
    for path in paths:
        kf = load_key_file(path)
        kf.require("x25519", "age", purpose="-i takes an identity file")
        files.append(kf)
    return files
