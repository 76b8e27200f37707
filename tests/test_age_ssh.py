"""age SSH recipients and identities (ssh-ed25519 and ssh-rsa): interop with pyrage both
ways, tags, typed failures, OpenSSH and PEM key files, and the CLI's -r "ssh-... ..." /
-R / -i id_ed25519 / -i id_rsa."""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pyrage
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from support import REPO, age_decrypt, age_encrypt

from streamcrypt.codecs import age
from streamcrypt.codecs.age._header import _encode_stanza
from streamcrypt.errors import (
    AuthenticationError,
    FormatError,
    InvalidKeySizeError,
    UnknownKeyError,
    UnsupportedFormatError,
)

MESSAGE = b"ssh keys as age recipients\n" * 5000
KINDS = ["ed25519", "rsa"]
# RSA key generation is slow: a few keys per module, reused.
_RSA_KEYS = [rsa.generate_private_key(public_exponent=65537, key_size=2048) for _ in range(2)]

PrivateKey = ed25519.Ed25519PrivateKey | rsa.RSAPrivateKey


def _key(kind: str, n: int = 0) -> PrivateKey:
    return ed25519.Ed25519PrivateKey.generate() if kind == "ed25519" else _RSA_KEYS[n]


def _public_line(key: PrivateKey) -> str:
    line = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    return line.decode() + " user@host"


def _pair(
    kind: str = "ed25519",
    n: int = 0,
    private_format: serialization.PrivateFormat = serialization.PrivateFormat.OpenSSH,
) -> tuple[str, bytes]:
    """A key pair in OpenSSH form: the public line and the private key file."""
    key = _key(kind, n)
    return _public_line(key), _private_file(key, private_format)


def _private_file(
    key: PrivateKey | ec.EllipticCurvePrivateKey,
    private_format: serialization.PrivateFormat = serialization.PrivateFormat.OpenSSH,
    password: bytes | None = None,
) -> bytes:
    """The private key file's bytes (PEM armor), locked with ``password`` if given."""
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password)
        if password
        else serialization.NoEncryption()
    )
    return key.private_bytes(serialization.Encoding.PEM, private_format, encryption)


def test_stanza_shape_and_tag() -> None:
    public, _ = _pair()
    recipient = age.parse_recipient(public)
    assert isinstance(recipient, age.SshEd25519Recipient)
    wire = base64.b64decode(public.split()[1])
    assert str(recipient) == " ".join(public.split()[:2])
    [stanza] = recipient.wrap(bytes(16))
    assert stanza.kind == "ssh-ed25519" and len(stanza.args) == 3
    tag = base64.b64decode(stanza.args[1] + "==")
    assert tag == hashlib.sha256(wire).digest()[:4]
    assert len(base64.b64decode(stanza.args[2] + "=")) == 32
    assert len(stanza.body) == 32


@pytest.mark.parametrize("kind", KINDS)
def test_we_encrypt_pyrage_decrypts(kind: str) -> None:
    public, private = _pair(kind)
    ciphertext = age_encrypt(MESSAGE, recipients=[public])
    assert pyrage.decrypt(ciphertext, [pyrage.ssh.Identity.from_buffer(private)]) == MESSAGE


@pytest.mark.parametrize("kind", KINDS)
def test_pyrage_encrypts_we_decrypt(kind: str) -> None:
    public, private = _pair(kind)
    ciphertext = pyrage.encrypt(MESSAGE, [pyrage.ssh.Recipient.from_str(public)])
    cls = age.SshEd25519Identity if kind == "ed25519" else age.SshRsaIdentity
    identity = cls.from_openssh(private)
    assert age_decrypt(ciphertext, identities=[identity]) == MESSAGE
    # the key file's text serves as an identity string too
    assert age_decrypt(ciphertext, identities=[private.decode()]) == MESSAGE
    assert age.parse_identities(private.decode())[0].recipient == age.parse_recipient(public)


def test_round_trip_with_generated_identity_and_mixed_recipients() -> None:
    ssh = age.SshEd25519Identity.generate()
    x = age.X25519Identity.generate()
    ciphertext = age_encrypt(MESSAGE, recipients=[ssh.recipient, x.recipient])
    assert age_decrypt(ciphertext, identities=[ssh]) == MESSAGE
    assert age_decrypt(ciphertext, identities=[x]) == MESSAGE


@pytest.mark.parametrize("kind", KINDS)
def test_wrong_key_is_unknown_key_error(kind: str) -> None:
    public, _ = _pair(kind, 0)
    _, other = _pair(kind, 1)
    ciphertext = age_encrypt(MESSAGE, recipients=[public])
    with pytest.raises(UnknownKeyError):
        age_decrypt(ciphertext, identities=[age.parse_identity(other.decode())])


@pytest.mark.parametrize("kind", KINDS)
def test_stanza_with_another_tag_is_skipped(kind: str) -> None:
    identity = age.parse_identity(_pair(kind)[1].decode())
    [stanza] = identity.recipient.wrap(bytes(range(16)))
    tag = bytearray(base64.b64decode(stanza.args[1] + "=="))
    tag[0] ^= 1
    other_tag = base64.b64encode(bytes(tag)).decode().rstrip("=")
    retagged = age.Stanza((stanza.args[0], other_tag, *stanza.args[2:]), stanza.body)
    assert identity.unwrap([retagged]) is None
    assert identity.unwrap([retagged, stanza]) == bytes(range(16))


def test_malformed_stanza_is_format_error() -> None:
    identity = age.SshEd25519Identity.generate()
    [stanza] = identity.recipient.wrap(bytes(16))
    with pytest.raises(FormatError):
        identity.unwrap([age.Stanza(stanza.args[:2], stanza.body)])
    with pytest.raises(FormatError):
        identity.unwrap([age.Stanza((stanza.args[0], "AAAA", stanza.args[2]), stanza.body)])


def test_secrets_stay_out_of_reprs() -> None:
    key = ed25519.Ed25519PrivateKey.generate()
    identity = age.SshEd25519Identity(key)
    seed = key.private_bytes_raw()
    for text in (repr(identity), str(identity)):
        assert "secret hidden" in text
        assert base64.b64encode(seed).decode()[:20] not in text
        assert seed.hex() not in text


def test_bad_keys_are_typed_errors() -> None:
    ecdsa_line = _public_line(ec.generate_private_key(ec.SECP256R1()))
    with pytest.raises(UnsupportedFormatError):
        age.parse_recipient(ecdsa_line)
    with pytest.raises(FormatError):
        age.parse_recipient("ssh-ed25519 AAAAnotakey")
    with pytest.raises(FormatError):
        age.SshEd25519Identity.from_openssh(b"-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n")


@pytest.mark.parametrize(
    ("kind", "private_format"),
    [
        ("ed25519", serialization.PrivateFormat.OpenSSH),
        ("rsa", serialization.PrivateFormat.OpenSSH),
        ("rsa", serialization.PrivateFormat.TraditionalOpenSSL),
        ("rsa", serialization.PrivateFormat.PKCS8),
    ],
)
def test_passphrase_protected_key_is_unsupported(
    kind: str, private_format: serialization.PrivateFormat
) -> None:
    locked = _private_file(_key(kind), private_format, b"pw")
    with pytest.raises(UnsupportedFormatError, match="passphrase"):
        age.parse_identity(locked.decode())


def _sc(*args: str | Path, cwd: Path, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "streamcrypt", *map(str, args)],
        input=stdin,
        capture_output=True,
        cwd=cwd,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


@pytest.mark.parametrize("kind", KINDS)
def test_cli_ssh_recipient_and_identity_file(tmp_path: Path, kind: str) -> None:
    public, private = _pair(kind)
    key_file = tmp_path / f"id_{kind}"
    key_file.write_bytes(private)
    enc = _sc("-r", public, "-o", "out.age", cwd=tmp_path, stdin=MESSAGE)
    assert enc.returncode == 0, enc.stderr
    ciphertext = (tmp_path / "out.age").read_bytes()
    assert pyrage.decrypt(ciphertext, [pyrage.ssh.Identity.from_buffer(private)]) == MESSAGE
    dec = _sc("-d", "-i", key_file, "out.age", cwd=tmp_path)
    assert dec.returncode == 0, dec.stderr
    assert dec.stdout == MESSAGE


# ------------------------------------------------------------------------------ ssh-rsa


def test_rsa_stanza_shape_tag_and_oaep_parameters() -> None:
    public, _ = _pair("rsa")
    recipient = age.parse_recipient(public)
    assert isinstance(recipient, age.SshRsaRecipient)
    assert str(recipient) == " ".join(public.split()[:2])
    assert recipient.key_size == 2048
    [stanza] = recipient.wrap(bytes(range(16)))
    assert stanza.args[0] == "ssh-rsa" and len(stanza.args) == 2
    wire = base64.b64decode(public.split()[1])
    assert base64.b64decode(stanza.args[1] + "==") == hashlib.sha256(wire).digest()[:4]
    assert len(stanza.body) == 256
    # the body is RSA-OAEP with SHA-256, MGF1-SHA-256 and age's label, as age specifies
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding

    def oaep(label: bytes) -> padding.OAEP:
        return padding.OAEP(padding.MGF1(hashes.SHA256()), hashes.SHA256(), label)

    private = _RSA_KEYS[0]
    assert private.decrypt(stanza.body, oaep(b"age-encryption.org/v1/ssh-rsa")) == bytes(range(16))
    with pytest.raises(ValueError):
        private.decrypt(stanza.body, oaep(b"age-encryption.org/v1/ssh-ed25519"))


@pytest.mark.parametrize(
    "private_format",
    [serialization.PrivateFormat.TraditionalOpenSSL, serialization.PrivateFormat.PKCS8],
    ids=["pkcs1", "pkcs8"],
)
def test_rsa_pem_private_keys_read_as_age_does(
    private_format: serialization.PrivateFormat,
) -> None:
    public, private = _pair("rsa", private_format=private_format)
    ciphertext = pyrage.encrypt(MESSAGE, [pyrage.ssh.Recipient.from_str(public)])
    [identity] = age.parse_identities(private.decode())
    assert isinstance(identity, age.SshRsaIdentity)
    assert identity.recipient == age.parse_recipient(public)
    assert age_decrypt(ciphertext, identities=[identity]) == MESSAGE
    if private_format is serialization.PrivateFormat.TraditionalOpenSSL:  # rage reads PKCS#1
        ours = age_encrypt(MESSAGE, recipients=[identity.recipient])
        assert pyrage.decrypt(ours, [pyrage.ssh.Identity.from_buffer(private)]) == MESSAGE


def test_rsa_foreign_stanzas_are_skipped_both_ways() -> None:
    rsa_id = age.SshRsaIdentity(_RSA_KEYS[0])
    other_rsa = age.SshRsaIdentity(_RSA_KEYS[1])
    ed = age.SshEd25519Identity.generate()
    x = age.X25519Identity.generate()
    recipients = [x.recipient, ed.recipient, other_rsa.recipient, rsa_id.recipient]
    ciphertext = age_encrypt(MESSAGE, recipients=recipients)
    header = age.parse_header(ciphertext)
    assert header is not None
    assert [s.kind for s in header.stanzas] == ["X25519", "ssh-ed25519", "ssh-rsa", "ssh-rsa"]
    for identity in (rsa_id, other_rsa, ed, x):
        assert age_decrypt(ciphertext, identities=[identity]) == MESSAGE
    # and pyrage finds its stanza among ours
    private = _private_file(_RSA_KEYS[0])
    assert pyrage.decrypt(ciphertext, [pyrage.ssh.Identity.from_buffer(private)]) == MESSAGE


def _retamper(ciphertext: bytes, edit: Callable[[age.Stanza], age.Stanza]) -> bytes:
    """The age file with its ssh-rsa stanza replaced by ``edit(stanza)`` (MAC unchanged)."""
    header = age.parse_header(ciphertext)
    assert header is not None
    [stanza] = header.stanzas
    return ciphertext.replace(_encode_stanza(stanza), _encode_stanza(edit(stanza)))


def test_rsa_tampered_stanza_is_authentication_error_and_leaks_nothing() -> None:
    identity = age.SshRsaIdentity(_RSA_KEYS[0])
    ciphertext = age_encrypt(MESSAGE, recipients=[identity.recipient])

    def flip(stanza: age.Stanza) -> age.Stanza:
        body = bytearray(stanza.body)
        body[100] ^= 0x01
        return age.Stanza(stanza.args, bytes(body))

    tampered = _retamper(ciphertext, flip)
    assert tampered != ciphertext
    with pytest.raises(AuthenticationError) as excinfo:
        age_decrypt(tampered, identities=[identity])
    message = str(excinfo.value)
    numbers = _RSA_KEYS[0].private_numbers()
    for secret in (numbers.d, numbers.p, numbers.q):
        assert str(secret)[:12] not in message and f"{secret:x}"[:12] not in message
    assert "secret hidden" in repr(identity) and str(numbers.d)[:12] not in repr(identity)
    # a stanza re-encrypted to the key with another file key fails the header MAC
    forged = _retamper(ciphertext, lambda _: identity.recipient.wrap(bytes(16))[0])
    with pytest.raises(AuthenticationError):
        age_decrypt(forged, identities=[identity])


def test_rsa_malformed_stanzas_are_format_errors() -> None:
    identity = age.SshRsaIdentity(_RSA_KEYS[0])
    [stanza] = identity.recipient.wrap(bytes(16))
    for bad in (
        age.Stanza(("ssh-rsa",), stanza.body),  # no tag
        age.Stanza((*stanza.args, "extra"), stanza.body),  # an argument too many
        age.Stanza(("ssh-rsa", "AAAA"), stanza.body),  # a tag of 3 bytes
        age.Stanza(stanza.args, stanza.body[:-1]),  # a body shorter than the modulus
    ):
        with pytest.raises(FormatError):
            identity.unwrap([bad])


def test_rsa_keys_under_2048_bits_are_refused() -> None:
    small = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    line = _public_line(small)
    with pytest.raises(InvalidKeySizeError, match="2048"):
        age.parse_recipient(line)
    with pytest.raises(InvalidKeySizeError):
        age.SshRsaIdentity(small)
    with pytest.raises(InvalidKeySizeError):
        age.parse_identity(_private_file(small).decode())
    with pytest.raises(InvalidKeySizeError):
        age.SshRsaIdentity.generate(1024)


def test_rsa_bad_key_files_are_typed_errors() -> None:
    ecdsa = _private_file(ec.generate_private_key(ec.SECP256R1()))
    with pytest.raises(UnsupportedFormatError):
        age.parse_identity(ecdsa.decode())
    with pytest.raises(UnsupportedFormatError):
        age.SshRsaIdentity.from_openssh(_pair("ed25519")[1])
    with pytest.raises(FormatError):
        age.parse_identity("-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n")
    with pytest.raises(FormatError):
        age.parse_recipient("ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAAAgQ")


def test_cli_rsa_recipients_file_keygen_y_and_small_key(tmp_path: Path) -> None:
    public, private = _pair("rsa", private_format=serialization.PrivateFormat.TraditionalOpenSSL)
    (tmp_path / "id_rsa").write_bytes(private)
    (tmp_path / "recipients.txt").write_text(f"# team\n{public}\n")
    enc = _sc("-R", "recipients.txt", "-a", "-o", "out.age", cwd=tmp_path, stdin=MESSAGE)
    assert enc.returncode == 0, enc.stderr
    armored = (tmp_path / "out.age").read_bytes()
    assert pyrage.decrypt(armored, [pyrage.ssh.Identity.from_buffer(private)]) == MESSAGE
    derived = _sc("keygen", "-y", "id_rsa", cwd=tmp_path)
    assert derived.stdout.decode().strip() == " ".join(public.split()[:2])
    small = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    refused = _sc("-r", _public_line(small), cwd=tmp_path, stdin=MESSAGE)
    assert refused.returncode == 3 and refused.stdout == b""
    assert b"2048" in refused.stderr and b"Traceback" not in refused.stderr
