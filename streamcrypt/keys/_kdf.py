"""HKDF (RFC 5869) and HMAC, with typed errors.

Every HMAC here takes one public route, ``cryptography``'s :class:`HMAC` (OpenSSL's HMAC
context), and HKDF ``cryptography``'s own :class:`HKDF` (its HMACs in one native call).
The native container derives its keys per message (two HMACs keyed by the master key:
:func:`hmac_digests`, the key set up once and its context copied, kept in a
:class:`SecretKey`), so what an HMAC costs is what a message costs. Measured (Python
3.11, OpenSSL 3.0, cryptography 50, 2-vCPU VM, 2026-12-05, CPU us, medians of 9-11
interleaved rounds; HMAC-SHA256 of a short message): one through the standard library's
``hmac.digest`` 2.1 (OpenSSL 3.0's one-shot ``HMAC()`` looks the MAC up in its provider
store per call), ``hmac.new(...).digest()`` 1.9, ``cryptography``'s ``HMAC`` 1.9; two
under one key: ``hmac.new`` twice 3.9, a copied ``hmac.new`` 3.6, a copied
``cryptography`` ``HMAC`` 2.8, from a context kept per key 1.6. HKDF-SHA256 to 32 / 64
bytes: ``cryptography``'s ``HKDF`` 3.9 / 4.4, its ``HMAC`` one call a block 5.4 / 6.4.
(CPython's private ``_hashlib.hmac_new`` under ``hmac.new`` costs 1.2 for one HMAC and
2.9 / 4.3 for those HKDFs; it is no public API and not used.) Each is OpenSSL's HMAC,
constant-time native code; ``tests/test_kdf_mac_vectors.py`` checks :func:`hkdf`
against RFC 5869, Wycheproof and ``cryptography``'s HKDF, and :func:`hmac_digest` /
:func:`hmac_digests` against ``hmac.digest``.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable
from typing import Literal, cast

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.hmac import HMAC
from cryptography.hazmat.primitives.kdf.hkdf import HKDF, HKDFExpand

from ..abc import Buffer, as_bytes
from ..errors import InvalidParameterError
from ._secret import SecretKey, key_bytes

#: The hashes HKDF runs over.
HashName = Literal["sha256", "sha384", "sha512"]

#: Each hash HKDF and the HMACs take, as ``cryptography`` names it (made once).
_HASHES: dict[str, hashes.HashAlgorithm] = {
    "sha256": hashes.SHA256(),
    "sha384": hashes.SHA384(),
    "sha512": hashes.SHA512(),
}
#: Output bytes of each hash.
_SIZES: dict[str, int] = {name: h.digest_size for name, h in _HASHES.items()}


def _size(name: str) -> int:
    """The output size of hash ``name``; :class:`InvalidParameterError` for anything but
    a name in ``_SIZES`` (an unhashable object included)."""
    try:
        return _SIZES[name]
    except (KeyError, TypeError):
        raise InvalidParameterError(
            f"unsupported HKDF hash {name!r}; use one of {sorted(_SIZES)}"
        ) from None


def _hmac(key: bytes, algorithm: str) -> HMAC:
    """OpenSSL's HMAC context keyed by ``key``: the one HMAC route of this module."""
    return HMAC(key, _HASHES[algorithm])


def _mac(key: bytes, msg: bytes, algorithm: str) -> bytes:
    """HMAC(key, msg), the arguments already checked."""
    mac = _hmac(key, algorithm)
    mac.update(msg)
    return mac.finalize()


def hmac_digest(key: Buffer | SecretKey, msg: Buffer, algorithm: HashName = "sha256") -> bytes:
    """HMAC (RFC 2104) of ``msg`` under ``key`` with ``algorithm``.

    Raises :class:`InvalidParameterError` for another hash, a key that is no bytes-like
    object nor a :class:`SecretKey`, or a message that is not bytes-like;
    :class:`InvalidKeySizeError` for a wiped :class:`SecretKey`.
    """
    return hmac_digests(key, (msg,), algorithm)[0]


def hmac_digests(
    key: Buffer | SecretKey, messages: Iterable[Buffer], algorithm: HashName = "sha256"
) -> list[bytes]:
    """The HMAC of each of ``messages`` under one ``key``, OpenSSL's context keyed once
    and copied per message (two cost 2.8 us where two one-message HMACs take 3.9). A
    :class:`SecretKey` keeps its keyed context for the next call (two then cost 1.6 us).
    Raises as :func:`hmac_digest`."""
    msgs = messages if type(messages) is tuple else tuple(messages)
    last: tuple[Buffer, ...] = ()
    if type(key) is SecretKey:
        try:  # its kept context, inline (only a hash of _HASHES is kept); each message copies it
            keyed: HMAC = key._macs[algorithm]  # type: ignore[assignment]  # never updated
        except (KeyError, TypeError):
            keyed = _kept(key, algorithm)
    else:  # _hmac, inline (a call less a message)
        if type(algorithm) is not str or algorithm not in _HASHES:
            _size(algorithm)
        keyed = HMAC(
            key if type(key) is bytes else key_bytes(key, "an HMAC key"), _HASHES[algorithm]
        )
        msgs, last = msgs[:-1], msgs[-1:]  # the last takes this call's context itself
    out = []
    for msg in msgs:
        mac = keyed.copy()
        mac.update(msg if type(msg) is bytes else as_bytes(msg, "an HMAC message"))
        out.append(mac.finalize())
    for msg in last:
        keyed.update(msg if type(msg) is bytes else as_bytes(msg, "an HMAC message"))
        out.append(keyed.finalize())
    return out


def _kept(key: SecretKey, algorithm: str) -> HMAC:
    """``key``'s HMAC context for ``algorithm``, keyed on first use and kept in the key
    object (:meth:`SecretKey.wipe` drops it, so a wiped key raises here as it would
    anywhere): what an HMAC keyed by a long-lived key sets up once, not per message."""
    if type(algorithm) is not str or algorithm not in _HASHES:
        _size(algorithm)
    kept = key._macs.get(algorithm)
    if kept is None:
        kept = key._macs[algorithm] = _hmac(key_bytes(key, "an HMAC key"), algorithm)
    return cast("HMAC", kept)


def _check_length(algorithm: str, size: int, length: int) -> int:
    """``length`` as an ``int`` (:func:`operator.index`: a float is refused) if HKDF over
    ``algorithm`` gives that many bytes, else :class:`InvalidParameterError`."""
    limit = 255 * size
    try:
        length = operator.index(length)
    except TypeError:
        raise InvalidParameterError(
            f"HKDF output length must be an int, not {type(length).__name__}"
        ) from None
    if not 0 < length <= limit:
        raise InvalidParameterError(
            f"HKDF-{algorithm.upper()} output must be 1..{limit} bytes, asked for {length}"
        )
    return length


def hkdf_extract(
    ikm: Buffer | SecretKey, salt: Buffer = b"", *, algorithm: HashName = "sha256"
) -> bytes:
    """HKDF-Extract: PRK = HMAC-Hash(salt or zeros, IKM)."""
    size = _size(algorithm)
    ikm = key_bytes(ikm, "HKDF input keying material")
    return _mac(as_bytes(salt, "an HKDF salt") or bytes(size), ikm, algorithm)


def hkdf_expand(
    prk: Buffer, info: Buffer = b"", length: int = 32, *, algorithm: HashName = "sha256"
) -> bytes:
    """HKDF-Expand to ``length`` bytes (at most 255 hash lengths)."""
    size = _size(algorithm)
    length = _check_length(algorithm, size, length)
    if len(prk) < size:
        raise InvalidParameterError(
            f"HKDF-Expand needs a PRK of at least {size} bytes, got {len(prk)}"
        )
    expand = HKDFExpand(_HASHES[algorithm], length, as_bytes(info, "HKDF info"))
    return expand.derive(as_bytes(prk, "an HKDF PRK"))


def hkdf(
    ikm: Buffer | SecretKey,
    *,
    salt: Buffer = b"",
    info: Buffer = b"",
    length: int = 32,
    algorithm: HashName = "sha256",
) -> bytes:
    """HKDF extract-then-expand (RFC 5869). An empty salt means a string of zeros."""
    size = _SIZES.get(algorithm) if type(algorithm) is str else None
    if size is None:
        size = _size(algorithm)
    if type(length) is not int or not 0 < length <= 255 * size:
        length = _check_length(algorithm, size, length)
    if type(ikm) is not bytes:
        ikm = key_bytes(ikm, "HKDF input keying material")
    zeros_if_none = as_bytes(salt, "an HKDF salt") or None  # HashLen zeros, as b"" would be
    return HKDF(_HASHES[algorithm], length, zeros_if_none, as_bytes(info, "HKDF info")).derive(ikm)
