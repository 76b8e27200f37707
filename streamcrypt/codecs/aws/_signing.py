"""The footer: ECDSA signatures over the message, and the verifying key in the context."""

from __future__ import annotations

import base64
import hashlib
import struct
from collections.abc import Mapping

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import (
    Prehashed,
    decode_dss_signature,
    encode_dss_signature,
)

from ...abc import Buffer, Lifecycle, as_bytes
from ...errors import FormatError
from ._header import PUBLIC_KEY_FIELD, AwsSuite

_CURVES: dict[str, tuple[ec.EllipticCurve, hashes.HashAlgorithm, int]] = {
    "P-256": (
        ec.SECP256R1(),
        hashes.SHA256(),
        0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551,
    ),
    "P-384": (
        ec.SECP384R1(),
        hashes.SHA384(),
        0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFC7634D81F4372DDF581A0DB248B0A77AECEC196ACCC52973,
    ),
}
_HASHLIB = {"P-256": "sha256", "P-384": "sha384"}
#: Longest DER ECDSA signature for each curve (r and s with a sign byte each).
_MAX_SIGNATURE = {"P-256": 72, "P-384": 104}


# ---------------------------------------------------------------------------------------
# Signatures
# ---------------------------------------------------------------------------------------


def _public_key_text(key: ec.EllipticCurvePublicKey) -> str:
    point = key.public_bytes(
        serialization.Encoding.X962, serialization.PublicFormat.CompressedPoint
    )
    return base64.b64encode(point).decode()


def _verifying_key(suite: AwsSuite, context: Mapping[str, str]) -> ec.EllipticCurvePublicKey:
    assert suite.curve is not None
    text = context.get(PUBLIC_KEY_FIELD)
    if text is None:
        raise FormatError(f"a signed message must carry {PUBLIC_KEY_FIELD!r} in its context")
    try:
        point = base64.b64decode(text, validate=True)
        return ec.EllipticCurvePublicKey.from_encoded_point(_CURVES[suite.curve][0], point)
    except ValueError:
        raise FormatError(
            f"the message's {PUBLIC_KEY_FIELD!r} is not a {suite.curve} point"
        ) from None


def _sign(key: ec.EllipticCurvePrivateKey, suite: AwsSuite, digest: bytes) -> bytes:
    """A DER signature of the length the AWS SDKs write (negating s when it is longer)."""
    assert suite.curve is not None
    _, hash_alg, order = _CURVES[suite.curve]
    algorithm = ec.ECDSA(Prehashed(hash_alg))
    while True:
        signature = key.sign(digest, algorithm)
        if len(signature) != suite.signature_size:
            r, s = decode_dss_signature(signature)
            signature = encode_dss_signature(r, order - s)
        if len(signature) == suite.signature_size:
            return signature


class _Signer(Lifecycle):
    """Passes the message through, hashing it; ``finalize`` appends the signature footer."""

    __slots__ = ("_hash", "_key", "_suite")

    def __init__(self, key: ec.EllipticCurvePrivateKey, suite: AwsSuite) -> None:
        self._init_lifecycle()
        assert suite.curve is not None
        self._key = key
        self._suite = suite
        self._hash = hashlib.new(_HASHLIB[suite.curve])

    def update(self, data: Buffer, /) -> bytes:
        self._check()
        self._hash.update(data)
        return as_bytes(data, "data")

    def finalize(self) -> bytes:
        self._check()
        signature = _sign(self._key, self._suite, self._hash.digest())
        self._finish()
        return struct.pack(">H", len(signature)) + signature
