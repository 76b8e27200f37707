"""The AWS Encryption SDK message format (v2, and v1 for reading), byte for byte.

Theory of operation
-------------------
A message is ``header || body || footer``: a random data key wrapped once per keyring,
derived (committing suites: HKDF-SHA512 with a key commitment checked before anything
else) into the AES-GCM key of the header tag and of every frame; frames are independent
(:class:`AwsFrameCodec` on the shared segmented core, random access by :func:`layout`); a
signed suite ends with an ECDSA footer over every byte before it, and nothing of a signed
message is released before that signature verified unless ``allow_unverified=True``.
The wire format, the suites, what is released when and the limits: docs/FORMATS.md
("The AWS Encryption SDK message format").

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
