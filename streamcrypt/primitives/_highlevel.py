"""NimCypher's high-level conveniences: sealing with random nonces, challenge MACs.

``seal_box`` / ``open_box`` are NimCypher's ``gcmSeal``/``gcmOpen`` (AES-256-GCM) and
``seal``/``unseal`` (XChaCha20-Poly1305): a fresh random nonce per message, carried in
front of the ciphertext as ``nonce || ciphertext || tag``. XChaCha20-Poly1305's 192-bit
nonces may be drawn at random without limit in practice; AES-256-GCM's 96-bit nonces allow
about 2^32 messages per key before a repeat becomes a real risk.

``challenge_mac`` is NimCypher's ``computeChallengeMac``: BLAKE2b keyed with a 32-byte
shared secret, 16 bytes long, over a challenge, for mutual proof of a shared X25519 secret.
"""

from __future__ import annotations

import hashlib

from ..abc import Buffer
from ..errors import AuthenticationError, InvalidParameterError
from ..keys import SecretKey, constant_time_equal, key_bytes, random_bytes
from ._aead import aead_suite

#: Bytes of a challenge MAC.
CHALLENGE_MAC_SIZE = 16
_SEAL_SUITES = ("xchacha20-poly1305", "aes-256-gcm")


def _suite_name(suite: str) -> str:
    if suite not in _SEAL_SUITES:
        raise InvalidParameterError(
            f"seal_box takes suite {' or '.join(map(repr, _SEAL_SUITES))}, got {suite!r}"
        )
    return suite


def seal_box(
    key: Buffer | SecretKey,
    plaintext: Buffer,
    aad: Buffer = b"",
    *,
    suite: str = "xchacha20-poly1305",
) -> bytes:
    """Encrypt under a fresh random nonce: ``nonce || ciphertext || tag``.

    ``suite`` is ``"xchacha20-poly1305"`` (24-byte nonce, the default) or
    ``"aes-256-gcm"`` (12-byte nonce). Raises :class:`InvalidKeySizeError` and
    :class:`InvalidParameterError`.
    """
    aead = aead_suite(_suite_name(suite))(key)
    nonce = random_bytes(aead.nonce_size)
    return nonce + aead.seal(nonce, plaintext, aad)


def open_box(
    key: Buffer | SecretKey,
    box: Buffer,
    aad: Buffer = b"",
    *,
    suite: str = "xchacha20-poly1305",
) -> bytes:
    """Open what :func:`seal_box` made; raises :class:`AuthenticationError` (wrong key,
    suite or aad, tampering, or a box too short to hold nonce and tag)."""
    aead = aead_suite(_suite_name(suite))(key)
    view = memoryview(box)
    if len(view) < aead.nonce_size + aead.tag_size:
        raise AuthenticationError(
            f"{aead.name} box of {len(view)} bytes is shorter than its nonce and tag: truncated"
        )
    return aead.open(view[: aead.nonce_size], view[aead.nonce_size :], aad)


def challenge_mac(secret: Buffer | SecretKey, challenge: Buffer) -> bytes:
    """The 16-byte BLAKE2b MAC of ``challenge`` under a 32-byte shared ``secret``.

    Raises :class:`InvalidKeySizeError`.
    """
    return hashlib.blake2b(
        bytes(challenge),
        key=key_bytes(secret, "a challenge MAC secret", 32),
        digest_size=CHALLENGE_MAC_SIZE,
    ).digest()


def verify_challenge_mac(secret: Buffer | SecretKey, challenge: Buffer, mac: Buffer) -> None:
    """Check a peer's challenge MAC in constant time; raises :class:`AuthenticationError`."""
    if not constant_time_equal(challenge_mac(secret, challenge), mac):
        raise AuthenticationError(
            "challenge MAC did not verify: the peer does not hold the same shared secret"
        )
