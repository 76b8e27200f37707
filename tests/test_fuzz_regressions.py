"""Fuzz findings, minimised, kept as regression cases (issue 14).

Each input goes through the same harness as the fuzzers (fuzz/_harness.py): only typed
errors, no slow call, the same verdict whole and in pieces. The expected verdict is
checked too, so a case cannot pass by being refused for another reason.
"""

from __future__ import annotations

import base64
import json

import pytest
from support import age_encrypt

from fuzz import _keys
from fuzz._harness import check, verdict
from fuzz.targets import TARGETS


def _age_scrypt_header(work_factor: bytes) -> bytes:
    """A passphrase file (work factor 2) whose stanza names another work factor."""
    sealed = age_encrypt(b"data", passphrase=_keys.PASSPHRASE, work_factor=2)
    return sealed.replace(b" 2\n", b" " + work_factor + b"\n", 1)


def _clear_ring(key_id: str) -> bytes:
    doc = json.loads(_keys.RING.to_json(insecure_plaintext=True))
    doc["keys"][0]["id"] = doc["active"] = key_id
    return json.dumps(doc).encode()


_KEY = base64.b64encode(bytes(32)).decode()

#: (target, input, expected verdict: "ok" or the error family)
CASES: list[tuple[str, bytes, str]] = [
    # found by the mutation smoke: a bad header line before an incomplete MAC line was a
    # FormatError in pieces and a TruncatedStreamError whole
    ("age", b"age-encryption.org/v1\n\x00l\no9JotxkA\n--- JaAz", "FormatError"),
    # issue 14, finding 1: untyped exceptions
    ("age", _age_scrypt_header(b"9" * 4301), "LimitExceededError"),
    ("age", _age_scrypt_header(b"1" + b"0" * 30000), "LimitExceededError"),
    ("tink-keyset-json", b'{"a":' + b"[" * 5000, "FormatError"),
    ("tink-keyset-json", b'{"primaryKeyId":1e400}', "FormatError"),
    ("tink-keyset-json", b'{"primaryKeyId":1,"key":[{"keyId":Infinity}]}', "FormatError"),
    ("keyring", b"[" * 979, "FormatError"),
    ("keyring", b"[" * 100_000 + b"]" * 100_000, "FormatError"),
    (
        "keyring",
        b'{"streamcrypt_keyring":1,"keys":[],"active":null,"kdf":{"alg":[]},'
        b'"cipher":"chacha20-poly1305","nonce":"","secrets":""}',
        "FormatError",
    ),
    ("keyring-clear", _clear_ring("\ud800"), "FormatError"),
    ("cli-keyfile", b'{"primaryKeyId":1e400}', "KeyFileError"),
    ("cli-keyfile", b'{"a":' + b"[" * 5000, "KeyFileError"),
    ("cli-keyfile", f"streamcrypt-key: 1\ntype: symmetric\nkey: {_KEY}\n".encode(), "ok"),
]


@pytest.mark.parametrize(("target", "data", "expected"), CASES)
def test_regression(target: str, data: bytes, expected: str) -> None:
    assert check(TARGETS[target], data) == []
    (kind, detail), _ = verdict(TARGETS[target], [data])
    assert (kind if kind == "ok" else detail) == expected
