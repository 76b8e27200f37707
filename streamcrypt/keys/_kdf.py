"""HKDF (RFC 5869) over ``cryptography``'s implementation, with typed errors."""

from __future__ import annotations

from typing import Literal

from cryptography.hazmat.primitives import hashes, hmac
from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand

from ..abc import Buffer
from ..errors import InvalidParameterError
from ._secret import key_bytes

__all__ = ["HashName", "hkdf", "hkdf_expand", "hkdf_extract"]

#: The hashes HKDF runs over.
HashName = Literal["sha256", "sha384", "sha512"]

_HASHES: dict[str, type[hashes.HashAlgorithm]] = {
    "sha256": hashes.SHA256,
    "sha384": hashes.SHA384,
    "sha512": hashes.SHA512,
}


def _algorithm(name: str) -> hashes.HashAlgorithm:
    try:
        return _HASHES[name]()
    except KeyError:
        raise InvalidParameterError(
            f"unsupported HKDF hash {name!r}; use one of {sorted(_HASHES)}"
        ) from None


def hkdf_extract(ikm: Buffer, salt: Buffer = b"", *, algorithm: HashName = "sha256") -> bytes:
    """HKDF-Extract: PRK = HMAC-Hash(salt or zeros, IKM)."""
    alg = _algorithm(algorithm)
    h = hmac.HMAC(bytes(salt) or bytes(alg.digest_size), alg)
    h.update(key_bytes(ikm, "HKDF input keying material"))
    return h.finalize()


def hkdf_expand(
    prk: Buffer, info: Buffer = b"", length: int = 32, *, algorithm: HashName = "sha256"
) -> bytes:
    """HKDF-Expand to ``length`` bytes (at most 255 hash lengths)."""
    alg = _algorithm(algorithm)
    limit = 255 * alg.digest_size
    if not 0 < length <= limit:
        raise InvalidParameterError(
            f"HKDF-{algorithm.upper()} output must be 1..{limit} bytes, asked for {length}"
        )
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
    return hkdf_expand(
        hkdf_extract(ikm, salt, algorithm=algorithm), info, length, algorithm=algorithm
    )
