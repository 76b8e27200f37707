"""Regression tests for what the second review found (each fails without its fix)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from support import REPO

from streamcrypt.codecs.noise import NoiseHandshake, generate_keypair
from streamcrypt.errors import HandshakeError, InvalidPublicKeyError
from streamcrypt.primitives import Ed25519PublicKey
from streamcrypt.transports import create_temporary, discard_temporary, write_atomic


def _mode(fd: int) -> int:
    return stat.S_IMODE(os.fstat(fd).st_mode)


def test_temporaries_are_never_wider_than_their_final_mode(tmp_path: Path) -> None:
    """A temporary that will hold a key (or replace a 0600 file) is 0600 from creation:
    narrowing it after writing would leave an early open() able to read the secret."""
    secret = tmp_path / "key"
    secret.write_text("old")
    secret.chmod(0o600)
    fd, tmp = create_temporary(str(secret))
    assert _mode(fd) == 0o600
    discard_temporary(fd, tmp)
    fd, tmp = create_temporary(str(tmp_path / "new.key"), mode=0o600)
    assert _mode(fd) == 0o600
    discard_temporary(fd, tmp)
    public = tmp_path / "public"
    public.write_text("old")
    public.chmod(0o644)
    fd, tmp = create_temporary(str(public))  # widened while still empty: harmless
    assert _mode(fd) == 0o644
    discard_temporary(fd, tmp)


def test_a_failed_commit_leaves_no_temporary(tmp_path: Path) -> None:
    """commit_temporary removes the temporary when the rename fails (here: the
    destination is a directory), so write_atomic and every caller leave nothing behind."""
    (tmp_path / "dest").mkdir()
    (tmp_path / "dest" / "inside").write_text("keep")
    with pytest.raises(OSError):
        write_atomic(str(tmp_path / "dest"), b"new")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dest"]
    assert (tmp_path / "dest" / "inside").read_text() == "keep"


def test_small_order_ed25519_keys_are_refused() -> None:
    """Under the identity point, R = identity and S = 0 verify for every message in
    OpenSSL: such keys must not be accepted at all."""
    identity = bytes([1]) + bytes(31)
    with pytest.raises(InvalidPublicKeyError, match="small order"):
        Ed25519PublicKey(identity)
    with pytest.raises(InvalidPublicKeyError):
        Ed25519PublicKey(bytes(32))  # another small-order point


def test_noise_failed_read_leaves_no_unproven_remote_static() -> None:
    responder_key, responder_public = generate_keypair()
    initiator_key, _ = generate_keypair()
    name = "Noise_IK_25519_ChaChaPoly_SHA256"
    initiator = NoiseHandshake(name, True, s=initiator_key, rs=responder_public)
    message = bytearray(initiator.write_message(b"payload"))
    message[-1] ^= 1  # the payload fails after the static key decrypted
    responder = NoiseHandshake(name, False, s=responder_key)
    with pytest.raises(HandshakeError):
        responder.read_message(bytes(message))
    assert responder.remote_static is None


def test_cli_never_echoes_a_recipient_that_does_not_parse(tmp_path: Path) -> None:
    secret = "AGE-SECRET-KEY-1QQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQ"
    (tmp_path / "in").write_bytes(b"data")
    out = subprocess.run(
        [sys.executable, "-m", "streamcrypt", "encrypt", "--format", "age", "-r", secret, "in"],
        capture_output=True,
        cwd=tmp_path,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert out.returncode != 0
    assert secret[:20].encode() not in out.stderr and b"QQQQQQ" not in out.stderr
