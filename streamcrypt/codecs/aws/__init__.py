"""The AWS Encryption SDK message format (v2, and v1 for reading), byte for byte.

Theory of operation
-------------------
A message is ``header || body || footer``.

**Header** (big-endian). v2: version ``02``, suite id (2), message id (32), the encryption
context (``length (2) || count (2) || (key_len, key, value_len, value)*``, sorted by key,
nothing at all when empty), the encrypted data keys (``count (2)`` and per key: provider
id, provider info, ciphertext, each with a 2-byte length), content type (``01``
non-framed, ``02`` framed), frame length (4), and the 32-byte key commitment; then the
header authentication: an AES-GCM tag over the header with an all-zero IV and no
plaintext. v1: version ``01``, type ``80``, suite id, message id (16), context, data
keys, content type, four zero bytes, IV length (12), frame length; its authentication is
the (zero) IV and the tag.

**Keys.** A random data key is wrapped once per keyring (raw AES: AES-GCM under the
wrapping key with the serialized encryption context as AAD, the key name, tag length,
IV length and IV in the provider info; raw RSA: RSA-OAEP or PKCS#1 v1.5, the key name as
provider info). The committing suites 0x0478 / 0x0578 derive ``HKDF-SHA512(salt =
message id, data key)`` with info ``suite id || "DERIVEKEY"`` (the AES-256-GCM key) and
``"COMMITKEY"`` (the 32-byte commitment, checked in constant time before anything else).
Legacy suites use the data key itself or ``HKDF-SHA256/384(zero salt, data key, suite id
|| message id)`` and commit to nothing; they are read only with ``allow_legacy=True``.

**Body.** Framed: regular frames ``seq (4) || IV (12) || ciphertext (frame length) ||
tag (16)`` from seq 1, then one final frame ``FFFFFFFF || seq || IV || length (4) ||
ciphertext || tag`` holding 0..frame-length bytes. Each frame is AES-GCM under the derived
key with AAD ``message id || "AWSKMSEncryptionClient Frame" (or "... Final Frame") ||
seq (4) || content length (8)``; the IV is the sequence number, zero-padded. Frames are
independent, so the engine opens them in parallel (:class:`AwsFrameCodec` on the shared
segmented core) and a framed body can be read by random access (:func:`layout`).
Non-framed: ``IV || length (8) || ciphertext || tag``, one AES-GCM call ("...Single
Block"), so nothing is released before the whole body verified (and it is held in memory,
up to ``max_body_size``).

**Footer** (suites 0x0578, 0x0214, 0x0346, 0x0378): ``length (2) || DER ECDSA signature``
over every byte before it, with P-384/SHA-384 (P-256/SHA-256 for 0x0214); the verifying
key travels in the encryption context (``aws-crypto-public-key``, a compressed point).

**What is released when.** An unsigned message's frames are released as their tags
verify; the final frame only at ``finalize()``, after checking that nothing follows the
message, so a truncated message raises :class:`TruncatedStreamError` before the last frame
comes out. A signed message's frames are authentic under the data key, but any holder of
a wrapping key can forge them: nothing is released before the footer's signature verified
(the plaintext is held, up to ``max_buffered``; :class:`InvalidSignatureError` releases
nothing). ``allow_unverified=True`` opts in, by name, to frames released as their tags
verify. Signed suites hash every byte in order on the thread that feeds the decryptor
(SHA-384 cannot be split across cores).

**Random access** (:func:`layout`) to a signed message reads it once, verifies the
signature and keeps a 16-byte digest of every frame (GMAC under a random key of the
process, at most :data:`MAX_SIGNED_FRAMES` frames: 64 MiB); every later read of a
frame checks its bytes against that digest before opening it, so a frame changed on disk
after the signature verified raises :class:`InvalidSignatureError`, never its new bytes.

Limits (typed errors, checked as fields are read): ``max_encrypted_data_keys`` (default
64; :class:`LimitExceededError`), ``max_header_size`` (1 MiB), ``max_frame_length``
(64 MiB for reading; the format allows 2**32 - 1), ``max_body_size`` for non-framed
bodies (64 MiB), and the encryption context checks (``encryption_context=`` on decrypt
must be a subset of the message's, else :class:`AuthenticationError`).

Where each part lives: ``_header`` (suites, the encryption context, the header fields,
key derivation), ``_keyrings`` (raw AES and RSA keyrings, opening a header),
``_frames`` (the frame rule), ``_signing`` (the footer), ``_body`` (the encryptor and
decryptor), ``_layout`` (random access), ``_descriptor`` (``FORMAT``). Every public
name is here.
"""

from __future__ import annotations

from ._body import AwsDecryptor, AwsEncryptor
from ._descriptor import FORMAT
from ._frames import AwsFrameCodec
from ._header import (
    DEFAULT_FRAME_LENGTH,
    DEFAULT_MAX_BODY_SIZE,
    DEFAULT_MAX_ENCRYPTED_DATA_KEYS,
    DEFAULT_MAX_FRAME_LENGTH,
    DEFAULT_MAX_HEADER_SIZE,
    DEFAULT_SUITE,
    PUBLIC_KEY_FIELD,
    SUITES,
    AwsHeader,
    AwsSuite,
    EncryptedDataKey,
    header_size,
    is_aws,
    parse_header,
    serialize_encryption_context,
)
from ._keyrings import Keyring, KeyringLike, RawAesKeyring, RawRsaKeyring, RsaPadding
from ._layout import MAX_SIGNED_FRAMES, AwsLayout, layout

__all__ = [
    "DEFAULT_FRAME_LENGTH",
    "DEFAULT_MAX_BODY_SIZE",
    "DEFAULT_MAX_ENCRYPTED_DATA_KEYS",
    "DEFAULT_MAX_FRAME_LENGTH",
    "DEFAULT_MAX_HEADER_SIZE",
    "DEFAULT_SUITE",
    "FORMAT",
    "MAX_SIGNED_FRAMES",
    "PUBLIC_KEY_FIELD",
    "SUITES",
    "AwsDecryptor",
    "AwsEncryptor",
    "AwsFrameCodec",
    "AwsHeader",
    "AwsLayout",
    "AwsSuite",
    "EncryptedDataKey",
    "Keyring",
    "KeyringLike",
    "RawAesKeyring",
    "RawRsaKeyring",
    "RsaPadding",
    "header_size",
    "is_aws",
    "layout",
    "parse_header",
    "serialize_encryption_context",
]
