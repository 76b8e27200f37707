"""Keys held in a PKCS#11 token (SoftHSM2) against keys in memory (issue 30).

Per stream: what a token-held key adds to a small message (one wrap in the token to
encrypt, one unwrap to decrypt) against the same message under a key in memory. Bulk:
64 MiB through ``encrypt_bytes``/``decrypt_bytes`` with a token key against a key in
memory; the token is asked once per stream, so the target is >= 0.95x.
"""

from __future__ import annotations

import os
import statistics
import time

import streamcrypt as sc
from streamcrypt.keys import KeyRing, Pkcs11Key, SecretKey
from streamcrypt.testing import softhsm_token

from ._report import Report, gbps, median_time


def run(report: Report, quick: bool = False) -> None:
    hsm = softhsm_token()
    token = Pkcs11Key.generate(hsm.uri("bench"), pin=hsm.pin_source)
    rings = {
        "key in memory": KeyRing([SecretKey.generate(key_id="bench")]),
        "token key (SoftHSM2)": KeyRing([token]),
    }
    n = 200 if quick else 2000
    small = os.urandom(1024)
    per_stream = report.table(
        f"Per stream: a 1 KiB message, encrypt and decrypt (us, median of {n})",
        ["key", "encrypt", "decrypt", "wrap alone", "unwrap alone"],
    )
    blob = token.wrap(bytes(32))
    for name, ring in rings.items():
        sealed = sc.encrypt_bytes(small, key=ring)
        enc = median_time(lambda r=ring: sc.encrypt_bytes(small, key=r), repeat=n) * 1e6
        dec = median_time(lambda r=ring, s=sealed: sc.decrypt_bytes(s, key=r), repeat=n) * 1e6
        wrap = unwrap = "-"
        if name.startswith("token"):
            wrap = f"{median_time(lambda: token.wrap(bytes(32)), repeat=n) * 1e6:.1f}"
            unwrap = f"{median_time(lambda: token.unwrap(blob), repeat=n) * 1e6:.1f}"
        per_stream.add(name, enc, dec, wrap, unwrap)

    size = (16 if quick else 64) << 20
    data = os.urandom(size)
    rounds = 3 if quick else 9
    bulk = report.table(
        f"Bulk: {size >> 20} MiB, encrypt_bytes and decrypt_bytes (median of {rounds} rounds; "
        "the keys alternate, each first in every other round). Wall GB/s, and the ratio "
        "of process CPU time (all threads), which the machine's other load does not move",
        [
            "key",
            "encrypt GB/s",
            "decrypt GB/s",
            "encrypt vs memory",
            "decrypt vs memory",
            "encrypt CPU vs memory",
            "decrypt CPU vs memory",
        ],
    )
    sealed = {name: sc.encrypt_bytes(data, key=ring) for name, ring in rings.items()}
    samples: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for i in range(rounds):
        for name, ring in list(rings.items())[:: 1 if i % 2 else -1]:  # each goes first
            for op, call in (
                ("encrypt", lambda r=ring: sc.encrypt_bytes(data, key=r)),
                ("decrypt", lambda r=ring, c=sealed[name]: sc.decrypt_bytes(c, key=r)),
            ):
                cpu, wall = time.process_time(), time.perf_counter()
                call()
                sample = (time.perf_counter() - wall, time.process_time() - cpu)
                samples.setdefault((name, op), []).append(sample)

    def median(name: str, op: str, which: int) -> float:
        return statistics.median(s[which] for s in samples[(name, op)])

    for name in rings:
        bulk.add(
            name,
            *(gbps(size, median(name, op, 0)) for op in ("encrypt", "decrypt")),
            *(
                f"{median('key in memory', op, which) / median(name, op, which):.2f}x"
                for which in (0, 1)
                for op in ("encrypt", "decrypt")
            ),
        )
