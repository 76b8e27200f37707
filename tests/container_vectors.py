"""Deterministic native-container vectors (fixed keys, salts, prefixes).

``python tests/container_vectors.py`` rewrites tests/data/container_v1.json; the test
suite regenerates them and compares, so a format change cannot slip in unnoticed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from streamcrypt.codecs.container import StreamEncryptor
from streamcrypt.keys import SecretKey

PATH = Path(__file__).parent / "data" / "container_v1.json"

CASES: list[dict[str, Any]] = [
    {"suite": "aes-256-gcm", "segment_size": 256, "length": 0, "aad": "", "key_id": ""},
    {"suite": "aes-256-gcm", "segment_size": 256, "length": 255, "aad": "", "key_id": ""},
    {"suite": "aes-256-gcm", "segment_size": 256, "length": 256, "aad": "6869", "key_id": "k1"},
    {"suite": "aes-256-gcm", "segment_size": 256, "length": 700, "aad": "", "key_id": "2026-q4"},
    {"suite": "chacha20-poly1305", "segment_size": 256, "length": 513, "aad": "00ff", "key_id": ""},
    {"suite": "xchacha20-poly1305", "segment_size": 300, "length": 900, "aad": "", "key_id": "x"},
    {"suite": "aes-256-gcm", "segment_size": 65536, "length": 70000, "aad": "", "key_id": ""},
]


def build() -> list[dict[str, Any]]:
    out = []
    for i, case in enumerate(CASES):
        key = bytes(range(i, i + 32))
        salt = bytes([0xA0 + i]) * 32
        prefix_len = 19 if case["suite"] == "xchacha20-poly1305" else 7
        prefix = bytes([0x50 + i]) * prefix_len
        plaintext = bytes((j * 7 + i) % 251 for j in range(case["length"]))
        enc = StreamEncryptor(
            SecretKey(key, key_id=case["key_id"]),
            suite=case["suite"],
            segment_size=case["segment_size"],
            aad=bytes.fromhex(case["aad"]),
            salt=salt,
            nonce_prefix=prefix,
        )
        ct = enc.update(plaintext) + enc.finalize()
        out.append(
            {
                **case,
                "key": key.hex(),
                "salt": salt.hex(),
                "nonce_prefix": prefix.hex(),
                "plaintext": plaintext.hex(),
                "ciphertext": ct.hex(),
            }
        )
    return out


if __name__ == "__main__":
    PATH.write_text(json.dumps(build(), indent=1) + "\n")
    print(f"wrote {len(CASES)} vectors to {PATH}")
