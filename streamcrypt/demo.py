"""``make demo``: the end-to-end run on built-in defaults (grows as the product does)."""

from __future__ import annotations

import hashlib
import time

from .keys import SecretKey
from .primitives import AES256GCM

__all__ = ["main"]


def main() -> None:
    key = SecretKey.generate()
    aead = AES256GCM(key)
    data = bytes(range(256)) * 4096 * 16  # 16 MiB generated stream
    seg = 65536
    t0 = time.perf_counter()
    sealed = [
        aead.seal(i.to_bytes(12, "big"), data[off : off + seg])
        for i, off in enumerate(range(0, len(data), seg))
    ]
    opened = b"".join(aead.open(i.to_bytes(12, "big"), s) for i, s in enumerate(sealed))
    dt = time.perf_counter() - t0
    ok = hashlib.sha256(opened).digest() == hashlib.sha256(data).digest()
    print(
        f"sealed and opened {len(data) >> 20} MiB in {len(sealed)} segments "
        f"({2 * len(data) / dt / 1e6:.0f} MB/s), round trip {'ok' if ok else 'FAILED'}"
    )
    if not ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
