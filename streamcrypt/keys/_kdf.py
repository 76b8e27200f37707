"""HKDF (RFC 5869) over ``cryptography``'s implementation, with typed errors.

The hash objects are made once per process and each call is one native call (HKDF in
one, HKDF-Extract through the standard library's one-shot HMAC): a native container
message derives its keys per call, where object set-up was most of the cost.
"""

from __future__ import annotations

import hmac
from typing import Literal

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF, HKDFExpand

from ..abc import Buffer
from ..errors import InvalidParameterError
from ._secret import key_bytes

#: The hashes HKDF runs over.
HashName = Literal["sha256", "sha384", "sha512"]

#: One immutable hash object per name, shared by every call.
_HASHES: dict[str, hashes.HashAlgorithm] = {
    "sha256": hashes.SHA256(),
    "sha384": hashes.SHA384(),
    "sha512": hashes.SHA512(),
}


def _algorithm(name: str) -> hashes.HashAlgorithm:
    try:
        return _HASHES[name]
    except KeyError:
        raise InvalidParameterError(
            f"unsupported HKDF hash {name!r}; use one of {sorted(_HASHES)}"
        ) from None


def _check_length(algorithm: str, alg: hashes.HashAlgorithm, length: int) -> None:
    limit = 255 * alg.digest_size
    if not 0 < length <= limit:
        raise InvalidParameterError(
            f"HKDF-{algorithm.upper()} output must be 1..{limit} bytes, asked for {length}"
        )


def hkdf_extract(ikm: Buffer, salt: Buffer = b"", *, algorithm: HashName = "sha256") -> bytes:
    """HKDF-Extract: PRK = HMAC-Hash(salt or zeros, IKM)."""
    alg = _algorithm(algorithm)
    ikm = key_bytes(ikm, "HKDF input keying material")
    return hmac.digest(bytes(salt) or bytes(alg.digest_size), ikm, algorithm)


def hkdf_expand(
    prk: Buffer, info: Buffer = b"", length: int = 32, *, algorithm: HashName = "sha256"
) -> bytes:
    """HKDF-Expand to ``length`` bytes (at most 255 hash lengths)."""
    alg = _algorithm(algorithm)
    _check_length(algorithm, alg, length)
    if len(prk) < alg.digest_size:
        raise InvalidParameterError(
            f"HKDF-Expand needs a PRK of at least {alg.digest_size} bytes, got {len(prk)}"
        )
    return HKDFExpand(alg, length, bytes(info)).derive(bytes(prk))


def hkdf(
    ikm: Buffer,
    *,
    salt: Buffer = b"",
    info: Buffer = b"",
    length: int = 32,
    algorithm: HashName = "sha256",
) -> bytes:
    """HKDF extract-then-expand (RFC 5869). An empty salt means a string of zeros."""
    alg = _algorithm(algorithm)
    _check_length(algorithm, alg, length)
    if type(ikm) is not bytes:
        ikm = key_bytes(ikm, "HKDF input keying material")
    return HKDF(alg, length, _bytes(salt) or None, _bytes(info)).derive(ikm)


def _bytes(data: Buffer) -> bytes:
    return data if type(data) is bytes else bytes(data)
