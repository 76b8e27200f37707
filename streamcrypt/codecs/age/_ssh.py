"""OpenSSH keys as age recipients and identities, as age and rage accept them:
``ssh-ed25519`` (X25519 against the key's Montgomery form, with a tweak) and ``ssh-rsa``
(RSA-OAEP). Each stanza names its key by a tag, the first 4 bytes of SHA-256 of the SSH
wire key."""

from __future__ import annotations

import base64
import hashlib
import re
from typing import TYPE_CHECKING

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ed25519, x25519

from ..._lazy import LazyModule
from ...abc import Buffer, as_bytes
from ...errors import (
    AuthenticationError,
    FormatError,
    InvalidKeySizeError,
    InvalidParameterError,
    UnsupportedFormatError,
)
from ...keys import SecretKey, as_secret_key, hkdf, random_bytes
from .._stanza import KeyIdentity, PublicKey, Stanza, b64encode, check_shape, stanza_arg
from .._x25519 import dh_unwrap, dh_wrap

if TYPE_CHECKING:
    # imported where used: SSH keys (serialization, RSA) cost an X25519 recipient's every
    # run ~20 ms of start-up (docs/CLI.md)
    from cryptography.hazmat.primitives.asymmetric import padding, rsa
    from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
    from cryptography.hazmat.primitives.serialization import SSHPublicKeyTypes
else:  # the RSA keys' annotations, for typing.get_type_hints (imported when it reads them)
    rsa = LazyModule("cryptography.hazmat.primitives.asymmetric.rsa")

_SSH_ED25519_INFO = b"age-encryption.org/v1/ssh-ed25519"
_SSH_ED25519 = "ssh-ed25519"
_SSH_RSA_LABEL = b"age-encryption.org/v1/ssh-rsa"
_SSH_RSA = "ssh-rsa"
_SSH_TAG_SIZE = 4
# authorized_keys key types start so (ssh-rsa, ecdsa-sha2-nistp256, sk-ssh-ed25519@...)
_SSH_PREFIXES = ("ssh-", "ecdsa-", "sk-")
# age and rage refuse smaller RSA keys; OpenSSH (and OpenSSL's RSA) stop at 16384 bits.
_RSA_MIN_BITS = 2048
_RSA_MAX_BITS = 16384
# An SSH private key file: OpenSSH's own form or PEM (PKCS#1 "RSA PRIVATE KEY", PKCS#8).
_PEM_BEGIN = "-----BEGIN "
_OPENSSH_PRIVATE_BEGIN = b"-----BEGIN OPENSSH PRIVATE KEY-----"
# Inside an authorized_keys line (its comment too): a control character or line break
# (tab separates fields). str.split() would take a second line as more comment, while a
# recipient list (key_lines) reads it as another key.
_NOT_IN_A_LINE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")


def _ssh_wire(public_key: ed25519.Ed25519PublicKey | rsa.RSAPublicKey) -> bytes:
    """The SSH wire encoding of a public key (the base64 of authorized_keys)."""
    from cryptography.hazmat.primitives import serialization

    line = public_key.public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    return base64.b64decode(line.split()[1])


def _ssh_tag(wire: bytes) -> bytes:
    """The stanza tag of an SSH recipient: the first 4 bytes of SHA-256 of its wire key."""
    return hashlib.sha256(wire).digest()[:_SSH_TAG_SIZE]


def _ssh_public_key(text: str, kind: str) -> SSHPublicKeyTypes:
    """The key of an authorized_keys line ``<kind> AAAA... [comment]`` (one line: its
    ends may be blank); raises :class:`FormatError` (also for a line break or control
    character inside it; :class:`UnsupportedFormatError` for an SSH type age lacks)."""
    from cryptography.hazmat.primitives import serialization

    if _NOT_IN_A_LINE.search(text.strip()):
        raise FormatError(f"an {kind} public key line holds a line break or control character")
    fields = text.split()
    if len(fields) < 2 or not fields[0].startswith(_SSH_PREFIXES):
        raise FormatError(f"not an SSH public key line ({kind} AAAA...)")
    if fields[0] not in (_SSH_ED25519, _SSH_RSA):
        raise UnsupportedFormatError(
            f"SSH key type {fields[0][:32]!r} is not supported as an age recipient; "
            "use an ssh-ed25519 or ssh-rsa key"
        )
    if fields[0] != kind:
        raise FormatError(f"not an {kind} public key line")
    try:
        return serialization.load_ssh_public_key(f"{fields[0]} {fields[1]}".encode())
    except (ValueError, UnsupportedAlgorithm):
        raise FormatError(f"the {kind} public key does not parse") from None


def _ssh_private_key(data: str | Buffer) -> PrivateKeyTypes:
    """The key in an unencrypted OpenSSH or PEM private key file; raises
    :class:`FormatError` (:class:`UnsupportedFormatError` when passphrase-protected)."""
    from cryptography.hazmat.primitives import serialization

    raw = data.encode() if isinstance(data, str) else as_bytes(data, "data")
    try:
        if raw.lstrip().startswith(_OPENSSH_PRIVATE_BEGIN):
            return serialization.load_ssh_private_key(raw, password=None)
        return serialization.load_pem_private_key(raw, password=None)
    except TypeError:  # cryptography's "a password is needed"
        raise UnsupportedFormatError(
            "the SSH private key is passphrase-protected: decrypt a copy with "
            "'ssh-keygen -p' (only unencrypted keys are read)"
        ) from None
    except (ValueError, UnsupportedAlgorithm):
        raise FormatError("the SSH private key file does not parse") from None


class SshEd25519Recipient(PublicKey):
    """An OpenSSH Ed25519 public key as an age recipient (``ssh-ed25519 AAAA...``).

    The stanza is ``-> ssh-ed25519 <tag> <share>``: the tag is the first 4 bytes of
    SHA-256 of the SSH wire key; the X25519 exchange runs against the key's Montgomery
    form and is then multiplied by a tweak, HKDF-SHA-256 of the wire key (as the salt).
    """

    __slots__ = ("_tag", "_tweak", "_wire", "_x25519")

    def __init__(self, public_key: Buffer | ed25519.Ed25519PublicKey) -> None:
        if isinstance(public_key, ed25519.Ed25519PublicKey):
            key = public_key
        else:
            raw = bytes(public_key)
            if len(raw) != 32:
                raise InvalidKeySizeError(f"an Ed25519 public key must be 32 bytes, got {len(raw)}")
            key = ed25519.Ed25519PublicKey.from_public_bytes(raw)
        from ...primitives import eddsa_to_x25519  # libsodium's bindings: SSH keys only

        self._public = key.public_bytes_raw()
        self._x25519 = eddsa_to_x25519(self._public)
        self._wire = _ssh_wire(key)
        self._tag = _ssh_tag(self._wire)
        tweak = hkdf(b"", salt=self._wire, info=_SSH_ED25519_INFO)
        self._tweak = x25519.X25519PrivateKey.from_private_bytes(tweak)

    @classmethod
    def parse(cls, text: str) -> SshEd25519Recipient:
        """Parse an authorized_keys line ``ssh-ed25519 AAAA... [comment]``; raises
        :class:`FormatError` (:class:`UnsupportedFormatError` for another SSH key type)."""
        key = _ssh_public_key(text, _SSH_ED25519)
        if not isinstance(key, ed25519.Ed25519PublicKey):
            raise FormatError("the ssh-ed25519 line does not hold an Ed25519 key")
        return cls(key)

    def public_bytes(self) -> bytes:
        """The 32-byte Ed25519 public key."""
        return self._public

    def wrap(self, file_key: bytes) -> list[Stanza]:
        """One ssh-ed25519 stanza; raises :class:`InvalidPublicKeyError` for a key whose
        Montgomery form is a low-order point."""
        share, body = dh_wrap(self._x25519, file_key, _SSH_ED25519_INFO, self._tweak)
        args = (_SSH_ED25519, b64encode(self._tag).decode(), b64encode(share).decode())
        return [Stanza(args, body)]

    def __str__(self) -> str:
        return f"{_SSH_ED25519} {base64.b64encode(self._wire).decode()}"


class SshEd25519Identity(KeyIdentity[SshEd25519Recipient]):
    """An OpenSSH Ed25519 private key as an age identity. Its repr shows only the recipient.

    Its X25519 secret is the first 32 bytes of SHA-512 of the Ed25519 seed (the scalar
    Ed25519 itself signs with), so its public key is the Ed25519 key's Montgomery form.
    """

    __slots__ = ("_private",)

    kind = _SSH_ED25519

    def __init__(self, private_key: Buffer | SecretKey | ed25519.Ed25519PrivateKey) -> None:
        if isinstance(private_key, ed25519.Ed25519PrivateKey):
            seed = private_key.private_bytes_raw()
        else:
            what = "an Ed25519 private key seed"
            seed = as_secret_key(private_key, 32, what=what).secret_bytes()
        key = ed25519.Ed25519PrivateKey.from_private_bytes(seed)
        scalar = hashlib.sha512(seed).digest()[:32]
        self._private = x25519.X25519PrivateKey.from_private_bytes(scalar)
        self._recipient = SshEd25519Recipient(key.public_key())

    @classmethod
    def generate(cls) -> SshEd25519Identity:
        return cls(random_bytes(32))

    @classmethod
    def from_openssh(cls, data: str | Buffer) -> SshEd25519Identity:
        """Load an unencrypted OpenSSH private key file (``-----BEGIN OPENSSH PRIVATE KEY``).

        Raises :class:`FormatError` for one that does not parse and
        :class:`UnsupportedFormatError` for a passphrase-protected or non-Ed25519 key.
        """
        key = _ssh_private_key(data)
        if not isinstance(key, ed25519.Ed25519PrivateKey):
            raise UnsupportedFormatError("the SSH private key is not an Ed25519 key")
        return cls(key)

    def _unwrap_one(self, stanza: Stanza) -> bytes | None:
        """The file key from an ssh-ed25519 stanza for this key, else ``None``.

        A stanza with another key's tag is skipped. Raises :class:`FormatError` for a
        malformed ssh-ed25519 stanza or a low-order share.
        """
        ours = self._recipient
        check_shape(stanza, 3)
        if stanza_arg(stanza, 1, _SSH_TAG_SIZE) != ours._tag:
            return None
        share = stanza_arg(stanza, 2, 32)
        return dh_unwrap(self._private, ours._x25519, stanza, share, _SSH_ED25519_INFO, ours._tweak)


def _oaep() -> padding.OAEP:
    """age's RSA-OAEP parameters: SHA-256, MGF1 with SHA-256, the ssh-rsa label."""
    from cryptography.hazmat.primitives.asymmetric import padding

    return padding.OAEP(
        mgf=padding.MGF1(hashes.SHA256()), algorithm=hashes.SHA256(), label=_SSH_RSA_LABEL
    )


class SshRsaRecipient(PublicKey):
    """An OpenSSH RSA public key as an age recipient (``ssh-rsa AAAA...``).

    The stanza is ``-> ssh-rsa <tag>``, the tag being the first 4 bytes of SHA-256 of the
    SSH wire key; its body is the file key under RSA-OAEP (SHA-256, MGF1-SHA-256, label
    ``age-encryption.org/v1/ssh-rsa``). Keys under 2048 bits raise
    :class:`InvalidKeySizeError`, as age and rage refuse them.
    """

    __slots__ = ("_key", "_tag")

    def __init__(self, public_key: rsa.RSAPublicKey) -> None:
        from cryptography.hazmat.primitives.asymmetric import rsa

        if not isinstance(public_key, rsa.RSAPublicKey):
            raise InvalidParameterError(
                f"an ssh-rsa recipient takes an RSA public key, not {type(public_key).__name__}"
            )
        if not _RSA_MIN_BITS <= public_key.key_size <= _RSA_MAX_BITS:
            raise InvalidKeySizeError(
                f"an ssh-rsa age key must have {_RSA_MIN_BITS} to {_RSA_MAX_BITS} bits, "
                f"this one has {public_key.key_size}"
            )
        self._key = public_key
        self._public = _ssh_wire(public_key)
        self._tag = _ssh_tag(self._public)

    @classmethod
    def parse(cls, text: str) -> SshRsaRecipient:
        """Parse an authorized_keys line ``ssh-rsa AAAA... [comment]``; raises
        :class:`FormatError` and :class:`InvalidKeySizeError` (under 2048 bits)."""
        from cryptography.hazmat.primitives.asymmetric import rsa

        key = _ssh_public_key(text, _SSH_RSA)
        if not isinstance(key, rsa.RSAPublicKey):
            raise FormatError("the ssh-rsa line does not hold an RSA key")
        return cls(key)

    @property
    def key_size(self) -> int:
        """The modulus size in bits."""
        return self._key.key_size

    def wrap(self, file_key: bytes) -> list[Stanza]:
        """One ssh-rsa stanza (the body is as long as the modulus)."""
        body = self._key.encrypt(file_key, _oaep())
        return [Stanza((_SSH_RSA, b64encode(self._tag).decode()), body)]

    def __str__(self) -> str:
        return f"{_SSH_RSA} {base64.b64encode(self._public).decode()}"

    def __repr__(self) -> str:
        return f"SshRsaRecipient({str(self)[:24]!r}..., {self.key_size} bits)"


class SshRsaIdentity(KeyIdentity[SshRsaRecipient]):
    """An OpenSSH RSA private key as an age identity. Its repr shows only the recipient.

    Keys under 2048 bits raise :class:`InvalidKeySizeError`.
    """

    __slots__ = ("_private",)

    kind = _SSH_RSA

    def __init__(self, private_key: rsa.RSAPrivateKey) -> None:
        from cryptography.hazmat.primitives.asymmetric import rsa

        if not isinstance(private_key, rsa.RSAPrivateKey):
            raise InvalidParameterError(
                f"an ssh-rsa identity takes an RSA private key, not {type(private_key).__name__}"
            )
        self._recipient = SshRsaRecipient(private_key.public_key())
        self._private = private_key

    @classmethod
    def generate(cls, key_size: int = 3072) -> SshRsaIdentity:
        """A fresh key (3072 bits, as ``ssh-keygen -t rsa`` makes, unless told otherwise)."""
        from cryptography.hazmat.primitives.asymmetric import rsa

        if not _RSA_MIN_BITS <= key_size <= _RSA_MAX_BITS:
            raise InvalidKeySizeError(
                f"an ssh-rsa age key must have {_RSA_MIN_BITS} to {_RSA_MAX_BITS} bits"
            )
        return cls(rsa.generate_private_key(public_exponent=65537, key_size=key_size))

    @classmethod
    def from_openssh(cls, data: str | Buffer) -> SshRsaIdentity:
        """Load an unencrypted RSA private key file: OpenSSH's own form
        (``-----BEGIN OPENSSH PRIVATE KEY``) or PEM (``BEGIN RSA PRIVATE KEY``, as
        ``ssh-keygen -m PEM`` writes, or PKCS#8 ``BEGIN PRIVATE KEY``).

        Raises :class:`FormatError` for one that does not parse,
        :class:`UnsupportedFormatError` for a passphrase-protected or non-RSA key and
        :class:`InvalidKeySizeError` for one under 2048 bits.
        """
        from cryptography.hazmat.primitives.asymmetric import rsa

        key = _ssh_private_key(data)
        if not isinstance(key, rsa.RSAPrivateKey):
            raise UnsupportedFormatError("the SSH private key is not an RSA key")
        return cls(key)

    def _unwrap_one(self, stanza: Stanza) -> bytes | None:
        """The file key from an ssh-rsa stanza for this key, else ``None``.

        A stanza with another key's tag is skipped. Raises :class:`FormatError` for a
        malformed ssh-rsa stanza and :class:`AuthenticationError` for one with this key's
        tag that does not decrypt (tampered or corrupted; age fails there too).
        """
        ours = self._recipient
        size = (ours.key_size + 7) // 8
        if len(stanza.args) != 2:
            raise FormatError("age ssh-rsa stanza must have 1 argument after its type")
        if stanza_arg(stanza, 1, _SSH_TAG_SIZE) != ours._tag:
            return None
        if len(stanza.body) != size:
            raise FormatError(f"age ssh-rsa stanza body must be {size} bytes for this key")
        try:
            return self._private.decrypt(stanza.body, _oaep())
        except ValueError:
            raise AuthenticationError(
                "the ssh-rsa stanza for this key does not decrypt: "
                "the file was tampered with or corrupted"
            ) from None


def _ssh_identity(text: str) -> SshEd25519Identity | SshRsaIdentity:
    """The identity in an SSH private key file; raises :class:`FormatError`
    (:class:`UnsupportedFormatError` for a locked key or a type age lacks)."""
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = _ssh_private_key(text)
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return SshEd25519Identity(key)
    if isinstance(key, rsa.RSAPrivateKey):
        return SshRsaIdentity(key)
    raise UnsupportedFormatError(
        "only ssh-ed25519 and ssh-rsa private keys are supported as age identities"
    )


def names_stanza(stanza: Stanza, recipient: object) -> bool:
    """Whether ``stanza`` is an ssh stanza for ``recipient`` by its key tag (the one kind
    of age stanza that names its key; a tag is 4 bytes, so at worst another key's
    stanza with an equal tag matches too)."""
    if isinstance(recipient, SshEd25519Recipient):
        kind = _SSH_ED25519
    elif isinstance(recipient, SshRsaRecipient):
        kind = _SSH_RSA
    else:
        return False
    tag = b64encode(recipient._tag).decode()
    return stanza.kind == kind and len(stanza.args) >= 2 and stanza.args[1] == tag
