"""age ssh-ed25519 recipients and identities: interop with pyrage both ways, tags,
typed failures, OpenSSH key files, and the CLI's -r "ssh-ed25519 ..." / -i id_ed25519."""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pyrage
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa
from support import REPO

from streamcrypt.codecs import age
from streamcrypt.errors import FormatError, UnknownKeyError, UnsupportedFormatError

MESSAGE = b"ssh keys as age recipients\n" * 5000


def _pair() -> tuple[str, bytes]:
    """An Ed25519 key pair in OpenSSH form: the public line and the private key file."""
    key = ed25519.Ed25519PrivateKey.generate()
    public = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    )
    return public.decode() + " user@host", private


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


def test_we_encrypt_pyrage_decrypts() -> None:
    public, private = _pair()
    ciphertext = age.encrypt_bytes(MESSAGE, recipients=[public])
    assert pyrage.decrypt(ciphertext, [pyrage.ssh.Identity.from_buffer(private)]) == MESSAGE


def test_pyrage_encrypts_we_decrypt() -> None:
    public, private = _pair()
    ciphertext = pyrage.encrypt(MESSAGE, [pyrage.ssh.Recipient.from_str(public)])
    identity = age.SshEd25519Identity.from_openssh(private)
    assert age.decrypt_bytes(ciphertext, identities=[identity]) == MESSAGE
    # the key file's text serves as an identity string too
    assert age.decrypt_bytes(ciphertext, identities=[private.decode()]) == MESSAGE
    assert age.parse_identities(private.decode())[0].recipient == age.parse_recipient(public)


def test_round_trip_with_generated_identity_and_mixed_recipients() -> None:
    ssh = age.SshEd25519Identity.generate()
    x = age.X25519Identity.generate()
    ciphertext = age.encrypt_bytes(MESSAGE, recipients=[ssh.recipient, x.recipient])
    assert age.decrypt_bytes(ciphertext, identities=[ssh]) == MESSAGE
    assert age.decrypt_bytes(ciphertext, identities=[x]) == MESSAGE


def test_wrong_key_is_unknown_key_error() -> None:
    public, _ = _pair()
    _, other = _pair()
    ciphertext = age.encrypt_bytes(MESSAGE, recipients=[public])
    with pytest.raises(UnknownKeyError):
        age.decrypt_bytes(ciphertext, identities=[age.SshEd25519Identity.from_openssh(other)])


def test_stanza_with_another_tag_is_skipped() -> None:
    identity = age.SshEd25519Identity.generate()
    [stanza] = identity.recipient.wrap(bytes(range(16)))
    tag = bytearray(base64.b64decode(stanza.args[1] + "=="))
    tag[0] ^= 1
    other_tag = base64.b64encode(bytes(tag)).decode().rstrip("=")
    retagged = age.Stanza((stanza.args[0], other_tag, stanza.args[2]), stanza.body)
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
    rsa_line = (
        rsa.generate_private_key(public_exponent=65537, key_size=2048)
        .public_key()
        .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        .decode()
    )
    with pytest.raises(UnsupportedFormatError):
        age.parse_recipient(rsa_line)
    with pytest.raises(FormatError):
        age.parse_recipient("ssh-ed25519 AAAAnotakey")
    with pytest.raises(FormatError):
        age.SshEd25519Identity.from_openssh(b"-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n")


def test_passphrase_protected_key_is_unsupported() -> None:
    key = ed25519.Ed25519PrivateKey.generate()
    locked = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.BestAvailableEncryption(b"pw"),
    )
    with pytest.raises(UnsupportedFormatError):
        age.SshEd25519Identity.from_openssh(locked)


def _sc(*args: str | Path, cwd: Path, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "streamcrypt", *map(str, args)],
        input=stdin,
        capture_output=True,
        cwd=cwd,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


def test_cli_ssh_recipient_and_identity_file(tmp_path: Path) -> None:
    public, private = _pair()
    key_file = tmp_path / "id_ed25519"
    key_file.write_bytes(private)
    enc = _sc("-r", public, "-o", "out.age", cwd=tmp_path, stdin=MESSAGE)
    assert enc.returncode == 0, enc.stderr
    ciphertext = (tmp_path / "out.age").read_bytes()
    assert pyrage.decrypt(ciphertext, [pyrage.ssh.Identity.from_buffer(private)]) == MESSAGE
    dec = _sc("-d", "-i", key_file, "out.age", cwd=tmp_path)
    assert dec.returncode == 0, dec.stderr
    assert dec.stdout == MESSAGE
