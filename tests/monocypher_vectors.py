"""Monocypher's vector files (tests/vectors/monocypher): records as tuples of bytes."""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent / "vectors" / "monocypher"

#: Fields per record of each vector kind (Monocypher's tests/test.c reads them so).
WIDTH = {
    "chacha20": 5,  # key, nonce8, plain, le64 counter, out
    "ietf_chacha20": 5,  # key, nonce12, plain, le32 counter, out
    "xchacha20": 5,  # key, nonce24, plain, le64 counter, out
    "hchacha20": 3,  # key, in16, out
    "aead_ietf": 5,  # key, nonce24, ad, text, mac || ciphertext
    "poly1305": 3,  # key, message, tag
    "blake2b": 3,  # message, key, digest (its length is the digest size)
    "sha512": 2,
    "sha512_hmac": 3,  # key, message, tag
    "sha512_hkdf": 4,  # ikm, salt, info, okm
    "argon2": 9,  # le32 algorithm, blocks, passes, lanes; password, salt, key, ad, digest
    "edDSA": 4,  # seed, public key, message, signature
    "edDSA_pk": 2,  # seed, public key
    "ed_25519": 4,
    "ed_25519_check": 4,  # public key, message, signature, 00 valid / ff invalid
    "ed_25519ph": 4,  # seed, public key, message, signature of SHA-512(message)
    "x25519": 3,  # scalar, point, shared
    "elligator_inv": 4,  # point, tweak, 00 success / ff failure, representative
    "elligator_dir": 2,  # representative, point
}


def _records(kind: str, fields: list[bytes]) -> list[tuple[bytes, ...]]:
    width = WIDTH[kind]
    assert len(fields) % width == 0, f"{kind}: {len(fields)} fields, not records of {width}"
    return [tuple(fields[i : i + width]) for i in range(0, len(fields), width)]


def vec_file(kind: str) -> list[tuple[bytes, ...]]:
    """Records of ``<kind>.vec``: hex fields ending in ':', '#' comments."""
    fields: list[bytes] = []
    for line in (HERE / f"{kind}.vec").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        assert line.endswith(":"), f"{kind}.vec: unexpected line {line[:40]!r}"
        fields.append(bytes.fromhex(line[:-1]))
    return _records(kind, fields)


def generated(kind: str) -> list[tuple[bytes, ...]]:
    """Records of one kind from generated.json."""
    data = json.loads((HERE / "generated.json").read_text())
    return _records(kind, [bytes.fromhex(h) for h in data[kind]])


def generated_kinds() -> list[str]:
    return sorted(json.loads((HERE / "generated.json").read_text()))
